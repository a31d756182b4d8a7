"""What a provider's error text means: worth retrying, a context that is too long, or a server's own wait.

pi's patterns, applied to a bounded part of the text (a provider's error body can be megabytes).
"""

from __future__ import annotations

import functools
import re

# pi's pattern for errors worth retrying
RETRYABLE_PATTERN = (
    r"overloaded|provider.?returned.?error|rate.?limit|too many requests|429|500|502|503|504|"
    r"service.?unavailable|server.?error|internal.?error|network.?error|connection.?error|"
    r"connection.?refused|connection.?lost|websocket.?closed|websocket.?error|other side closed|fetch failed|"
    r"upstream.?connect|reset before headers|socket hang up|ended without|"
    r"http2 request did not get a response|timed? out|timeout|terminated|retry delay"
)
# Errors that mean the context is too long: compaction handles those, never a retry.
OVERFLOW_PATTERN = (
    r"prompt is too long|exceeds the context window|maximum context length is \d+ tokens|"
    r"context[_ ]length[_ ]exceeded|too many tokens|input is too long|exceeds the maximum|"
    r"reduce the length of the messages|context window"
)
_RETRY_AFTER_PATTERN = r"retry[- ]after[:= ]+(\d+(?:\.\d+)?)\s*(ms|s|seconds?)?|retry in (\d+(?:\.\d+)?)\s*(ms|s)"
# The patterns only ever look at this much of an error text: its head, where the status and the provider's
# message are, and its tail, where a retry-after hint is appended. A 50 MB error page once took these regexes
# 51 s on the event loop; this bounds every classification to a few milliseconds.
CLASSIFY_HEAD_CHARS = 8192
CLASSIFY_TAIL_CHARS = 512


@functools.cache
def _regex(pattern: str) -> re.Pattern[str]:
    """Compiled on the first error, not at start-up (these three cost a millisecond to compile)."""
    return re.compile(pattern, re.I)


def classified_part(message: str) -> str:
    """What the patterns look at: the whole text when short, else its head and its tail."""
    if len(message) <= CLASSIFY_HEAD_CHARS + CLASSIFY_TAIL_CHARS:
        return message
    return f"{message[:CLASSIFY_HEAD_CHARS]}\n{message[-CLASSIFY_TAIL_CHARS:]}"


def is_overflow_error(message: str | None) -> bool:
    if not message:
        return False
    text = classified_part(message)
    return bool(_regex(OVERFLOW_PATTERN).search(text)) and not re.search(r"rate.?limit|too many requests", text, re.I)


def is_retryable_error(message: str | None) -> bool:
    if not message or is_overflow_error(message):
        return False
    return bool(_regex(RETRYABLE_PATTERN).search(classified_part(message)))


def retry_after_ms(message: str) -> int | None:
    """A server's own wait, when the error text carries one (``Retry-After: 7``, ``retry in 2s``)."""
    m = _regex(_RETRY_AFTER_PATTERN).search(classified_part(message or ""))
    if not m:
        return None
    value, unit = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
    n = float(value)
    return int(n if unit and unit.lower() == "ms" else n * 1000)
