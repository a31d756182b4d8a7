"""The coding layer's message roles beyond ``pisces.ai.types``, and ``convert_to_llm``.

An *AgentMessage* is any message the agent keeps in its context: the three LLM roles (user, assistant,
toolResult) plus ``bashExecution``, ``custom``, ``branchSummary`` and ``compactionSummary``. The last four
are turned into user messages by :func:`convert_to_llm` before a request goes out, exactly as pi does.
"""

from __future__ import annotations

import weakref
from typing import Any, Union

import msgspec
from msgspec import UNSET, Struct, UnsetType

from pisces.ai.tracked_list import TrackedList
from pisces.ai.types import (
    AssistantMessage,
    ImageContent,
    Message,
    TextContent,
    ToolResultMessage,
    UserMessage,
    now_ms,
)

from .ids import iso_to_ms

__all__ = [
    "BashExecutionMessage",
    "CustomMessage",
    "BranchSummaryMessage",
    "CompactionSummaryMessage",
    "AgentMessage",
    "COMPACTION_SUMMARY_PREFIX",
    "COMPACTION_SUMMARY_SUFFIX",
    "BRANCH_SUMMARY_PREFIX",
    "BRANCH_SUMMARY_SUFFIX",
    "decode_message",
    "message_role",
    "bash_execution_to_text",
    "create_custom_message",
    "create_branch_summary_message",
    "create_compaction_summary_message",
    "convert_to_llm",
]

COMPACTION_SUMMARY_PREFIX = (
    "The conversation history before this point was compacted into the following summary:\n\n<summary>\n"
)
COMPACTION_SUMMARY_SUFFIX = "\n</summary>"
BRANCH_SUMMARY_PREFIX = "The following is a summary of a branch that this conversation came back from:\n\n<summary>\n"
BRANCH_SUMMARY_SUFFIX = "</summary>"


class _Msg(Struct, kw_only=True, tag_field="role"):
    pass


class BashExecutionMessage(_Msg, kw_only=True, tag="bashExecution"):
    """A command the user ran with ``!`` (or RPC ``bash``). ``exitCode`` is absent when cancelled."""

    command: str
    output: str
    exitCode: int | None | UnsetType = UNSET
    cancelled: bool = False
    truncated: bool = False
    fullOutputPath: str | None | UnsetType = UNSET
    excludeFromContext: bool | UnsetType = UNSET
    timestamp: int = msgspec.field(default_factory=now_ms)


class CustomMessage(_Msg, kw_only=True, tag="custom"):
    """A message an extension injected; it reaches the LLM as a user message."""

    customType: str
    content: str | list[Union[TextContent, ImageContent]]
    display: bool
    details: Any = UNSET
    timestamp: int = msgspec.field(default_factory=now_ms)


class BranchSummaryMessage(_Msg, kw_only=True, tag="branchSummary"):
    summary: str
    fromId: str
    timestamp: int = msgspec.field(default_factory=now_ms)


class CompactionSummaryMessage(_Msg, kw_only=True, tag="compactionSummary"):
    summary: str
    tokensBefore: int | float
    timestamp: int = msgspec.field(default_factory=now_ms)


AgentMessage = Union[
    UserMessage,
    AssistantMessage,
    ToolResultMessage,
    BashExecutionMessage,
    CustomMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
]

_LLM_TYPES = (UserMessage, AssistantMessage, ToolResultMessage)
_LLM_TYPE_SET = frozenset(_LLM_TYPES)
_json_decoder = msgspec.json.Decoder(AgentMessage)


def decode_message(data: bytes | str | dict) -> AgentMessage:
    """Any AgentMessage from JSON text or a parsed dict, chosen by ``role``.

    Raises ``msgspec.ValidationError`` for an unknown role or a malformed message.
    """
    if isinstance(data, dict):
        return msgspec.convert(data, AgentMessage)
    return _json_decoder.decode(data)


def message_role(message: Any) -> str | None:
    """The ``role`` of a message struct or dict."""
    if isinstance(message, dict):
        role = message.get("role")
        return role if isinstance(role, str) else None
    config = getattr(message, "__struct_config__", None)
    return config.tag if config is not None else None


def bash_execution_to_text(msg: BashExecutionMessage) -> str:
    text = f"Ran `{msg.command}`\n"
    text += f"```\n{msg.output}\n```" if msg.output else "(no output)"
    if msg.cancelled:
        text += "\n\n(command cancelled)"
    elif isinstance(msg.exitCode, int) and msg.exitCode != 0:
        text += f"\n\nCommand exited with code {msg.exitCode}"
    if msg.truncated and msg.fullOutputPath:
        text += f"\n\n[Output truncated. Full output: {msg.fullOutputPath}]"
    return text


def create_custom_message(custom_type: str, content: Any, display: bool, details: Any, timestamp: str) -> CustomMessage:
    """A custom_message entry as the message it contributes to the context."""
    return CustomMessage(
        customType=custom_type, content=content, display=display, details=details, timestamp=iso_to_ms(timestamp)
    )


def create_branch_summary_message(summary: str, from_id: str, timestamp: str) -> BranchSummaryMessage:
    return BranchSummaryMessage(summary=summary, fromId=from_id, timestamp=iso_to_ms(timestamp))


def create_compaction_summary_message(summary: str, tokens_before: int | float,
                                      timestamp: str) -> CompactionSummaryMessage:
    return CompactionSummaryMessage(summary=summary, tokensBefore=tokens_before, timestamp=iso_to_ms(timestamp))


def _user_text(text: str, timestamp: int) -> UserMessage:
    return UserMessage(content=[TextContent(text=text)], timestamp=timestamp)


# id(history) -> (the history, its edits then, how many of its first messages are all the LLM's own types)
_TYPED: dict[int, tuple[weakref.ref[TrackedList], int, int]] = {}
_TYPED_MAX = 64


def _typed_prefix(messages: TrackedList) -> int:
    """How many of the first messages an earlier call found to be all the LLM's own types and are still there."""
    entry = _TYPED.get(id(messages))
    if entry is not None and entry[0]() is messages and messages.unchanged_since(entry[1], entry[2]):
        return entry[2]
    return 0


def _forget_typed() -> None:
    for key, (ref, _, _) in list(_TYPED.items()):
        if ref() is None:
            _TYPED.pop(key, None)
    if len(_TYPED) > _TYPED_MAX:
        _TYPED.clear()


def convert_to_llm(messages: list[Any]) -> list[Message]:
    """AgentMessages -> the LLM's user/assistant/toolResult messages (pi's ``convertToLlm``).

    bashExecution becomes a user text (skipped when ``excludeFromContext``), custom a user message with its
    content, and the two summaries user texts wrapped in pi's prefix and suffix. Unknown roles are dropped.
    """
    if type(messages) is TrackedList:  # the agent's own history: check only what came since the last call
        known = _typed_prefix(messages)
        if _LLM_TYPE_SET.issuperset(map(type, messages[known:] if known else messages)):
            _TYPED[id(messages)] = (weakref.ref(messages), messages.edits, len(messages))
            if len(_TYPED) > _TYPED_MAX:
                _forget_typed()
            return messages.copy()  # a copy that says which history it is (see pisces.ai.tracked_list)
    elif _LLM_TYPE_SET.issuperset(map(type, messages)):  # the usual history: nothing to convert
        return list(messages)
    out: list[Message] = []
    for m in messages:
        if isinstance(m, _LLM_TYPES):
            out.append(m)
        elif isinstance(m, BashExecutionMessage):
            if m.excludeFromContext is True:
                continue
            out.append(_user_text(bash_execution_to_text(m), m.timestamp))
        elif isinstance(m, CustomMessage):
            content: list[TextContent | ImageContent] = (
                [TextContent(text=m.content)] if isinstance(m.content, str) else m.content)
            out.append(UserMessage(content=content, timestamp=m.timestamp))
        elif isinstance(m, BranchSummaryMessage):
            out.append(_user_text(BRANCH_SUMMARY_PREFIX + m.summary + BRANCH_SUMMARY_SUFFIX, m.timestamp))
        elif isinstance(m, CompactionSummaryMessage):
            out.append(_user_text(COMPACTION_SUMMARY_PREFIX + m.summary + COMPACTION_SUMMARY_SUFFIX, m.timestamp))
    return out
