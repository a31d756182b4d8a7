"""ExtensionRunner: delivers events to the handlers of the loaded extensions, with pi's combination rules.

Handlers run one after another in load order (extensions in load order, each one's handlers in the order it
registered them). What their results mean depends on the event:

- ``session_before_*``: the first ``{"cancel": True}`` stops the loop and is the result; otherwise the last
  result returned;
- ``tool_call``: the first ``{"block": True}`` stops the loop; ``event.input`` may be changed in place;
- ``tool_result``: a chain; each handler sees the event as patched so far (``content``, ``details``, ``isError``);
- ``input``: transforms chain; the first ``{"action": "handled"}`` stops;
- ``before_agent_start``: every ``message`` is collected, ``systemPrompt`` chains;
- ``context``: ``messages`` chain; ``before_provider_request``: any value other than None replaces the payload;
- ``user_bash``: the first result wins; ``resources_discover``: the paths of all handlers;
- everything else: notification only.

A handler that raises is reported (``extension_error``) and the loop goes on, except for ``tool_call``, where
the call is also blocked (fail closed).

Abort always wins over a handler (``abort_pending``, called by the session's ``abort``): a handler that is still
awaiting when the session aborts has one second (ABORT_GRACE_S, the agent loop's grace for tools too) to return,
then it is abandoned, whatever it does.
Its task is cancelled (a cooperative handler stops there); if it goes on anyway, nothing waits for it and whatever
it returns later is dropped. The event's delivery ends as if no later handler existed (a ``tool_call`` is blocked
with "Operation aborted"). While the abort winds the run down, a handler that starts (``agent_end``, a turn's
events) has until the same deadline: the whole wind-down takes at most that second. A synchronous handler that never
returns holds the whole process (Python cannot stop a running thread of its own); extensions must not block, and
await instead.
"""

from __future__ import annotations

import asyncio
import inspect
from typing import Any, AsyncIterator, Callable

from pisces.agent.watchdog import ABORT_GRACE_S, drop_late_result
from pisces.core.extensions.api import CommandDefinition, Event, Extension, Runtime, ToolDefinition, pick
from pisces.core.extensions.tools import to_content

ErrorListener = Callable[[dict[str, Any]], None]

SESSION_BEFORE = {"session_before_switch", "session_before_fork", "session_before_compact", "session_before_tree"}
# older names of the same events (seed 003 / oh-my-pi), delivered to handlers registered under them too
ALIASES = {"session_before_fork": ("session_before_branch",)}


def error_text(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


class HandlerAborted(Exception):
    """The session aborted while a handler was still running: the handler was abandoned."""


def _release(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


class ExtensionRunner:
    def __init__(self, extensions: list[Extension], runtime: Runtime) -> None:
        self.extensions = extensions
        self.runtime = runtime
        self.make_context: Callable[[], Any] = lambda: None  # set by the host when it binds
        self.error_listeners: list[ErrorListener] = []
        self._aborts: set[asyncio.Future[None]] = set()  # one per handler awaited right now
        self._abort_deadline: float | None = None  # loop time: between the session's abort and its idle again

    def abort_pending(self) -> int:
        """The session aborts: every handler being awaited gets ABORT_GRACE_S to return (a dialog it waits on
        is cancelled by the same abort, so a cooperative one answers at once), then is abandoned; until
        ``abort_finished``, a handler that starts meanwhile gets the same. Returns how many were running."""
        loop = asyncio.get_running_loop()
        self._abort_deadline = loop.time() + ABORT_GRACE_S
        pending = [f for f in self._aborts if not f.done()]
        for f in pending:
            loop.call_at(self._abort_deadline, _release, f)
        return len(pending)

    def abort_finished(self) -> None:
        self._abort_deadline = None

    # -- errors -------------------------------------------------------------------------------------
    def emit_error(self, extension_path: str, event: str, error: Any, kind: str = "extension") -> None:
        report = {"extensionPath": extension_path, "event": event,
                  "error": error_text(error) if isinstance(error, BaseException) else str(error), "kind": kind}
        for listener in list(self.error_listeners):
            try:
                listener(report)
            except Exception:  # noqa: BLE001 - a broken listener must not hide the error
                pass

    # -- queries ------------------------------------------------------------------------------------
    def has_handlers(self, event_type: str) -> bool:
        names = (event_type, *ALIASES.get(event_type, ()))
        return any(ext.handlers.get(n) for ext in self.extensions for n in names)

    def _handlers(self, event_type: str) -> list[tuple[Extension, Callable[..., Any], int, str]]:
        out = []
        for ext in self.extensions:
            for name in (event_type, *ALIASES.get(event_type, ())):
                for fn, nargs in ext.handlers.get(name, ()):
                    out.append((ext, fn, nargs, name))
        return out

    def tools(self) -> list[ToolDefinition]:
        """Registered tools, the first registration of each name winning."""
        seen: dict[str, ToolDefinition] = {}
        for ext in self.extensions:
            for tool in ext.tools.values():
                seen.setdefault(tool.name, tool)
        return list(seen.values())

    def flags(self) -> dict[str, dict[str, Any]]:
        seen: dict[str, dict[str, Any]] = {}
        for ext in self.extensions:
            for name, flag in ext.flags.items():
                seen.setdefault(name, flag)
        return seen

    def commands(self) -> list[tuple[str, CommandDefinition]]:
        """(invocation name, command) in load order; a name registered twice becomes ``name:1``, ``name:2``."""
        all_cmds = [c for ext in self.extensions for c in ext.commands.values()]
        counts: dict[str, int] = {}
        for c in all_cmds:
            counts[c.name] = counts.get(c.name, 0) + 1
        seen: dict[str, int] = {}
        taken: set[str] = set()
        out = []
        for c in all_cmds:
            seen[c.name] = seen.get(c.name, 0) + 1
            name = c.name if counts[c.name] == 1 else f"{c.name}:{seen[c.name]}"
            suffix = seen[c.name]
            while name in taken:
                suffix += 1
                name = f"{c.name}:{suffix}"
            taken.add(name)
            out.append((name, c))
        return out

    def command(self, name: str) -> CommandDefinition | None:
        return next((c for n, c in self.commands() if n == name), None)

    # -- delivery -----------------------------------------------------------------------------------
    async def _call(self, fn: Callable[..., Any], nargs: int, event: Any, ctx: Any) -> Any:
        result = fn(event, ctx) if nargs >= 2 else fn(event) if nargs == 1 else fn()
        if inspect.isawaitable(result):
            result = await self._abortable(result)
        return result

    async def _abortable(self, awaitable: Any) -> Any:
        """``await awaitable``, unless the session aborts first (then HandlerAborted, at once)."""
        task = asyncio.ensure_future(awaitable)
        loop = asyncio.get_running_loop()
        aborted: asyncio.Future[None] = loop.create_future()
        self._aborts.add(aborted)
        if self._abort_deadline is not None:  # the session is stopping: one deadline for every handler
            loop.call_at(self._abort_deadline, _release, aborted)
        try:
            await asyncio.wait({task, aborted}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            task.cancel()
            raise
        finally:
            self._aborts.discard(aborted)
        if task.done():
            return task.result()
        task.cancel()  # a cooperative handler stops here; one that goes on is no longer waited for
        task.add_done_callback(drop_late_result)
        raise HandlerAborted()

    async def _answers(self, event_type: str, make_event: Callable[[], Any], ctx: Any
                       ) -> AsyncIterator[tuple[Extension, Any]]:
        """(extension, answer) of each handler of ``event_type`` in turn, each given ``make_event()`` as it is
        when its turn comes (so a chain sees what the handlers before it changed). A handler that raises is
        reported and skipped; the others still run."""
        for ext, fn, nargs, _name in self._handlers(event_type):
            try:
                out = await self._call(fn, nargs, make_event(), ctx)
            except HandlerAborted:
                return
            except Exception as exc:  # noqa: BLE001 - reported, and the others still run
                self.emit_error(ext.path, event_type, exc, ext.kind)
                continue
            yield ext, out

    def _event(self, name: str, event: dict[str, Any]) -> Event:
        ev = Event(event)
        if ev.get("type") != name:
            ev["type"] = name
        return ev

    async def emit(self, event: dict[str, Any]) -> Any:
        """Notification events, and the cancellable ``session_before_*`` ones (their combined result)."""
        event_type = event["type"]
        cancellable = event_type in SESSION_BEFORE
        result = None
        handlers = self._handlers(event_type)
        if not handlers:
            return None
        ctx = self.make_context()
        for ext, fn, nargs, name in handlers:
            try:
                out = await self._call(fn, nargs, self._event(name, event), ctx)
            except HandlerAborted:
                return result
            except Exception as exc:  # noqa: BLE001 - reported, and the others still run
                self.emit_error(ext.path, event_type, exc, ext.kind)
                continue
            if cancellable and out:
                result = out
                if pick(out, "cancel"):
                    return out
            elif event_type == "message_end" and pick(out, "message") is not None:
                try:  # pi: a message_end handler may return {message} to replace the finished message
                    result = {"message": _replacement(event.get("message"), pick(out, "message"))}
                except Exception as exc:  # noqa: BLE001 - reported; the message stays as it was
                    self.emit_error(ext.path, event_type, exc, ext.kind)
        return result

    async def emit_tool_call(self, event: dict[str, Any]) -> Any:
        """First ``block`` wins. A handler that raises blocks the call and is reported."""
        result = None
        ctx = self.make_context()
        ev = self._event("tool_call", event)
        for ext, fn, nargs, _name in self._handlers("tool_call"):
            try:
                out = await self._call(fn, nargs, ev, ctx)
            except HandlerAborted:
                return {"block": True, "reason": "Operation aborted"}
            except Exception as exc:  # noqa: BLE001 - fail closed
                self.emit_error(ext.path, "tool_call", exc, ext.kind)
                return {"block": True, "reason": f"Extension {ext.path} failed: {error_text(exc)}"}
            if out:
                result = out
                if pick(out, "block"):
                    return out
        return result

    async def emit_tool_result(self, event: dict[str, Any]) -> dict[str, Any] | None:
        """A middleware chain of partial patches; None when nothing changed."""
        current = self._event("tool_result", event)
        changed = False
        ctx = self.make_context()

        def patched() -> Any:  # each handler sees the event its predecessors patched
            return current

        async for _ext, out in self._answers("tool_result", patched, ctx):
            if not out:
                continue
            for key, names in (("content", ("content",)), ("details", ("details",)),
                               ("isError", ("isError", "is_error"))):
                value = pick(out, *names)
                if value is not None:
                    if key == "content":
                        value = to_content(value)  # later handlers see content blocks, whatever was returned
                    current = Event(current)
                    current[key] = value
                    changed = True
        if not changed:
            return None
        return {"content": current["content"], "details": current.get("details"), "isError": current["isError"]}

    async def emit_input(self, text: str, images: Any, source: str) -> tuple[str, str, Any]:
        """("continue" | "transform" | "handled", text, images)."""
        current_text, current_images = text, images
        ctx = self.make_context()

        def event() -> Event:
            return Event({"type": "input", "text": current_text, "images": current_images, "source": source})

        async for _ext, out in self._answers("input", event, ctx):
            action = pick(out, "action")
            if action == "handled":
                return "handled", current_text, current_images
            if action == "transform":
                new_text = pick(out, "text")
                if isinstance(new_text, str):
                    current_text = new_text
                new_images = pick(out, "images")
                if new_images is not None:
                    current_images = new_images
        changed = current_text != text or current_images is not images
        return ("transform" if changed else "continue"), current_text, current_images

    async def emit_before_agent_start(self, prompt: str, images: Any, system_prompt: str,
                                      make_context: Callable[[Callable[[], str]], Any]
                                      ) -> tuple[list[Any], str | None]:
        """(messages to inject, the chained system prompt or None when no handler changed it)."""
        messages: list[Any] = []
        current = system_prompt
        modified = False
        ctx = make_context(lambda: current)

        def event() -> Event:
            return Event({"type": "before_agent_start", "prompt": prompt, "images": images, "systemPrompt": current})

        async for _ext, out in self._answers("before_agent_start", event, ctx):
            message = pick(out, "message")
            if message:
                messages.append(message)
            prompt_out = pick(out, "systemPrompt", "system_prompt")
            if isinstance(prompt_out, str):
                current = prompt_out
                modified = True
        return messages, (current if modified else None)

    async def _chain(self, event_type: str, key: str, value: Any, replace_whole: bool) -> Any:
        ctx = self.make_context()
        def event() -> Event:  # each handler sees the value its predecessors left
            return Event({"type": event_type, key: value})

        async for _ext, out in self._answers(event_type, event, ctx):
            if replace_whole:
                if out is not None:
                    value = out
            else:
                new = pick(out, key)
                if new is not None:
                    value = new
        return value

    async def emit_context(self, messages: list[Any]) -> list[Any]:
        return await self._chain("context", "messages", list(messages), replace_whole=False)

    async def emit_before_provider_request(self, payload: Any) -> Any:
        return await self._chain("before_provider_request", "payload", payload, replace_whole=True)

    async def emit_user_bash(self, event: dict[str, Any]) -> Any:
        ctx = self.make_context()
        async for _ext, out in self._answers("user_bash", lambda: Event(event), ctx):
            if out:
                return out
        return None

    async def emit_resources_discover(self, cwd: str, reason: str) -> dict[str, list[tuple[str, str]]]:
        found: dict[str, list[tuple[str, str]]] = {"skillPaths": [], "promptPaths": [], "themePaths": []}
        ctx = self.make_context()
        event = {"type": "resources_discover", "cwd": cwd, "reason": reason}
        async for ext, out in self._answers("resources_discover", lambda: Event(event), ctx):
            for key, snake in (("skillPaths", "skill_paths"), ("promptPaths", "prompt_paths"),
                               ("themePaths", "theme_paths")):
                for path in pick(out, key, snake) or []:
                    if isinstance(path, str):
                        found[key].append((path, ext.path))
        return found


def _replacement(current: Any, replacement: Any) -> Any:
    """A message_end handler's replacement, as a message of the same role (its role cannot change: the
    agent's loop already acted on it as that kind of message)."""
    from pisces.core.store import decode_message, message_role  # noqa: PLC0415 - only when a handler replaces

    data = replacement if isinstance(replacement, dict) else getattr(replacement, "__dict__", replacement)
    if not isinstance(data, dict):
        raise ValueError("message_end: the replacement 'message' must be a message object")
    role = message_role(current)
    new = decode_message({"role": role, **data} if "role" not in data else data)
    if message_role(new) != role:
        raise ValueError(f"message_end: a replacement message must keep the role {role!r}")
    return new
