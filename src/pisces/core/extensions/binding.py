"""ExtensionHost: the extensions of one session, wired into it.

The session talks to it through the small interface of ``pisces.core.session.hooks.NoHooks`` (``session.hooks``): the
cancellable ``session_before_*`` events, extension commands, ``input``, ``before_agent_start``, the agent events,
reload and shutdown. The host installs the tool-call gate (``tool_call``/``tool_result``), ``context`` and
``before_provider_request`` on the agent, registers extension tools as agent tools, reports handler failures as
``extension_error`` events (and ``hook_error`` for seed 003 hooks), and rebuilds the extension runtime when the
session is replaced (new, resume, fork) or reloaded, as pi 0.73.1 does.
"""

from __future__ import annotations

import asyncio
import inspect
import sys
from collections import deque
from typing import Any, Callable

import msgspec
from msgspec import UNSET

from pisces.agent.gate import EXTENSIONS_RANK, install
from pisces.agent.types import GateDecision, ResultPatch
from pisces.ai.types import StreamOptions, now_ms
from pisces.core.errors import UsageError
from pisces.core.extensions.actions import Actions, custom_message
from pisces.core.extensions.api import STALE, Runtime, pick
from pisces.core.extensions.context import CommandContext, ExtensionContext
from pisces.core.extensions.loader import discover, load_all
from pisces.core.extensions.runner import ExtensionRunner, error_text
from pisces.core.extensions.sources import extension_sources_present
from pisces.core.extensions.tools import ExtensionTool, to_content
from pisces.core.resources.templates import slash_command
from pisces.core.tools.groups import replace_tool_group

TOOL_GROUP = "extensions"


class LoadResult:
    def __init__(self, runner: ExtensionRunner, failures: list[tuple[Any, str]]) -> None:
        self.runner = runner
        self.failures = failures


async def load_extensions(options: dict[str, Any], settings: Any, flag_values: dict[str, Any] | None = None,
                          *, keep_empty: bool = False) -> LoadResult | None:
    """Discover and load (``register``) every extension source; nothing is bound to a session yet. None when
    there is no source at all (unless ``keep_empty``: a replaced runtime may well be empty)."""
    cwd, agent_dir = options["cwd"], options["agent_dir"]
    sources, notes = discover(cwd, agent_dir, global_settings=settings.global_settings(),
                              project_settings=settings.project_settings(), cli_paths=options.get("cli_paths"),
                              no_extensions=bool(options.get("no_extensions")), inline=options.get("inline"))
    for note in notes:
        sys.stderr.write(f"pisces: {note}\n")
    if not sources and not keep_empty:
        return None
    runtime = Runtime(cwd, flag_values)
    extensions, failures = await load_all(sources, runtime)
    for source, error in failures:
        sys.stderr.write(f'pisces: Failed to load extension "{source.path}": {error}\n')
    return LoadResult(ExtensionRunner(extensions, runtime), failures)


def apply_providers(result: LoadResult, registry: Any) -> None:
    """Providers registered while loading, into the model registry (before a model is chosen)."""
    _register_pending_providers(result.runner.runtime, registry, result.failures)


def _register_pending_providers(runtime: Runtime, registry: Any, failures: list[tuple[Any, str]]) -> None:
    """The providers ``register()`` queued, into ``registry``; a refused one joins ``failures``."""
    for name, config, path in runtime.pending_providers:
        try:
            registry.register_provider(name, config)
        except Exception as exc:  # noqa: BLE001
            failures.append((_Named(path), f"register_provider {name}: {error_text(exc)}"))
    runtime.pending_providers = []


def resolve_flags(result: LoadResult, args: list[str]) -> None:
    """Command-line words argparse did not know: ``--name`` (a boolean flag) or ``--name=value`` of a flag an
    extension registered. Anything else is the usage error argparse would have given."""

    flags = result.runner.flags()
    unknown = []
    values = result.runner.runtime.flag_values
    for arg in args:
        name, eq, value = arg[2:].partition("=") if arg.startswith("--") else ("", "", "")
        flag = flags.get(name)
        if flag is None:
            unknown.append(arg)
        elif flag["type"] == "boolean" and not eq:
            values[name] = True
        elif flag["type"] == "string" and eq:
            values[name] = value
        else:
            unknown.append(arg)
    if unknown:
        raise UsageError(f"unrecognized arguments: {' '.join(unknown)}")


async def reload_extensions(session: Any) -> None:
    """``reload_resources``: the extensions again (and a host, if extensions appeared since start-up)."""
    if session.hooks.active:
        await session.hooks.reload()
        return

    if not extension_sources_present(session.extension_options, session.settings):
        return
    loaded = await load_extensions(session.extension_options, session.settings)
    if loaded is None:
        return
    await ExtensionHost(session, session.extension_options, loaded).start("reload")


class _Named:
    def __init__(self, path: str) -> None:
        self.path = path
        self.kind = "extension"


class ExtensionHost:
    active = True

    def __init__(self, session: Any, options: dict[str, Any], loaded: LoadResult) -> None:
        self.session = session
        self.options = options
        self.runner = loaded.runner
        self._failures = list(loaded.failures)
        self._queue: deque[tuple[Any, Callable[[Any], None]]] = deque()
        self._worker: asyncio.Task | None = None
        self._drained: asyncio.Event | None = None
        self._tasks: set[asyncio.Task] = set()
        self._turn_index = 0
        session.hooks = self
        agent = session.agent

        install(agent).add(EXTENSIONS_RANK, before=self._before_tool_call, after=self._after_tool_call)
        agent.transform_context = self._transform_context
        base_options = agent.stream_options

        def stream_options(model: Any) -> Any:
            opts = base_options(model) if base_options is not None else StreamOptions()
            # before_provider_request: only when a handler is there to see the payload (without one, the
            # provider may hand over the message dicts it keeps between requests, see ai.providers._memo)
            if self.runner.has_handlers("before_provider_request"):
                opts.onPayload = self.payload_hook
            return opts

        agent.stream_options = stream_options
        self._bind()

    # -- binding ------------------------------------------------------------------------------------
    def _bind(self) -> None:
        runner = self.runner
        runner.make_context = lambda: ExtensionContext(self, runner.runtime)
        runner.error_listeners = [self._report]
        runner.runtime.actions = Actions(self)
        runner.runtime.sandbox = lambda: getattr(self.session, "sandbox", None)  # confines pi.exec
        runner.runtime.events.on_error = lambda channel, exc: self._report(
            {"extensionPath": "<events>", "event": channel, "error": error_text(exc), "kind": "extension"})
        # registered by a fresh runtime's register() (at start-up apply_providers has taken them already)
        _register_pending_providers(runner.runtime, self.session.registry, self._failures)
        self.refresh_tools()

    def refresh_tools(self) -> None:
        tools = [ExtensionTool(d, lambda: ExtensionContext(self, self.runner.runtime)) for d in self.runner.tools()]
        replace_tool_group(self.session, TOOL_GROUP, tools)

    def _report(self, report: dict[str, Any]) -> None:
        path, event, error, kind = report["extensionPath"], report["event"], report["error"], report.get("kind")
        sys.stderr.write(f"pisces: extension {path} failed in {event}: {error}\n")
        self.session.emit({"type": "extension_error", "extensionPath": path, "hookPath": path, "event": event,
                           "error": error})
        if kind == "hook":
            self.session.emit({"type": "hook_error", "hookPath": path, "event": event, "error": error})

    def spawn(self, coro: Any, what: str) -> asyncio.Task:
        """Run ``coro`` in the background; a failure is reported as an ``extension_error`` of ``<runtime>``."""
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)

        def done(t: asyncio.Task) -> None:
            self._tasks.discard(t)
            failure = None if t.cancelled() else t.exception()
            if failure is not None:
                self._report({"extensionPath": "<runtime>", "event": what, "error": error_text(failure),
                              "kind": "extension"})

        task.add_done_callback(done)
        return task

    def request_shutdown(self) -> None:
        """``ctx.shutdown()``: the mode's handler (RPC: exit once the current command is answered)."""
        handler = self.options.get("shutdown_handler")
        if handler is not None:
            handler()

    def replaced_context(self) -> CommandContext:
        return CommandContext(self, self.runner.runtime)

    # -- lifecycle ------------------------------------------------------------------------------------
    async def start(self, reason: str = "startup", previous: str | None = None) -> None:
        """Report load failures, then ``session_start`` and ``resources_discover`` (the mode calls this once its
        UI and event listeners are in place)."""
        failures, self._failures = self._failures, []
        for source, error in failures:
            self._report({"extensionPath": source.path, "event": "load", "error": error,
                          "kind": getattr(source, "kind", "extension")})
        event: dict[str, Any] = {"type": "session_start", "reason": reason}
        if previous is not None:
            event["previousSessionFile"] = previous
        # pi 0.73.1's RPC mode binds a replaced session's runtime twice, so its session_start handlers run twice
        # (run 17); RPC mode asks for the same (``rebinds_on_replace``) so that clients see the same frames
        twice = self.options.get("rebinds_on_replace") and reason in ("new", "resume", "fork")
        times = 2 if twice else 1
        for _ in range(times):
            await self.runner.emit(event)
        legacy = {"new": "session_switch", "resume": "session_switch", "fork": "session_branch"}.get(reason)
        if legacy:
            await self.runner.emit({"type": legacy, "reason": reason, "previousSessionFile": previous})
        await self._discover_resources("reload" if reason == "reload" else "startup")

    async def _discover_resources(self, reason: str) -> None:
        if not self.runner.has_handlers("resources_discover"):
            return
        found = await self.runner.emit_resources_discover(self.session.cwd, reason)
        extra = self.session.resources
        changed = False
        for key in ("skillPaths", "promptPaths"):
            for path, _ext in found[key]:
                if path not in extra[key]:
                    extra[key].append(path)
                    changed = True
        if changed:
            self.session.refresh_system_prompt()

    async def leaving(self, reason: str, target: str | None) -> None:
        """The session is about to move (``new``, ``resume``, ``fork``) or reload: ``session_shutdown`` to the
        current runtime, which is stale from then on."""
        event: dict[str, Any] = {"type": "session_shutdown", "reason": reason}
        if target is not None:
            event["targetSessionFile"] = target
        await self.runner.emit(event)
        self.runner.runtime.stale = STALE

    async def _load_fresh(self) -> None:
        flags = dict(self.runner.runtime.flag_values)
        self.session.settings.reload()
        loaded = await load_extensions(self.options, self.session.settings, flags, keep_empty=True)
        assert loaded is not None
        self.runner = loaded.runner
        self._failures.extend(loaded.failures)
        self._bind()

    async def replaced(self, reason: str, previous: str | None, target: str | None) -> None:
        """The session moved to another file: a fresh runtime (new module instances), then ``session_start``."""
        await self._load_fresh()
        await self.start(reason, previous)

    async def reload(self) -> None:
        await self.leaving("reload", None)
        await self._load_fresh()
        self.session.refresh_system_prompt()
        await self.start("reload")

    async def shutdown(self, reason: str = "quit") -> None:
        await self.runner.emit({"type": "session_shutdown", "reason": reason})
        for task in list(self._tasks):
            task.cancel()

    # -- session events ---------------------------------------------------------------------------------
    async def before(self, name: str, event: dict[str, Any]) -> Any:
        return await self.runner.emit({"type": name, **event})

    async def notify(self, event: dict[str, Any]) -> None:
        await self.runner.emit(event)

    def notify_soon(self, event: dict[str, Any]) -> None:
        if not self.runner.has_handlers(event["type"]):
            return
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # synchronous SDK use, no event loop: nobody to run the handlers now
            return
        self.spawn(self.runner.emit(event), event["type"])

    def command_name(self, text: str) -> str | None:
        if not text.startswith("/"):
            return None
        name = text[1:].split(" ", 1)[0]
        return name if self.runner.command(name) is not None else None

    async def run_command(self, text: str) -> bool:
        name, _, args = text[1:].partition(" ")
        command = self.runner.command(name)
        if command is None:
            return False
        ctx = CommandContext(self, self.runner.runtime)
        try:
            call = (args, ctx)[:min(command.handler_args, 2)]
            result = command.handler(*call)
            if inspect.isawaitable(result):
                await result
        except Exception as exc:  # noqa: BLE001 - reported; the prompt still succeeds, as in pi
            self._report({"extensionPath": f"command:{name}", "event": "command", "error": error_text(exc),
                          "kind": "extension"})
        return True

    async def input(self, text: str, images: Any, source: str) -> tuple[bool, str, Any]:
        if not self.runner.has_handlers("input"):
            return False, text, images
        action, text, images = await self.runner.emit_input(text, images, source)
        return action == "handled", text, images

    async def before_agent_start(self, prompt: str, images: Any, base_prompt: Callable[[], str]
                                 ) -> tuple[list[Any], str | None]:
        if not self.runner.has_handlers("before_agent_start"):
            return [], None

        runtime = self.runner.runtime
        messages, system_prompt = await self.runner.emit_before_agent_start(
            prompt, images, base_prompt(), lambda current: ExtensionContext(self, runtime, current))
        return [custom_message(m) for m in messages], system_prompt

    async def user_bash(self, command: str, cwd: str) -> dict[str, Any] | None:
        if not self.runner.has_handlers("user_bash"):
            return None

        out = await self.runner.emit_user_bash({"type": "user_bash", "command": command,
                                                "excludeFromContext": False, "cwd": cwd})
        result = pick(out, "result")
        if not isinstance(result, dict):
            if pick(out, "operations") is not None:  # refused rather than run on the local shell unasked
                raise RuntimeError("a user_bash handler returned 'operations' (another shell backend), which pisces "
                                   "does not support: return {'result': {'output', 'exitCode'}} instead")
            return None
        data: dict[str, Any] = {"output": str(pick(result, "output", default=""))}
        code = pick(result, "exitCode", "exit_code")
        if isinstance(code, int):
            data["exitCode"] = code
        data["cancelled"] = bool(pick(result, "cancelled", default=False))
        data["truncated"] = bool(pick(result, "truncated", default=False))
        return data

    def commands(self) -> list[dict[str, Any]]:
        return [slash_command(name, "extension", command.description, dict(command.extension.source_info))
                for name, command in self.runner.commands()]

    # -- agent events: handlers first, then the session (as pi), in order ---------------------------------
    def agent_event(self, event: Any, deliver: Callable[[Any], None]) -> None:
        kind = _kind(event)
        if kind == "agent_start":
            self._turn_index = 0
        if not self._queue and not self.runner.has_handlers(kind):
            deliver(event)
            return
        if self._queue and kind == "message_update":
            event = _snapshot(event)  # delivered later: keep the message as it is now
        self._queue.append((event, deliver))
        if self._worker is None or self._worker.done():
            self._drained = asyncio.Event()
            self._worker = asyncio.ensure_future(self._work())

    async def _work(self) -> None:
        try:
            while self._queue:
                event, deliver = self._queue[0]
                kind = _kind(event)
                if self.runner.has_handlers(kind):
                    out = await self.runner.emit(self._as_event(kind, event))
                    if kind == "message_end" and out is not None:  # a handler replaced the finished message:
                        new = out["message"]  # in place, so the agent's context and the file both get it
                        for field in new.__struct_fields__:
                            setattr(event.message, field, getattr(new, field))
                self._queue.popleft()
                deliver(event)
        finally:
            while self._queue:  # cancelled (shutdown): what is left still reaches the session, in order
                event, deliver = self._queue.popleft()
                deliver(event)
            if self._drained is not None:
                self._drained.set()

    def _as_event(self, kind: str, event: Any) -> dict[str, Any]:
        data: dict[str, Any] = {"type": kind, **msgspec.structs.asdict(event)}
        if kind == "turn_start":
            data["turnIndex"] = self._turn_index
            data["timestamp"] = now_ms()
        elif kind == "turn_end":
            data["turnIndex"] = self._turn_index
            self._turn_index += 1
        return data

    def abort_handlers(self) -> None:
        """The session aborts: every handler still awaited is abandoned (see pisces.core.extensions.runner)."""
        self.runner.abort_pending()

    def abort_finished(self) -> None:
        self.runner.abort_finished()

    async def drain(self) -> None:
        if self._worker is not None and not self._worker.done() and self._drained is not None:
            await self._drained.wait()

    # -- the agent's hooks --------------------------------------------------------------------------------
    async def _before_tool_call(self, info: Any) -> Any:
        if not self.runner.has_handlers("tool_call"):
            return None
        await self.drain()

        out = await self.runner.emit_tool_call({"type": "tool_call", "toolCallId": info.tool_call_id,
                                                "toolName": info.tool_name, "input": info.args})
        if out and pick(out, "block"):
            reason = pick(out, "reason")
            return GateDecision(block=True, reason=reason if isinstance(reason, str) else None)
        return None

    async def _after_tool_call(self, info: Any, result: Any, is_error: bool) -> Any:
        if not self.runner.has_handlers("tool_result"):
            return None


        out = await self.runner.emit_tool_result({
            "type": "tool_result", "toolCallId": info.tool_call_id, "toolName": info.tool_name, "input": info.args,
            "content": result.content, "details": None if result.details is UNSET else result.details,
            "isError": is_error})
        if out is None:
            return None
        return ResultPatch(content=to_content(out["content"]), details=out["details"], isError=bool(out["isError"]))

    async def _transform_context(self, messages: list[Any], signal: Any) -> list[Any]:
        if not self.runner.has_handlers("context"):
            return messages
        return await self.runner.emit_context(messages)

    async def payload_hook(self, payload: Any) -> Any:
        if not self.runner.has_handlers("before_provider_request"):
            return payload
        return await self.runner.emit_before_provider_request(payload)


def _kind(event: Any) -> str:
    return type(event).__struct_config__.tag  # agent events are tagged msgspec structs


def _snapshot(event: Any) -> Any:
    message = event.message
    copy = msgspec.convert(msgspec.to_builtins(message), type(message))
    return msgspec.structs.replace(event, message=copy)
