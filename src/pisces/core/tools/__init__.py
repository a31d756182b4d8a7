"""The built-in tools: read, bash, edit, write (on by default) and grep, find, ls.

Tool modules are imported on first use, so importing this package (or ``truncate`` alone, as
``pisces.core.bash_exec`` does) stays cheap and free of import cycles.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pisces.agent.types import AgentTool

DEFAULT_TOOL_NAMES = ["read", "bash", "edit", "write"]
ALL_TOOL_NAMES = ["read", "bash", "edit", "write", "grep", "find", "ls"]

_CLASSES = {
    "ReadTool": "read", "BashTool": "bash", "EditTool": "edit", "WriteTool": "write",
    "GrepTool": "grep", "FindTool": "find", "LsTool": "ls",
}


def create_tools(cwd: str, *, shell_path: str | None = None, command_prefix: str | None = None
                 ) -> dict[str, "AgentTool"]:
    """All seven tools for ``cwd``, by name. ``shell_path`` and ``command_prefix`` are the settings
    ``shellPath`` and ``shellCommandPrefix`` for the bash tool."""
    from .bash import BashTool
    from .edit import EditTool
    from .find import FindTool
    from .grep import GrepTool
    from .ls import LsTool
    from .read import ReadTool
    from .write import WriteTool

    tools: list[AgentTool] = [
        ReadTool(cwd), BashTool(cwd, shell_path=shell_path, command_prefix=command_prefix), EditTool(cwd),
        WriteTool(cwd), GrepTool(cwd), FindTool(cwd), LsTool(cwd),
    ]
    return {t.name: t for t in tools}


def __getattr__(name: str) -> Any:
    if name in _CLASSES:
        import importlib

        module = importlib.import_module(f"{__name__}.{_CLASSES[name]}")
        return getattr(module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["create_tools", "DEFAULT_TOOL_NAMES", "ALL_TOOL_NAMES", *_CLASSES]
