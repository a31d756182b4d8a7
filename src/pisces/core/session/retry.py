"""Auto-retry of transient provider errors, with exponential back-off (pi's semantics and events).

After a failed run: if the error is transient and retries remain, ``auto_retry_start`` is emitted, the
error message leaves the in-memory context (the file keeps it), the back-off sleeps (``abort_retry`` and
``abort`` cancel it), and the session continues the run. The first good reply emits
``auto_retry_end{success:true}``; exhaustion or cancellation emit it with ``success:false``.
"""

from __future__ import annotations

import asyncio
from typing import Any

from pisces.ai.error_kinds import (  # noqa: F401 - the retry policy's classifiers, importable from here too
    classified_part,
    is_overflow_error,
    is_retryable_error,
    retry_after_ms,
)
from pisces.ai.types import AssistantMessage


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
        """A reply that is not an error arrived: a retry sequence in progress has succeeded, unless that reply
        was aborted (by the person, or by a budget that ran out): then it failed."""
        if self.attempt > 0:
            if message.stopReason == "aborted":
                self._end(False, message.errorMessage if isinstance(message.errorMessage, str) else "Aborted")
            else:
                self._end(True)

    async def handle_error(self, last: AssistantMessage) -> bool:
        """Returns True when the caller should continue the run (a retry is due)."""
        settings = self.session.settings
        error = last.errorMessage if isinstance(last.errorMessage, str) else ""
        if not settings.retry_enabled or not is_retryable_error(error):
            if self.attempt > 0:  # a retry ended in an error that is not worth retrying
                self._end(False, error)
            return False
        budget = self.session.budget
        spent = budget.exceeded_reason() if budget is not None else None
        if spent is not None:  # a retry is a new request: none starts once the budget is spent
            if self.attempt > 0:
                self._end(False, f"Session budget exceeded ({spent})")
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
