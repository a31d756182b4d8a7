"""How many tokens a context holds: the provider's reported usage where a reply has one, pi's estimate
(characters / 4, images 4800 characters) for everything after it. Compaction decides on these; the session's
views show them."""

from __future__ import annotations

import json
import math
from typing import Any

from pisces.ai.types import (
    AssistantMessage,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)


def _content_chars(content: Any) -> int:
    if isinstance(content, str):
        return len(content)
    n = 0
    for b in content or []:
        if isinstance(b, TextContent):
            n += len(b.text)
        elif isinstance(b, ImageContent):
            n += 4800
    return n


def estimate_tokens(message: Any) -> int:
    """pi's estimate: characters / 4, rounded up; images count 4800 characters."""
    role = getattr(message, "__struct_config__", None)
    tag = role.tag if role is not None else None
    chars = 0
    if isinstance(message, AssistantMessage):
        for b in message.content:
            if isinstance(b, TextContent):
                chars += len(b.text)
            elif isinstance(b, ThinkingContent):
                chars += len(b.thinking)
            elif isinstance(b, ToolCall):
                chars += len(b.name) + len(json.dumps(b.arguments, separators=(",", ":"), ensure_ascii=False))
    elif isinstance(message, UserMessage):
        chars = _content_chars(message.content)
    elif isinstance(message, ToolResultMessage) or tag == "custom":
        chars = _content_chars(message.content)
    elif tag == "bashExecution":
        chars = len(message.command) + len(message.output)
    elif tag in ("branchSummary", "compactionSummary"):
        chars = len(message.summary)
    return math.ceil(chars / 4)


def usage_tokens(message: AssistantMessage) -> int:
    u = message.usage
    return u.totalTokens or (u.input + u.output + u.cacheRead + u.cacheWrite)


def _usable(message: Any) -> bool:
    return isinstance(message, AssistantMessage) and message.stopReason not in ("aborted", "error")


def estimate_context_tokens(messages: list[Any]) -> dict[str, Any]:
    """{tokens, usageTokens, trailingTokens, lastUsageIndex}: the last usable assistant usage plus
    estimates of everything after it, or the sum of estimates when no usage exists."""
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        if _usable(m) and usage_tokens(m) > 0:
            used = usage_tokens(m)
            trailing = sum(estimate_tokens(x) for x in messages[i + 1:])
            return {"tokens": used + trailing, "usageTokens": used, "trailingTokens": trailing, "lastUsageIndex": i}
    total = sum(estimate_tokens(x) for x in messages)
    return {"tokens": total, "usageTokens": 0, "trailingTokens": total, "lastUsageIndex": None}
