"""The built-in tools: read, bash, edit, write (on by default) and grep, find, ls.

Tool modules are imported on first use, so importing this package (or ``truncate`` alone, as
``pisces.core.tools.bash_exec`` does) stays cheap and free of import cycles.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pisces.agent.types import AgentTool

if TYPE_CHECKING:  # imported when first asked for: start-up builds the tools without it
    from pisces.core.tools.backends import ToolBackends

DEFAULT_TOOL_NAMES = ["read", "bash", "edit", "write"]
ALL_TOOL_NAMES = ["read", "bash", "edit", "write", "grep", "find", "ls"]

_FILE_TOOLS = ("read", "edit", "write")  # the tools a file backend serves
_CLASSES = {
    "ReadTool": "read", "BashTool": "bash", "EditTool": "edit", "WriteTool": "write",
    "GrepTool": "grep", "FindTool": "find", "LsTool": "ls",
}


class LazyTool(AgentTool):
    """A tool whose module is imported when it is first described or run.

    Start-up builds all seven tools; importing their implementations (walkers, diff, the shell runner)
    would cost more than everything else the RPC mode loads before its first answer."""

    def __init__(self, name: str, cls_name: str, cwd: str, **kwargs: Any) -> None:
        self.name = name
        self._cls_name = cls_name
        self._args = (cwd,)
        self._kwargs = kwargs
        self._tool: Any = None

    def load(self) -> Any:
        if self._tool is None:
            cls = __getattr__(self._cls_name)
            self._tool = cls(*self._args, **self._kwargs)
        return self._tool

    @property
    def label(self) -> str:  # type: ignore[override]  # read-only: reading it loads the tool
        return self.load().label

    @property
    def description(self) -> str:  # type: ignore[override]  # read-only
        """A default tool's text from ``descriptions`` (the system prompt and an export read it without
        loading the tool); any other tool is loaded to read it."""
        from pisces.core.tools.descriptions import BY_CLASS  # noqa: PLC0415 - a few strings, first asked after start-up

        text = BY_CLASS.get(self._cls_name)
        return text if text is not None else self.load().description

    @property
    def parameters(self) -> dict[str, Any]:  # type: ignore[override]  # read-only
        """A built-in tool's schema from ``schemas`` (every request reads it: no tool module loaded for it)."""
        from pisces.core.tools.schemas import BY_CLASS  # noqa: PLC0415 - a few dicts, first asked after start-up

        schema = BY_CLASS.get(self._cls_name)
        return schema if schema is not None else self.load().parameters

    def prepare_arguments(self, args: Any) -> Any:
        prepare = getattr(self.load(), "prepare_arguments", None)
        return prepare(args) if prepare is not None else args

    async def execute(self, tool_call_id: str, params: dict[str, Any], signal: Any, on_update: Any) -> Any:
        return await self.load().execute(tool_call_id, params, signal, on_update)


def create_tools(cwd: str, *, shell_path: str | None = None, command_prefix: str | None = None,
                 backends: ToolBackends | None = None, sandbox: Any = None) -> dict[str, AgentTool]:
    """All seven tools for ``cwd``, by name (each loads its module on first use). ``shell_path`` and
    ``command_prefix`` are the settings ``shellPath`` and ``shellCommandPrefix`` for the bash tool;
    ``backends`` replaces the local file system and shell (see ``backends.py``); ``sandbox`` (a
    ``pisces.core.sandbox.launch.Sandbox``) confines the bash tool's local commands."""
    tools: dict[str, Any] = {}
    for cls_name, name in _CLASSES.items():
        kwargs: dict[str, Any] = {}
        if name == "bash":
            kwargs = {"shell_path": shell_path, "command_prefix": command_prefix, "sandbox": sandbox}
            if backends is not None and backends.shell is not None:
                kwargs["shell"] = backends.shell
        elif name in _FILE_TOOLS and backends is not None and backends.files is not None:
            kwargs["files"] = backends.files
        tools[name] = LazyTool(name, cls_name, cwd, **kwargs)
    return tools


def __getattr__(name: str) -> Any:
    if name in _CLASSES:
        import importlib  # noqa: PLC0415 - not needed at start-up

        module = importlib.import_module(f"{__name__}.{_CLASSES[name]}")
        return getattr(module, name)
    if name == "ToolBackends":
        from pisces.core.tools.backends import ToolBackends  # noqa: PLC0415 - not needed at start-up

        return ToolBackends
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["create_tools", "ToolBackends", "LazyTool", "DEFAULT_TOOL_NAMES", "ALL_TOOL_NAMES", *_CLASSES]
