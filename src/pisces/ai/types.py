"""Provider-neutral LLM types with pi's exact JSON field names.

Every wire type is a msgspec Struct. Optional fields default to ``UNSET`` and are
therefore absent from the JSON (pi's ``undefined``), never ``null``. Structs are
keyword-only so that field order follows pi's serialisation order.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Literal, Union

import msgspec
from msgspec import UNSET, Struct, UnsetType

__all__ = [
    "UNSET",
    "UnsetType",
    "TextContent",
    "ThinkingContent",
    "ImageContent",
    "ToolCall",
    "Cost",
    "Usage",
    "UserMessage",
    "AssistantMessage",
    "ToolResultMessage",
    "Message",
    "Tool",
    "Context",
    "ModelCost",
    "Model",
    "StreamOptions",
    "StopReason",
    "ThinkingLevel",
    "THINKING_LEVELS",
    "AssistantMessageEvent",
    "now_ms",
    "num",
]

StopReason = Literal["stop", "length", "toolUse", "error", "aborted"]
ThinkingLevel = Literal["off", "minimal", "low", "medium", "high", "xhigh"]
THINKING_LEVELS: tuple[str, ...] = ("off", "minimal", "low", "medium", "high", "xhigh")

Number = Union[int, float]


def now_ms() -> int:
    return int(time.time() * 1000)


def num(x: float) -> Number:
    """A float as JavaScript would print it: integral values become ints (``0`` not ``0.0``)."""
    if isinstance(x, float) and x.is_integer() and abs(x) < 1e15:
        return int(x)
    return x


class _Wire(Struct, kw_only=True, omit_defaults=False):
    pass


# ---------------------------------------------------------------------------------------------
# Content blocks
# ---------------------------------------------------------------------------------------------
class TextContent(_Wire, kw_only=True, tag_field="type", tag="text"):
    text: str
    textSignature: str | UnsetType = UNSET


class ThinkingContent(_Wire, kw_only=True, tag_field="type", tag="thinking"):
    thinking: str
    thinkingSignature: str | UnsetType = UNSET
    redacted: bool | UnsetType = UNSET


class ImageContent(_Wire, kw_only=True, tag_field="type", tag="image"):
    data: str
    mimeType: str


class ToolCall(_Wire, kw_only=True, tag_field="type", tag="toolCall"):
    id: str
    name: str
    arguments: dict[str, Any]
    thoughtSignature: str | UnsetType = UNSET


UserContent = Union[TextContent, ImageContent]
AssistantContent = Union[TextContent, ThinkingContent, ToolCall]


# ---------------------------------------------------------------------------------------------
# Usage
# ---------------------------------------------------------------------------------------------
class Cost(_Wire, kw_only=True):
    input: Number = 0
    output: Number = 0
    cacheRead: Number = 0
    cacheWrite: Number = 0
    total: Number = 0


class Usage(_Wire, kw_only=True):
    input: int = 0
    output: int = 0
    cacheRead: int = 0
    cacheWrite: int = 0
    totalTokens: int = 0
    cost: Cost = msgspec.field(default_factory=Cost)


# ---------------------------------------------------------------------------------------------
# Messages
# ---------------------------------------------------------------------------------------------
class UserMessage(_Wire, kw_only=True, tag_field="role", tag="user"):
    content: str | list[UserContent]
    timestamp: int = msgspec.field(default_factory=now_ms)
    attachments: list[Any] | UnsetType = UNSET  # the legacy attachments a client sent, echoed (seeds 001/003/004)


class AssistantMessage(_Wire, kw_only=True, tag_field="role", tag="assistant"):
    content: list[AssistantContent] = msgspec.field(default_factory=list)
    api: str
    provider: str
    model: str
    usage: Usage = msgspec.field(default_factory=Usage)
    stopReason: str = "stop"
    timestamp: int = msgspec.field(default_factory=now_ms)
    responseId: str | UnsetType = UNSET
    responseModel: str | UnsetType = UNSET
    errorMessage: str | UnsetType = UNSET


class ToolResultMessage(_Wire, kw_only=True, tag_field="role", tag="toolResult"):
    toolCallId: str
    toolName: str
    content: list[UserContent]
    details: Any = UNSET
    isError: bool = False
    timestamp: int = msgspec.field(default_factory=now_ms)


Message = Union[UserMessage, AssistantMessage, ToolResultMessage]


# ---------------------------------------------------------------------------------------------
# Tools, context, model
# ---------------------------------------------------------------------------------------------
class Tool(_Wire, kw_only=True):
    name: str
    description: str
    parameters: dict[str, Any]


class Context(_Wire, kw_only=True):
    systemPrompt: str | UnsetType = UNSET
    messages: list[Message] = msgspec.field(default_factory=list)
    tools: list[Tool] | UnsetType = UNSET


class ModelCost(_Wire, kw_only=True):
    input: Number = 0
    output: Number = 0
    cacheRead: Number = 0
    cacheWrite: Number = 0


class Model(_Wire, kw_only=True):
    id: str
    name: str
    api: str
    provider: str
    baseUrl: str = ""
    reasoning: bool = False
    thinkingLevelMap: dict[str, Any] | UnsetType = UNSET
    input: list[str] = msgspec.field(default_factory=lambda: ["text"])
    cost: ModelCost = msgspec.field(default_factory=ModelCost)
    contextWindow: int = 128000
    maxTokens: int = 16384
    headers: dict[str, str] | UnsetType = UNSET
    compat: dict[str, Any] | UnsetType = UNSET


@dataclass
class StreamOptions:
    """Per-request options. Not a wire type."""

    apiKey: str | None = None
    signal: Any = None  # pisces.ai.abort.AbortSignal
    reasoning: str | None = None  # thinking level; None or "off" means no reasoning
    maxTokens: int | None = None
    temperature: float | None = None
    headers: dict[str, str] = field(default_factory=dict)
    sessionId: str | None = None
    timeoutMs: int | None = None  # whole-request timeout handed to the SDK
    idleTimeoutMs: int | None = None  # a stream that sends nothing for this long ends with an error
    maxRetries: int = 2  # retries inside the SDK (pi's default)
    thinkingBudgets: dict[str, int] | None = None
    # Who makes the request: empty for the main session; for a subagent its names, most specific first
    # (allocated task id, task id, agent name). Providers ignore it; the faux model picks a script by it.
    requester: tuple[str, ...] = ()
    # Called with the provider's request payload (a dict) right before it is sent; returns the payload to send
    # (the same, changed or replaced). Extensions' before_provider_request event. None: sent as built.
    onPayload: Callable[[Any], Awaitable[Any]] | None = None


# ---------------------------------------------------------------------------------------------
# The assistant message event stream
# ---------------------------------------------------------------------------------------------
class _Event(_Wire, kw_only=True, tag_field="type"):
    pass


class StartEvent(_Event, kw_only=True, tag="start"):
    partial: AssistantMessage


class TextStartEvent(_Event, kw_only=True, tag="text_start"):
    contentIndex: int
    partial: AssistantMessage | UnsetType = UNSET


class TextDeltaEvent(_Event, kw_only=True, tag="text_delta"):
    contentIndex: int
    delta: str
    partial: AssistantMessage | UnsetType = UNSET


class TextEndEvent(_Event, kw_only=True, tag="text_end"):
    contentIndex: int
    content: str
    partial: AssistantMessage | UnsetType = UNSET


class ThinkingStartEvent(_Event, kw_only=True, tag="thinking_start"):
    contentIndex: int
    partial: AssistantMessage | UnsetType = UNSET


class ThinkingDeltaEvent(_Event, kw_only=True, tag="thinking_delta"):
    contentIndex: int
    delta: str
    partial: AssistantMessage | UnsetType = UNSET


class ThinkingEndEvent(_Event, kw_only=True, tag="thinking_end"):
    contentIndex: int
    content: str
    partial: AssistantMessage | UnsetType = UNSET


class ToolCallStartEvent(_Event, kw_only=True, tag="toolcall_start"):
    contentIndex: int
    partial: AssistantMessage | UnsetType = UNSET


class ToolCallDeltaEvent(_Event, kw_only=True, tag="toolcall_delta"):
    contentIndex: int
    delta: str
    partial: AssistantMessage | UnsetType = UNSET


class ToolCallEndEvent(_Event, kw_only=True, tag="toolcall_end"):
    contentIndex: int
    toolCall: ToolCall
    partial: AssistantMessage | UnsetType = UNSET


class DoneEvent(_Event, kw_only=True, tag="done"):
    reason: str  # "stop" | "length" | "toolUse"
    message: AssistantMessage


class ErrorEvent(_Event, kw_only=True, tag="error"):
    reason: str  # "error" | "aborted"
    error: AssistantMessage


AssistantMessageEvent = Union[
    StartEvent,
    TextStartEvent,
    TextDeltaEvent,
    TextEndEvent,
    ThinkingStartEvent,
    ThinkingDeltaEvent,
    ThinkingEndEvent,
    ToolCallStartEvent,
    ToolCallDeltaEvent,
    ToolCallEndEvent,
    DoneEvent,
    ErrorEvent,
]


def event_type(ev: Any) -> str:
    """The ``type`` tag of any tagged wire struct (events, content blocks)."""
    return ev.__struct_config__.tag
