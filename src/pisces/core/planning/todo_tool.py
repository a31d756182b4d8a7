"""The ``todo_write`` tool: oh-my-pi's operation schema over the session's todo list.

The result's text lists the whole list with each task's id (``t3``), so the model can address one item in the
next call; ``details.phases`` is the list itself (what oh-my-pi rebuilds its state from, and what a client
renders). A bad operation is an error result and changes nothing.
"""

from __future__ import annotations

from typing import Any, Callable

from pisces.agent.types import AgentTool, AgentToolResult, ToolError
from pisces.ai.types import TextContent
from pisces.core.planning.todos import OPS, STATUSES, TodoError, render

_TASK = {
    "type": "object",
    "properties": {
        "content": {"type": "string", "description": "The task, in 5-10 words"},
        "status": {"type": "string", "enum": list(STATUSES)},
        "details": {"type": "string", "description": "What to do, shown while the task is in progress"},
        "notes": {"type": "string"},
    },
    "required": ["content"],
}

TODO_WRITE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "ops": {
            "type": "array",
            "description": "Operations applied in order, all or nothing",
            "items": {
                "type": "object",
                "properties": {
                    "op": {"type": "string", "enum": list(OPS)},
                    "phases": {"type": "array", "description": "replace: the whole list",
                               "items": {"type": "object", "properties": {
                                   "name": {"type": "string"}, "tasks": {"type": "array", "items": _TASK}},
                                   "required": ["name"]}},
                    "name": {"type": "string", "description": "add_phase: the phase's name"},
                    "tasks": {"type": "array", "items": _TASK, "description": "add_phase: its tasks"},
                    "phase": {"type": "string", "description": "add_task: phase id or name (default: the last)"},
                    "id": {"type": "string", "description": "update/remove_task: the task id (t1, t2, ...)"},
                    "content": {"type": "string"},
                    "status": {"type": "string", "enum": list(STATUSES)},
                    "details": {"type": "string"},
                    "notes": {"type": "string"},
                },
                "required": ["op"],
            },
        },
    },
    "required": ["ops"],
}

TODO_WRITE_DESCRIPTION = (
    "Plan and track multi-step work as a todo list of phases and tasks. Operations: replace (set the whole list: "
    "phases [{name, tasks: [{content, status?}]}]), add_phase {name, tasks?}, add_task {phase?, content}, update "
    "{id, status?, content?, details?, notes?}, remove_task {id}. Statuses: pending, in_progress, completed, "
    "abandoned; exactly one task is in progress. Every task has a stable id (t1, t2, ...) shown in the result: "
    "mark each task completed as soon as it is done."
)


class TodoWriteTool(AgentTool):
    name = "todo_write"
    label = "Todo"
    description = TODO_WRITE_DESCRIPTION
    parameters = TODO_WRITE_SCHEMA

    def __init__(self, get_todos: Callable[[], Any]) -> None:
        self._get_todos = get_todos

    async def execute(self, tool_call_id: str, params: dict[str, Any], signal: Any, on_update: Any) -> AgentToolResult:
        todos = self._get_todos()
        if todos is None:
            raise ToolError("todo_write is not available in this session (no todo list: a subagent, or todos off)")
        try:
            notes, phases = todos.apply_ops(params.get("ops"))
        except TodoError as exc:
            raise ToolError(f"todo_write: {exc}. Nothing was changed.") from None
        text = "\n".join(notes) + "\n\n" + render(phases)
        return AgentToolResult(content=[TextContent(text=text)], details={"phases": phases})
