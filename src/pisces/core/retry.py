"""Auto-retry of transient provider errors, with exponential back-off (pi's semantics and events).

After a failed run: if the error is transient and retries remain, ``auto_retry_start`` is emitted, the
error message leaves the in-memory context (the file keeps it), the back-off sleeps (``abort_retry`` and
``abort`` cancel it), and the session continues the run. The first good reply emits
``auto_retry_end{success:true}``; exhaustion or cancellation emit it with ``success:false``.
"""

from __future__ import annotations

import asyncio
import functools
import re
from typing import Any

from pisces.ai.types import AssistantMessage

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


class RetryPolicy:
    def __init__(self, session: Any) -> None:
        self.session = session
        self.attempt = 0
        self._cancel: asyncio.Event | None = None
        self._settled: asyncio.Event | None = None  # set once a cancelled back-off has sent auto_retry_end

    @property
    def waiting(self) -> bool:
        return self._cancel is not None

    def cancel(self) -> None:
        if self._cancel is not None:
            self._cancel.set()

    async def cancel_and_wait(self) -> None:
        """Cancel a back-off in progress and return once its ``auto_retry_end`` has been emitted (at once
        when none is in progress)."""
        settled = self._settled
        self.cancel()
        if settled is not None:
            await settled.wait()

    def _end(self, success: bool, final_error: str | None = None) -> None:
        event: dict[str, Any] = {"type": "auto_retry_end", "success": success, "attempt": self.attempt}
        if final_error is not None:
            event["finalError"] = final_error
        self.attempt = 0
        self.session.emit(event)

    def on_reply(self, message: AssistantMessage) -> None:
        """A good reply arrived: a retry sequence in progress has succeeded."""
        if self.attempt > 0:
            self._end(True)

    async def handle_error(self, last: AssistantMessage) -> bool:
        """Returns True when the caller should continue the run (a retry is due)."""
        settings = self.session.settings
        error = last.errorMessage if isinstance(last.errorMessage, str) else ""
        if not settings.retry_enabled or not is_retryable_error(error):
            if self.attempt > 0:  # a retry ended in an error that is not worth retrying
                self._end(False, error)
            return False
        max_retries = settings.retry_max_retries
        if self.attempt >= max_retries:
            self._end(False, error)
            return False
        self.attempt += 1
        delay = settings.retry_base_delay_ms * (2 ** (self.attempt - 1))
        server_wait = retry_after_ms(error)
        if server_wait is not None:
            delay = max(delay, server_wait)
        delay = min(delay, settings.retry_provider_max_retry_delay_ms)
        self.session.emit({"type": "auto_retry_start", "attempt": self.attempt, "maxAttempts": max_retries,
                           "delayMs": delay, "errorMessage": error})
        messages = self.session.agent.messages
        if messages and messages[-1] is last:
            messages.pop()  # out of the context sent to the model; the session file keeps it
        self._cancel = asyncio.Event()
        settled = self._settled = asyncio.Event()
        try:
            try:
                await asyncio.wait_for(self._cancel.wait(), timeout=delay / 1000)
                cancelled = True
            except asyncio.TimeoutError:
                cancelled = False
            finally:
                self._cancel = None
            if cancelled:
                self._end(False, "Retry cancelled")
                return False
            return True
        finally:
            self._settled = None
            settled.set()
