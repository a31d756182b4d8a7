"""``SyncRpcClient``: :class:`RpcClient` without asyncio, for scripts and plain tests.

    with SyncRpcClient(args=["--provider", "faux", "--no-session"]) as client:
        print(client.get_state()["model"]["id"])
        for event in client.prompt_and_wait("hello"):
            ...
        for event in client.iter_events(timeout=5):   # ends when the process exits
            ...

An event loop runs in a background thread; every public coroutine method of RpcClient is available here
as a blocking method with the same signature (generated below, not copied). ``call_timeout`` bounds each
blocking call (None: rely on the async side's own timeouts and on the process's exit). Event callbacks
registered with ``on_event`` run on the loop's thread.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import inspect
import threading
from types import EllipsisType
from typing import Any, Callable, Iterator

from pisces.client.client import Event, EventFilter, RpcClient, RpcClientError, RpcTimeoutError

__all__ = ["SyncRpcClient"]

_EXPLICIT = {"start", "stop", "aclose", "collect_events"}  # wrapped by hand below


class SyncRpcClient:
    def __init__(self, command: list[str] | None = None, *, call_timeout: float | None = None, **kwargs: Any) -> None:
        self.call_timeout = call_timeout
        self._client = RpcClient(command, **kwargs)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="rpc-client-loop", daemon=True)
        self._thread.start()
        self._closed = False

    # -- running coroutines on the loop ---------------------------------------------------------
    def _run(self, coro: Any, timeout: float | None | EllipsisType = ...) -> Any:
        if self._closed:
            coro.close()
            raise RpcClientError("the client is closed")
        wait = self.call_timeout if isinstance(timeout, EllipsisType) else timeout
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return future.result(wait)
        except concurrent.futures.TimeoutError:  # also the base of RpcTimeoutError: whose was it?
            if future.done():
                raise
            future.cancel()
            raise RpcTimeoutError(f"no result within {wait:g} s") from None

    def _in_loop(self, fn: Callable[[], Any]) -> Any:
        async def call() -> Any:
            return fn()

        return self._run(call(), None)

    # -- lifecycle --------------------------------------------------------------------------------
    def start(self) -> "SyncRpcClient":
        self._run(self._client.start(), None)
        return self

    def stop(self, timeout: float | None = None) -> int | None:
        """Stop the process and the loop thread."""
        if self._closed:
            return self._client.returncode
        try:
            return self._run(self._client.stop(timeout), None)
        finally:
            self._closed = True
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(5)
            if not self._thread.is_alive():
                self._loop.close()

    close = stop

    def __enter__(self) -> "SyncRpcClient":
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # -- events -------------------------------------------------------------------------------------
    def on_event(self, callback: Callable[[Event], Any]) -> Callable[[], None]:
        """Call ``callback(event)`` (on the loop's thread) for every event. Returns an unsubscribe."""
        unsubscribe = self._in_loop(lambda: self._client.on_event(callback))
        def unsubscribe_soon() -> None:
            self._loop.call_soon_threadsafe(unsubscribe)

        return unsubscribe_soon

    def iter_events(self, timeout: float | None = None, types: EventFilter = None) -> Iterator[Event]:
        """Events from now on; ends when the process is gone. ``timeout``: the longest wait for the next
        event, after which RpcTimeoutError is raised."""
        stream = self._in_loop(lambda: self._client.events(types))
        try:
            while True:
                event = self._run(stream.next(timeout), None)
                if event is None:
                    return
                yield event
        finally:
            if not self._closed:
                self._loop.call_soon_threadsafe(stream.close)

    def collect_events(self, until_type: EventFilter, timeout: float | None = None) -> list[Event]:
        """Events from now up to and including the first matching ``until_type``."""
        return self._run(self._client.collect_events(until_type, timeout), None)

    # -- everything else -------------------------------------------------------------------------------
    def __getattr__(self, name: str) -> Any:  # properties and plain attributes: returncode, pid, stderr_tail...
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._client, name)

    def __repr__(self) -> str:
        return f"<SyncRpcClient {self._client!r}>"


def _blocking(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def method(self: SyncRpcClient, *args: Any, **kwargs: Any) -> Any:
        return self._run(getattr(self._client, name)(*args, **kwargs))

    method.__signature__ = inspect.signature(fn)  # type: ignore[attr-defined]  # typeshed has no __signature__
    return method


# RpcClient's own methods and those it inherits (the typed commands are in RpcCommands)
for _name, _fn in {k: v for cls in reversed(RpcClient.__mro__) for k, v in vars(cls).items()}.items():
    if not _name.startswith("_") and _name not in _EXPLICIT and inspect.iscoroutinefunction(_fn):
        setattr(SyncRpcClient, _name, _blocking(_name, _fn))
