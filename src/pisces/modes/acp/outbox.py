"""A session's ``session/update`` notifications: in the order they were posted, never before the client has
the response that gave it the session.

Clients drop or choke on a notification for a session they do not know yet (Zed: "session notification for
unknown session"; JetBrains hangs), so an outbox starts closed and opens when the response to the
``session/new`` (``load``, ``resume``) that created it has been written: ``ResponseWatch`` sees every frame
the connection writes and opens the outbox right after that one. No timer is involved.

An outbox is bounded: a client that stops reading its stdin cannot make pisces hold an ever-growing queue.
When ``limit`` updates are waiting, ``on_overflow`` runs once (the session aborts its run, so the agent stops
producing) and a warning is logged; past twice the limit, further updates are dropped and counted (said once in
the log). Everything posted before the overflow is still delivered in order if the client reads again.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Awaitable, Callable

Send = Callable[[Any], Awaitable[None]]
OUTBOX_LIMIT = 20_000  # updates waiting for a client that does not read (a long turn posts a few thousand)

log = logging.getLogger("pisces.acp")


class Outbox:
    def __init__(self, send: Send, limit: int = OUTBOX_LIMIT,
                 on_overflow: Callable[[], None] | None = None) -> None:
        self._send = send
        self._limit = limit
        self._on_overflow = on_overflow
        self._overflowed = False
        self.dropped = 0  # updates refused past twice the limit
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self._open = asyncio.Event()
        self._pump = asyncio.ensure_future(self._run())

    @property
    def is_open(self) -> bool:
        return self._open.is_set()

    def open(self) -> None:
        self._open.set()

    def post(self, update: Any) -> None:
        """Queue ``update``; it is sent once the outbox is open, after everything posted before it."""
        waiting = self._queue.qsize()
        if waiting >= 2 * self._limit:
            if not self.dropped:
                log.warning("the client reads no session updates: dropping new ones (%d waiting)", waiting)
            self.dropped += 1
            return
        self._queue.put_nowait(update)
        if waiting + 1 >= self._limit and not self._overflowed:
            self._overflowed = True
            log.warning("the client has not read %d session updates: stopping the run", waiting + 1)
            if self._on_overflow is not None:
                self._on_overflow()

    async def send_now(self, update: Any) -> None:
        """Send at once, ahead of the queue: only for the history a ``session/load`` replays before its
        response (the client asked for that session by id, so it knows it)."""
        await self._deliver(update)

    async def flush(self) -> None:
        """Return when everything posted so far has been written (the outbox must be open)."""
        await self._queue.join()

    async def _run(self) -> None:
        await self._open.wait()
        while True:
            update = await self._queue.get()
            try:
                await self._deliver(update)
            finally:
                self._queue.task_done()

    async def _deliver(self, update: Any) -> None:
        try:
            await self._send(update)
        except ConnectionError:
            pass  # the client is gone; the process ends with its stdin
        except Exception:
            log.exception("could not send a session update")

    async def close(self) -> None:
        self._pump.cancel()
        try:
            await self._pump
        except asyncio.CancelledError:
            pass
        while not self._queue.empty():  # nobody will send these: release flush() waiters
            self._queue.get_nowait()
            self._queue.task_done()


class ResponseWatch:
    """Opens a session's outbox once the response that gave the client the session has been written.

    An SDK stream observer: it sees each incoming frame before it is handled and each outgoing frame after
    it was written. The session is named by the request (``load``, ``resume``) or by the response (``new``)."""

    _OPENING = ("session/new", "session/load", "session/resume")

    def __init__(self) -> None:
        self._requests: dict[Any, str | None] = {}  # request id -> the session it names (None: from the result)
        self._outboxes: dict[str, Outbox] = {}

    def expect(self, session_id: str, outbox: Outbox) -> None:
        """``outbox`` opens after the successful response that carries (or answers for) ``session_id``."""
        self._outboxes[session_id] = outbox

    def observe(self, event: Any) -> None:
        message = event.message
        if event.direction.value == "incoming":
            if message.get("method") in self._OPENING and "id" in message:
                params = message.get("params")
                named = params.get("sessionId") if isinstance(params, dict) else None
                self._requests[message["id"]] = named if isinstance(named, str) else None
            return
        if "method" in message or message.get("id") not in self._requests:
            return
        session_id = self._requests.pop(message["id"])
        result = message.get("result")
        if "error" in message:
            return
        if session_id is None and isinstance(result, dict):
            session_id = result.get("sessionId")
        outbox = self._outboxes.pop(session_id, None) if isinstance(session_id, str) else None
        if outbox is not None:
            outbox.open()
