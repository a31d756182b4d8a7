"""The agent layer's types: tools as an interface, the events a run emits, the run's state."""

from __future__ import annotations

from typing import Any, Callable

from msgspec import UNSET, Struct, UnsetType

from pisces.ai.abort import AbortSignal
from pisces.ai.types import ImageContent, TextContent


class AgentToolResult(Struct, kw_only=True):
    content: list[TextContent | ImageContent]
    details: Any = UNSET


class ToolError(Exception):
    """Raised by a tool to return an error result (``isError: true``) with this text to the model."""

    def __init__(self, message: str, details: Any = UNSET) -> None:
        super().__init__(message)
        self.details = details


ToolUpdate = Callable[[AgentToolResult], None]


class AgentTool:
    """A tool the agent can call. Subclasses set the class attributes and implement ``execute``.

    ``execute`` returns an AgentToolResult or raises (ToolError or any exception) for an error result.
    It must stop promptly when ``signal`` is aborted. ``on_update`` streams partial results.
    """

    name: str = ""
    label: str = ""
    description: str = ""
    parameters: dict[str, Any] = {"type": "object", "properties": {}}

    async def execute(self, tool_call_id: str, params: dict[str, Any], signal: AbortSignal,
                      on_update: ToolUpdate) -> AgentToolResult:
        raise NotImplementedError


# ---------------------------------------------------------------------------------------------
# The tool-call gate (LoopConfig.before_tool_call / after_tool_call)
# ---------------------------------------------------------------------------------------------
class ToolCallInfo:
    """One tool call as the gate sees it. ``args`` are the validated arguments; a gate may change them in place
    (what the tool then runs with) or return replacements in ``GateDecision.args``."""

    __slots__ = ("tool_call_id", "tool_name", "args", "tool", "assistant_message", "signal")

    def __init__(self, tool_call_id: str, tool_name: str, args: dict[str, Any], tool: "AgentTool",
                 assistant_message: Any, signal: AbortSignal) -> None:
        self.tool_call_id = tool_call_id
        self.tool_name = tool_name
        self.args = args
        self.tool = tool
        self.assistant_message = assistant_message
        self.signal = signal


class GateDecision(Struct, kw_only=True):
    """What ``before_tool_call`` may return: block the call (``reason`` becomes the error tool result, default
    "Tool execution was blocked"), or run it with other arguments. None means "go ahead"."""

    block: bool = False
    reason: str | None = None
    args: dict[str, Any] | None = None


class ResultPatch(Struct, kw_only=True):
    """What ``after_tool_call`` may return: the fields to replace in the result (UNSET keeps a field)."""

    content: Any = UNSET
    details: Any = UNSET
    isError: bool | UnsetType = UNSET

    def apply(self, result: AgentToolResult, is_error: bool) -> tuple[AgentToolResult, bool]:
        """(the result with the patched fields replaced, the error flag); a None content or details keeps it."""
        content = result.content if self.content is UNSET or self.content is None else self.content
        details = result.details if self.details is UNSET or self.details is None else self.details
        return AgentToolResult(content=content, details=details), \
            is_error if self.isError is UNSET else bool(self.isError)


# ---------------------------------------------------------------------------------------------
# Events (pi's exact shapes). Messages are typed Any: the coding layer adds its own roles.
# ---------------------------------------------------------------------------------------------
class _Ev(Struct, kw_only=True, tag_field="type"):
    pass


class AgentStartEvent(_Ev, kw_only=True, tag="agent_start"):
    pass


class AgentEndEvent(_Ev, kw_only=True, tag="agent_end"):
    messages: list[Any]


class TurnStartEvent(_Ev, kw_only=True, tag="turn_start"):
    pass


class TurnEndEvent(_Ev, kw_only=True, tag="turn_end"):
    message: Any
    toolResults: list[Any]


class MessageStartEvent(_Ev, kw_only=True, tag="message_start"):
    message: Any


class MessageUpdateEvent(_Ev, kw_only=True, tag="message_update"):
    assistantMessageEvent: Any  # carries ``partial``, the same object as ``message`` (pi's field order)
    message: Any


class MessageEndEvent(_Ev, kw_only=True, tag="message_end"):
    message: Any


class ToolExecutionStartEvent(_Ev, kw_only=True, tag="tool_execution_start"):
    toolCallId: str
    toolName: str
    args: Any


class ToolExecutionUpdateEvent(_Ev, kw_only=True, tag="tool_execution_update"):
    toolCallId: str
    toolName: str
    args: Any
    partialResult: Any


class ToolExecutionEndEvent(_Ev, kw_only=True, tag="tool_execution_end"):
    toolCallId: str
    toolName: str
    result: Any
    isError: bool


AgentEvent = (AgentStartEvent | AgentEndEvent | TurnStartEvent | TurnEndEvent | MessageStartEvent
              | MessageUpdateEvent | MessageEndEvent | ToolExecutionStartEvent | ToolExecutionUpdateEvent
              | ToolExecutionEndEvent)

__all__ = [
    "AgentTool", "AgentToolResult", "ToolError", "ToolCallInfo", "GateDecision", "ResultPatch", "ToolUpdate",
    "AgentEvent", "AgentStartEvent", "AgentEndEvent",
    "TurnStartEvent", "TurnEndEvent", "MessageStartEvent", "MessageUpdateEvent", "MessageEndEvent",
    "ToolExecutionStartEvent", "ToolExecutionUpdateEvent", "ToolExecutionEndEvent", "UNSET", "UnsetType",
]
