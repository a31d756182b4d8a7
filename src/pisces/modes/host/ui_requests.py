"""Requests to a client that wait for its answer: extension dialogs, host tool calls, approvals.

``PendingRequests`` is the table of open requests, keyed by id. Each request ends exactly once: with the first
answer that names its id (later answers and unknown ids are ignored), or with no answer when its time runs
out, its abort signal fires or the table is closed (stdin ended). It writes nothing itself.

``RemoteUI`` is the session UI of a mode with a client on the other end (RPC over stdio today; the web host
can hand it a ``send`` that broadcasts to many clients, and the first answer wins). It writes pi's
``extension_ui_request`` frames through ``send(frame)``. When a dialog ends without an answer, the client is
told with ``{"type":"extension_ui_request","id":…,"method":"cancel","targetId":<the dialog's id>}``.
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable

from pisces.core.session.ui import SessionUI

Send = Callable[[dict[str, Any]], None]

DEFAULT_DIALOG_TIMEOUT_MS = 600_000  # a dialog nobody answers ends (with its default) after ten minutes


def new_id() -> str:
    import uuid  # noqa: PLC0415 - not needed at start-up

    return str(uuid.uuid4())


class _Pending:
    __slots__ = ("future", "on_update", "timer", "remove_abort")

    def __init__(self, future: asyncio.Future[dict[str, Any]],
                 on_update: Callable[[dict[str, Any]], None] | None) -> None:
        self.future = future
        self.on_update = on_update
        self.timer: asyncio.TimerHandle | None = None
        self.remove_abort: Callable[[], None] | None = None


class PendingRequests:
    """Open requests by id. ``wait`` returns the answer frame, or ``{"cancelled": True, <why>: True}`` with
    ``timedOut``, ``aborted`` or ``closed`` when no answer came."""

    def __init__(self) -> None:
        self._open: dict[str, _Pending] = {}
        self.closed = False

    def __len__(self) -> int:
        return len(self._open)

    def __contains__(self, request_id: object) -> bool:
        return request_id in self._open

    async def wait(self, request_id: str, *, send: Callable[[], None], timeout_ms: int | None = None,
                   signal: Any = None, on_update: Callable[[dict[str, Any]], None] | None = None
                   ) -> dict[str, Any]:
        """Register ``request_id``, call ``send()`` (which writes the request), and wait for the outcome."""
        if self.closed:
            return {"cancelled": True, "closed": True}
        if signal is not None and signal.aborted:
            return {"cancelled": True, "aborted": True}
        loop = asyncio.get_running_loop()
        entry = _Pending(loop.create_future(), on_update)
        self._open[request_id] = entry
        if timeout_ms is not None:
            entry.timer = loop.call_later(timeout_ms / 1000, self._end, request_id,
                                          {"cancelled": True, "timedOut": True})
        if signal is not None:
            entry.remove_abort = signal.add_listener(
                lambda: self._end(request_id, {"cancelled": True, "aborted": True}))
        try:
            send()
        except BaseException:
            self._end(request_id, {"cancelled": True, "closed": True})
            raise
        try:
            return await asyncio.shield(entry.future)
        except asyncio.CancelledError:
            self._end(request_id, {"cancelled": True, "aborted": True})
            raise

    def answer(self, request_id: Any, frame: dict[str, Any]) -> bool:
        """The client's answer. False (and nothing happens) for an id that is not open."""
        if not isinstance(request_id, str) or request_id not in self._open:
            return False
        return self._end(request_id, frame)

    def update(self, request_id: Any, frame: dict[str, Any]) -> bool:
        """A progress frame for an open request (host tool updates). False for an unknown id."""
        entry = self._open.get(request_id) if isinstance(request_id, str) else None
        if entry is None or entry.on_update is None:
            return entry is not None
        try:
            entry.on_update(frame)
        except Exception:  # noqa: BLE001 - a bad update must not end the request
            pass
        return True

    def close(self) -> None:
        """End every open request with no answer (``closed``); later requests end at once."""
        self.closed = True
        for request_id in list(self._open):
            self._end(request_id, {"cancelled": True, "closed": True})

    def _end(self, request_id: str, outcome: dict[str, Any]) -> bool:
        entry = self._open.pop(request_id, None)
        if entry is None:
            return False
        if entry.timer is not None:
            entry.timer.cancel()
        if entry.remove_abort is not None:
            entry.remove_abort()
        if not entry.future.done():
            entry.future.set_result(outcome)
        return True


def answered(outcome: dict[str, Any]) -> bool:
    """Whether an outcome of ``PendingRequests.wait`` is the client's own answer."""
    return not (outcome.get("timedOut") or outcome.get("aborted") or outcome.get("closed"))


class RemoteUI(SessionUI):
    """The session UI of a mode with a client: pi's ``extension_ui_request`` frames written through ``send``."""

    has_ui = True

    def __init__(self, send: Send, pending: PendingRequests | None = None,
                 default_timeout_ms: int | None = DEFAULT_DIALOG_TIMEOUT_MS, *, cancel_when_answered: bool = False
                 ) -> None:
        self.send = send
        self.pending = pending if pending is not None else PendingRequests()
        self.default_timeout_ms = default_timeout_ms
        # many clients on one session (the web host): once one answers, the others are told to close the dialog
        self.cancel_when_answered = cancel_when_answered

    def _frame(self, request_id: str, method: str, fields: dict[str, Any]) -> dict[str, Any]:
        frame: dict[str, Any] = {"type": "extension_ui_request", "id": request_id, "method": method}
        frame.update((k, v) for k, v in fields.items() if v is not None)  # absent, never null (as pi)
        return frame

    async def _dialog(self, method: str, fields: dict[str, Any], timeout_ms: int | None, signal: Any
                      ) -> dict[str, Any] | None:
        request_id = new_id()
        frame = self._frame(request_id, method, {**fields, "timeout": timeout_ms})
        outcome = await self._ask(request_id, frame, timeout_ms, signal)
        return outcome if answered(outcome) else None

    async def request(self, frame: dict[str, Any], *, timeout_ms: int | None = None, signal: Any = None
                      ) -> dict[str, Any]:
        given = frame.get("id")
        request_id = given if isinstance(given, str) else new_id()
        return await self._ask(request_id, {**frame, "id": request_id}, timeout_ms, signal)

    async def _ask(self, request_id: str, frame: dict[str, Any], timeout_ms: int | None, signal: Any
                   ) -> dict[str, Any]:
        if signal is not None and signal.aborted:
            return {"cancelled": True, "aborted": True}  # never sent, so nothing to cancel
        limit = timeout_ms if timeout_ms is not None else self.default_timeout_ms
        try:
            outcome = await self.pending.wait(request_id, send=lambda: self.send(frame), timeout_ms=limit,
                                              signal=signal)
        except asyncio.CancelledError:
            self._cancel(request_id)
            raise
        if (self.cancel_when_answered or not answered(outcome)) and not outcome.get("closed"):
            self._cancel(request_id)
        return outcome

    def _cancel(self, target_id: str) -> None:
        try:
            self.send({"type": "extension_ui_request", "id": new_id(), "method": "cancel", "targetId": target_id})
        except Exception:  # noqa: BLE001 - the client may be gone
            pass

    def _fire(self, method: str, fields: dict[str, Any]) -> None:
        self.send(self._frame(new_id(), method, fields))

    def answer(self, frame: dict[str, Any]) -> bool:
        return self.pending.answer(frame.get("id"), frame)

    def close(self) -> None:
        self.pending.close()
