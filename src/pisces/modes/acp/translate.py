"""AgentSession events -> ACP ``session/update`` notifications.

During a turn: text and thinking deltas become ``agent_message_chunk`` / ``agent_thought_chunk`` (each delta
once; the complete message is never sent again), a tool execution becomes ``tool_call`` then
``tool_call_update`` (streamed output for bash, the final status, content and raw output). Outside a turn
only session-level events pass (a new session name becomes ``session_info_update``; a ``plan`` event, a
plain dict ``{"type": "plan", "entries": [{content, status, priority}]}`` that an extension may emit,
becomes ``plan``). The translator also sums the turn's usage and remembers how its last reply ended.
"""

from __future__ import annotations

import logging
from typing import Any, Callable

from acp import (
    plan_entry,
    start_tool_call,
    tool_content,
    tool_terminal_ref,
    update_agent_message_text,
    update_agent_thought_text,
    update_plan,
    update_tool_call,
)
from acp.helpers import update_current_mode
from acp.schema import SessionInfoUpdate, TextContentBlock

from pisces.agent.types import (
    MessageEndEvent,
    MessageUpdateEvent,
    ToolExecutionEndEvent,
    ToolExecutionStartEvent,
    ToolExecutionUpdateEvent,
)
from pisces.ai.types import AssistantMessage

from . import toolview

Post = Callable[[Any], None]
PRIORITIES = ("medium", "high", "low")
STATUSES = ("pending", "in_progress", "completed")

log = logging.getLogger("pisces.acp")


def _pick(value: Any, allowed: tuple[str, ...]) -> Any:
    return value if value in allowed else allowed[0]


class TurnTranslator:
    def __init__(self, cwd: str, post: Post) -> None:
        self.cwd = cwd
        self._post = post
        self.active = False
        self.usage = {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0}
        self.last_reply: AssistantMessage | None = None
        self._calls: dict[str, tuple[str, Any]] = {}
        self._terminals: dict[str, str] = {}

    def begin(self) -> None:
        self.active = True
        self.usage = dict.fromkeys(self.usage, 0)
        self.last_reply = None
        self._calls.clear()
        self._terminals.clear()

    def end(self) -> None:
        """Nothing of this turn is posted after this (a cancelled run may still be winding down)."""
        self.active = False

    def attach_terminal(self, tool_call_id: str, terminal_id: str) -> None:
        """A client terminal runs this call's command: the call shows that terminal (and only it, which is how
        Zed renders a terminal-bearing call)."""
        if not self.active:
            return
        self._terminals[tool_call_id] = terminal_id
        self._post(update_tool_call(tool_call_id, content=[tool_terminal_ref(terminal_id)]))

    def on_event(self, event: Any) -> None:
        """A session listener: it must never raise into the agent loop."""
        try:
            if isinstance(event, dict):
                self._session_event(event)
            elif self.active:
                self._turn_event(event)
        except Exception:
            log.exception("could not translate a session event")

    def _session_event(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind == "session_info_changed" and isinstance(event.get("name"), str):
            self._post(SessionInfoUpdate(session_update="session_info_update", title=event["name"]))
        elif kind == "plan" and isinstance(event.get("entries"), list):
            entries = [plan_entry(str(e.get("content", "")), priority=_pick(e.get("priority"), PRIORITIES),
                                  status=_pick(e.get("status"), STATUSES))
                       for e in event["entries"] if isinstance(e, dict)]
            self._post(update_plan(entries))
        elif kind == "plan_mode_changed":  # plan mode (docs/planning.md): ACP's "plan" session mode
            self._post(update_current_mode("plan" if event.get("enabled") else "default"))

    def _turn_event(self, event: Any) -> None:
        if isinstance(event, MessageUpdateEvent):
            ev = event.assistantMessageEvent
            kind = type(ev).__struct_config__.tag
            if kind == "text_delta" and ev.delta:
                self._post(update_agent_message_text(ev.delta))
            elif kind == "thinking_delta" and ev.delta:
                self._post(update_agent_thought_text(ev.delta))
        elif isinstance(event, MessageEndEvent) and isinstance(event.message, AssistantMessage):
            self.last_reply = event.message
            u = event.message.usage
            for key, value in (("input", u.input), ("output", u.output), ("cacheRead", u.cacheRead),
                               ("cacheWrite", u.cacheWrite)):
                self.usage[key] += int(value or 0)
        elif isinstance(event, ToolExecutionStartEvent):
            self._calls[event.toolCallId] = (event.toolName, event.args)
            view = toolview.describe(event.toolName, event.args, self.cwd)
            self._post(start_tool_call(event.toolCallId, view.title, kind=view.kind, status="in_progress",
                                       content=view.content or None, locations=view.locations or None,
                                       raw_input=event.args))
        elif isinstance(event, ToolExecutionUpdateEvent):
            if event.toolName == "bash" and event.toolCallId not in self._terminals:
                text = toolview.result_text(event.partialResult)
                if text:
                    block = tool_content(TextContentBlock(type="text", text=toolview.fenced(text)))
                    self._post(update_tool_call(event.toolCallId, content=[block]))
        elif isinstance(event, ToolExecutionEndEvent):
            self._post(finished_call(event.toolCallId, event.toolName, self._calls.get(event.toolCallId, ("", {}))[1],
                                     event.result, event.isError, self.cwd,
                                     keep_content=event.toolCallId in self._terminals))


def finished_call(tool_call_id: str, name: str, args: Any, result: Any, is_error: bool, cwd: str, *,
                  keep_content: bool = False) -> Any:
    """The ``tool_call_update`` that ends a call (live, and in a replayed history)."""
    content = None if keep_content else toolview.result_content(name, args, result, is_error, cwd)
    return update_tool_call(tool_call_id, status="failed" if is_error else "completed", content=content,
                            locations=toolview.finished_locations(name, args, result, cwd),
                            raw_output=toolview.raw_output(result, is_error))
