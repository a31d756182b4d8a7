"""Event streams of the RPC client: :class:`EventStream`, one subscriber's queue of the agent's events.

Created by :meth:`pisces.client.client.RpcClient.events`; re-exported by :mod:`pisces.client.client`.
"""

from __future__ import annotations

import asyncio
import collections
import time
from typing import TYPE_CHECKING, Any, Callable, Iterable, Union

from pisces.client.types import RpcClientError, RpcTimeoutError

if TYPE_CHECKING:
    from pisces.client.client import RpcClient

__all__ = ["Event", "EventFilter", "EventStream"]

Event = dict[str, Any]
EventFilter = Union[str, Iterable[str], Callable[[Event], bool], None]


# -- event streams -----------------------------------------------------------------------------
class EventStream:
    """One subscriber's queue of events, open from creation until ``close()`` or the process's end.

    ``async for event in stream`` ends when the process is gone (after the queued events). At most
    ``maxsize`` events are kept: past that the oldest are dropped (counted in ``dropped``).
    """

    def __init__(self, client: "RpcClient", types: EventFilter = None, maxsize: int | None = 100_000) -> None:
        self._client = client
        self._match = _matcher(types)
        self._queue: collections.deque[Event] = collections.deque()
        self._maxsize = maxsize
        self._waiter: asyncio.Future | None = None
        self._ended = False
        self._closed = False
        self.dropped = 0

    def _push(self, event: Event) -> None:
        if self._closed or (self._match is not None and not self._match(event)):
            return
        if self._maxsize and len(self._queue) >= self._maxsize:
            self._queue.popleft()
            self.dropped += 1
        self._queue.append(event)
        self._wake()

    def _end(self) -> None:
        self._ended = True
        self._wake()

    def _wake(self) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def next(self, timeout: float | None = None) -> Event | None:
        """The next event; None once the stream is closed or the process is gone and the queue is empty.

        Raises RpcTimeoutError if nothing arrives within ``timeout`` seconds.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            if self._queue:
                return self._queue.popleft()
            if self._ended or self._closed:
                return None
            remaining = _remaining(deadline)
            if remaining == 0:
                raise RpcTimeoutError(f"no event within {timeout:g} s")
            waiter = self._waiter = asyncio.get_running_loop().create_future()
            try:
                await asyncio.wait_for(waiter, remaining)
            except asyncio.TimeoutError:
                pass  # checked at the top of the loop
            finally:
                if self._waiter is waiter:
                    self._waiter = None

    async def get(self, timeout: float | None = None) -> Event:
        """The next event; raises the process's exit error once the process is gone (RpcTimeoutError on timeout)."""
        event = await self.next(timeout)
        if event is None:
            raise self._client._exit_exception() if self._ended else RpcClientError("the event stream is closed")
        return event

    def get_nowait(self) -> Event | None:
        return self._queue.popleft() if self._queue else None

    def pending(self) -> list[Event]:
        """Take every event already queued."""
        items = list(self._queue)
        self._queue.clear()
        return items

    def close(self) -> None:
        self._closed = True
        self._client._streams.discard(self)
        self._wake()

    def __aiter__(self) -> "EventStream":
        return self

    async def __anext__(self) -> Event:
        event = await self.next()
        if event is None:
            raise StopAsyncIteration
        return event

    def __enter__(self) -> "EventStream":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    async def __aenter__(self) -> "EventStream":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self.close()


def _matcher(types: EventFilter) -> Callable[[Event], bool] | None:
    if types is None:
        return None
    if callable(types):
        return types
    wanted = {types} if isinstance(types, str) else set(types)
    return lambda event: event.get("type") in wanted


def _remaining(deadline: float | None) -> float | None:
    return None if deadline is None else max(0.0, deadline - time.monotonic())
