"""The ``task`` tool: delegation to subagents, optionally in isolated git worktrees with verification.

Importing this package costs nothing: ``LazyTaskTool`` loads the implementation (``tool.py`` and the modules it
uses) the first time the tool is described or run. Modules: ``agents`` (definitions and discovery), ``tool``
(the tool), ``runner`` (one task: isolation, subagent, verification, repair), ``executor`` (one subagent),
``isolation`` and ``merge`` (worktrees, patches, branches), ``verify`` (checks), ``events`` (the ``subagent_*``
events), ``hooks`` (spawn gate and usage callback for budgets), ``host`` (what the tool needs of its session).
"""

from __future__ import annotations

from typing import Any, Callable

from pisces.agent.types import AgentTool


class LazyTaskTool(AgentTool):
    """The task tool of one session. ``host_factory`` builds its ``TaskHost`` when first needed (the session
    may not exist yet when the tool is created)."""

    name = "task"

    def __init__(self, host_factory: Callable[[], Any]) -> None:
        self._host_factory = host_factory
        self._tool: Any = None

    def load(self) -> Any:
        if self._tool is None:
            from pisces.core.task.tool import TaskTool  # noqa: PLC0415 - not needed at start-up

            self._tool = TaskTool(self._host_factory())
        return self._tool

    @property
    def label(self) -> str:  # type: ignore[override]  # read-only: a fixed label
        return "Task"

    @property
    def description(self) -> str:  # type: ignore[override]  # read-only: reading it loads the tool
        return self.load().description

    @property
    def parameters(self) -> dict[str, Any]:  # type: ignore[override]  # read-only: reading it loads the tool
        return self.load().parameters

    async def execute(self, tool_call_id: str, params: dict[str, Any], signal: Any, on_update: Any) -> Any:
        return await self.load().execute(tool_call_id, params, signal, on_update)


def register_task_tool(tools: dict[str, AgentTool], session_ref: Callable[[], Any], agent_dir: str,
                       backends: Any = None) -> LazyTaskTool:
    """Add the task tool to a session's tool table. ``session_ref()`` returns the session once it is built;
    ``backends`` (``pisces.core.tools.backends.ToolBackends``) are the session's file system and shell, which
    subagents working in the session's directory share (isolated ones work in a local git worktree)."""

    def host() -> Any:
        from pisces.core.task.task_host import TaskHost  # noqa: PLC0415 - not needed at start-up

        return TaskHost.for_session(session_ref(), agent_dir, backends)

    tool = LazyTaskTool(host)
    tools["task"] = tool
    return tool


__all__ = ["LazyTaskTool", "register_task_tool"]
