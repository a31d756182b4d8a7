"""The object an extension's ``register(pi)`` receives: pi's ExtensionAPI in Python idiom (snake_case).

Registration (``on``, ``register_tool``, ``register_command``, ``register_flag``, ...) works at any time.
Actions that touch the session (``send_message``, ``set_model``, ...) work once the session is bound; during
``register`` they raise pi's "Extension runtime not initialized" error, except ``register_provider``, which
is queued until then. After a reload or a session replacement the old object is stale and every call raises.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
from typing import Any, Callable

from pisces.core.extensions.tools import run_exec

NOT_READY = "Extension runtime not initialized. Action methods cannot be called during extension loading."
STALE = ("This extension ctx is stale after session replacement or reload. Do not use a captured pi or command "
         "ctx after ctx.new_session(), ctx.fork(), ctx.switch_session() or ctx.reload(); use the ctx passed to "
         "with_session, and do not use the old ctx after await ctx.reload().")


def positional_count(fn: Callable[..., Any]) -> int:
    """How many positional arguments ``fn`` accepts (``*args`` counts as many as offered)."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return 99
    n = 0
    for p in params:
        if p.kind is p.VAR_POSITIONAL:
            return 99
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            n += 1
    return n


def pick(obj: Any, *names: str, default: Any = None) -> Any:
    """The first of ``names`` present in a dict (or set as an attribute): pi's camelCase or Python's snake_case."""
    for name in names:
        if isinstance(obj, dict):
            if name in obj:
                return obj[name]
        elif obj is not None and hasattr(obj, name):
            return getattr(obj, name)
    return default


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


class Event(dict):
    """An event as pi sends it (a dict with pi's keys); its keys are also attributes, in either spelling:
    ``event["toolName"] == event.toolName == event.tool_name``."""

    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        if name in self:
            return self[name]
        camel = _camel(name)
        if camel in self:
            return self[camel]
        if name.startswith("__"):
            raise AttributeError(name)
        return None


class ToolDefinition:
    def __init__(self, extension: "Extension", spec: dict[str, Any]) -> None:
        name = spec.get("name")
        if not isinstance(name, str) or not name.strip():
            raise ValueError("register_tool needs a non-empty 'name'")
        execute = spec.get("execute")
        if not callable(execute):
            raise ValueError(f"tool {name!r} needs an 'execute' function")
        params = spec.get("parameters")
        if params is None:
            params = {"type": "object", "properties": {}}
        if not isinstance(params, dict):
            raise ValueError(f"tool {name!r}: 'parameters' must be a JSON Schema object (a dict)")
        self.extension = extension
        self.name = name.strip()
        self.label = str(pick(spec, "label") or self.name)
        self.description = str(pick(spec, "description") or "")
        self.parameters = params
        self.execute = execute
        self.execute_args = positional_count(execute)
        self.prompt_snippet = pick(spec, "prompt_snippet", "promptSnippet")
        self.prompt_guidelines = list(pick(spec, "prompt_guidelines", "promptGuidelines") or [])
        self.prepare_arguments = pick(spec, "prepare_arguments", "prepareArguments")
        self.execution_mode = pick(spec, "execution_mode", "executionMode")
        # the approval tier (docs/approval.md): "read", "write", "exec", or a function of the arguments; else exec
        self.tier = pick(spec, "tier")


class CommandDefinition:
    def __init__(self, extension: "Extension", name: str, description: str | None,
                 handler: Callable[..., Any] | None) -> None:
        if not isinstance(name, str) or not name.strip() or " " in name.strip():
            raise ValueError(f"invalid command name {name!r}: one word, without the leading slash")
        if not callable(handler):
            raise ValueError(f"command {name!r} needs a handler")
        self.extension = extension
        self.name = name.strip().lstrip("/")
        self.description = description
        self.handler = handler
        self.handler_args = positional_count(handler)


class Extension:
    """One loaded extension: where it came from and what it registered."""

    def __init__(self, path: str, source_info: dict[str, Any], kind: str = "extension") -> None:
        self.path = path
        self.source_info = source_info
        self.kind = kind  # "extension", "hook" (seed 003 hooks/) or "tool" (seed 003 tools/)
        self.handlers: dict[str, list[tuple[Callable[..., Any], int]]] = {}
        self.tools: dict[str, ToolDefinition] = {}
        self.commands: dict[str, CommandDefinition] = {}
        self.flags: dict[str, dict[str, Any]] = {}
        self.shortcuts: dict[str, Any] = {}
        self.renderers: dict[str, Any] = {}


class Runtime:
    """What the extensions of one load share: the bound session actions, flag values, pending providers."""

    def __init__(self, cwd: str, flag_values: dict[str, Any] | None = None) -> None:
        self.cwd = cwd
        self.actions: Any = None  # set by the host (bind); None while loading
        self.stale: str | None = None
        self.flag_values: dict[str, Any] = dict(flag_values or {})
        self.pending_providers: list[tuple[str, dict[str, Any], str]] = []
        self.events: EventBus = EventBus()
        self.sandbox: Callable[[], Any] = lambda: None  # the session's OS sandbox, for exec (set by the binding)

    def check(self) -> Any:
        if self.stale:
            raise RuntimeError(self.stale)
        if self.actions is None:
            raise RuntimeError(NOT_READY)
        return self.actions


class EventBus:
    """``pi.events``: a bus shared by all extensions. ``on`` returns a function that unsubscribes."""

    def __init__(self) -> None:
        self._handlers: dict[str, list[Callable[[Any], Any]]] = {}
        self.on_error: Callable[[str, BaseException], None] | None = None

    def on(self, channel: str, handler: Callable[[Any], Any] | None = None) -> Any:
        if handler is None:
            return lambda fn: (self.on(channel, fn), fn)[1]
        self._handlers.setdefault(channel, []).append(handler)
        return lambda: self._handlers.get(channel, []).remove(handler) if handler in self._handlers.get(
            channel, []) else None

    def emit(self, channel: str, data: Any = None) -> None:
        for handler in list(self._handlers.get(channel, ())):
            try:
                result = handler(data)
                if inspect.isawaitable(result):
                    task = asyncio.ensure_future(result)
                    task.add_done_callback(functools.partial(self._report, channel))
            except Exception as exc:  # noqa: BLE001 - one listener must not stop the others
                if self.on_error:
                    self.on_error(channel, exc)

    def _report(self, channel: str, task: Any) -> None:
        if not task.cancelled() and task.exception() is not None and self.on_error:
            self.on_error(channel, task.exception())


class ExtensionAPI:
    """``pi``: what ``register(pi)`` receives. See docs/extensions.md for every method."""

    def __init__(self, extension: Extension, runtime: Runtime) -> None:
        self._ext = extension
        self._rt = runtime

    def _live(self) -> None:
        if self._rt.stale:
            raise RuntimeError(self._rt.stale)

    # -- registration -------------------------------------------------------------------------------
    def on(self, event: str, handler: Callable[..., Any] | None = None) -> Any:
        """Subscribe ``handler(event, ctx)`` (or ``handler(event)``) to ``event``; usable as a decorator."""
        self._live()
        if handler is None:
            return lambda fn: (self.on(event, fn), fn)[1]
        if not callable(handler):
            raise TypeError(f"pi.on({event!r}, ...) needs a function")
        self._ext.handlers.setdefault(event, []).append((handler, positional_count(handler)))
        return handler

    def register_tool(self, definition: Any = None, **fields: Any) -> ToolDefinition:
        """A tool the model can call: ``name``, ``description``, ``parameters`` (JSON Schema), async
        ``execute(tool_call_id, params, signal, on_update, ctx)``; optional ``label``, ``prompt_snippet``,
        ``prompt_guidelines``, ``prepare_arguments``. The first extension to register a name wins; an
        extension tool replaces a built-in of the same name."""
        self._live()
        spec = dict(definition) if isinstance(definition, dict) else {}
        if definition is not None and not isinstance(definition, dict):
            spec.update({k: getattr(definition, k) for k in dir(definition) if not k.startswith("_")})
        spec.update(fields)
        tool = ToolDefinition(self._ext, spec)
        self._ext.tools[tool.name] = tool
        if self._rt.actions is not None:
            self._rt.actions.refresh_tools()
        return tool

    def tool(self, name: str | None = None, *, description: str | None = None, parameters: Any = None,
             label: str | None = None, **extra: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Decorator form of ``register_tool``: the function is ``execute``; the name defaults to its name and
        the description to its docstring."""
        def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
            self.register_tool(name=name or fn.__name__, description=description or inspect.getdoc(fn) or "",
                               parameters=parameters, label=label, execute=fn, **extra)
            return fn

        return wrap

    def register_command(self, name: str, options: Any = None, *, description: str | None = None,
                         handler: Callable[..., Any] | None = None, **_ignored: Any) -> CommandDefinition:
        """A ``/name`` command run by ``prompt("/name args")``: ``handler(args, ctx)`` with a command context."""
        self._live()
        if isinstance(options, dict):
            description = description or options.get("description")
            handler = handler or options.get("handler")
        elif callable(options):
            handler = handler or options
        command = CommandDefinition(self._ext, name, description, handler)
        self._ext.commands[command.name] = command
        return command

    def command(self, name: str | None = None, *, description: str | None = None
                ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
            self.register_command(name or fn.__name__.replace("_", "-"), description=description
                                  or inspect.getdoc(fn), handler=fn)
            return fn

        return wrap

    def register_flag(self, name: str, options: Any = None, *, description: str | None = None,
                      type: str = "boolean", default: Any = None) -> None:
        """A command-line flag ``--name`` (``type`` "boolean" or "string"); read it with ``get_flag(name)``."""
        self._live()
        if isinstance(options, dict):
            description = options.get("description", description)
            type = options.get("type", type)
            default = options.get("default", default)
        if type not in ("boolean", "string"):
            raise ValueError(f"flag {name!r}: type must be 'boolean' or 'string'")
        self._ext.flags.setdefault(name.lstrip("-"), {"name": name.lstrip("-"), "description": description,
                                                      "type": type, "default": default})

    def get_flag(self, name: str) -> Any:
        name = name.lstrip("-")
        if name in self._rt.flag_values:
            return self._rt.flag_values[name]
        flag = self._ext.flags.get(name)
        return flag.get("default") if flag else None

    def register_shortcut(self, key: str, options: Any = None, **_kw: Any) -> None:
        """Kept for pi compatibility; pisces has no keyboard to bind it to."""
        self._ext.shortcuts[key] = options

    def register_message_renderer(self, custom_type: str, renderer: Any) -> None:
        """Kept for pi compatibility; pisces has no terminal renderer."""
        self._ext.renderers[custom_type] = renderer

    def register_provider(self, name: str, config: dict[str, Any]) -> None:
        """A provider with its models, in models.json's format (``baseUrl``, ``api``, ``apiKey``, ``models``...).
        Queued while loading, applied at once afterwards. pi's ``streamSimple`` (a stream function of the
        extension's own) and ``oauth`` (a login flow) are refused with a clear error: pisces providers are the
        ``api`` kinds it implements, with an API key."""
        self._live()
        config = dict(config or {})
        for key, what in (("streamSimple", "a custom stream function"), ("stream_simple", "a custom stream function"),
                          ("oauth", "an OAuth login flow")):
            if config.get(key) is not None:
                raise ValueError(f"register_provider {name!r}: '{key}' ({what}) is not supported by pisces; give "
                                 "'api' (openai-completions, openai-responses, anthropic-messages, google-generative-ai"
                                 ", faux), 'baseUrl', 'apiKey' and 'models' instead")
        if self._rt.actions is None:
            self._rt.pending_providers.append((name, config, self._ext.path))
        else:
            self._rt.actions.register_provider(name, config)

    def unregister_provider(self, name: str) -> None:
        self._rt.check().unregister_provider(name)

    # -- actions (the bound session) ----------------------------------------------------------------
    def send_message(self, message: dict[str, Any], options: Any = None, *, trigger_turn: bool | None = None,
                     deliver_as: str | None = None) -> None:
        """A custom message (``custom_type``, ``content``, ``display``, ``details``) into the session."""
        self._rt.check().send_message(self._ext, message, bool(pick(options, "trigger_turn", "triggerTurn")
                                                              or trigger_turn),
                                      deliver_as or pick(options, "deliver_as", "deliverAs"))

    def send_user_message(self, content: Any, options: Any = None, *, deliver_as: str | None = None) -> None:
        """A user message, as if typed; while the agent streams, ``deliver_as`` ("steer"/"followUp") is needed."""
        self._rt.check().send_user_message(self._ext, content, deliver_as or pick(options, "deliver_as",
                                                                                  "deliverAs"))

    def append_entry(self, custom_type: str, data: Any = None) -> str:
        return self._rt.check().append_entry(custom_type, data)

    def set_session_name(self, name: str) -> None:
        self._rt.check().set_session_name(name)

    def get_session_name(self) -> str | None:
        return self._rt.check().get_session_name()

    def set_label(self, entry_id: str, label: str | None) -> None:
        self._rt.check().set_label(entry_id, label)

    def get_active_tools(self) -> list[str]:
        return self._rt.check().get_active_tools()

    def get_all_tools(self) -> list[dict[str, Any]]:
        return self._rt.check().get_all_tools()

    def set_active_tools(self, names: list[str]) -> None:
        self._rt.check().set_active_tools(list(names))

    def get_commands(self) -> list[dict[str, Any]]:
        return self._rt.check().get_commands()

    async def set_model(self, model: Any) -> bool:
        return await self._rt.check().set_model(model)

    def get_thinking_level(self) -> str:
        return self._rt.check().get_thinking_level()

    def set_thinking_level(self, level: str) -> None:
        self._rt.check().set_thinking_level(level)

    async def exec(self, command: str, args: list[str] | None = None, options: Any = None, *, signal: Any = None,
                   timeout: int | None = None, cwd: str | None = None) -> Any:
        """Run ``command args...`` (no shell): ``ExecResult(stdout, stderr, code, killed)``. ``timeout`` in ms.
        Confined by the session's OS sandbox to the session's working directory (docs/security.md)."""
        self._live()

        return await run_exec(command, list(args or []), signal=signal or pick(options, "signal"),
                              timeout_ms=timeout or pick(options, "timeout"),
                              cwd=cwd or pick(options, "cwd") or self._rt.cwd, sandbox=self._rt.sandbox(),
                              workspace=self._rt.cwd)

    @property
    def events(self) -> EventBus:
        return self._rt.events

    @property
    def logger(self) -> Any:
        return logging.getLogger(f"pisces.extension.{self._ext.path}")
