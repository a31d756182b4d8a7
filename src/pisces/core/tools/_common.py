"""Small helpers the tools share: running blocking file work off the event loop, abortably."""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Awaitable, Callable, TypeVar

from pisces.agent.types import AgentToolResult, ToolError
from pisces.ai.abort import AbortSignal
from pisces.ai.types import UNSET, TextContent
from pisces.core.tools.backends import BackendError

T = TypeVar("T")

OPERATION_ABORTED = "Operation aborted"


def text_result(text: str, details: Any = None) -> AgentToolResult:
    """A tool's answer in one text block; no ``details`` field when ``details`` is None."""
    return AgentToolResult(content=[TextContent(text=text)], details=UNSET if details is None else details)


def number_param(params: dict[str, Any], name: str, default: int) -> int:
    """An optional numeric parameter as an int (JSON numbers may arrive as floats), else ``default``."""
    value = params.get(name)
    return int(value) if isinstance(value, (int, float)) else default


def check_aborted(signal: AbortSignal | None) -> None:
    if signal is not None and signal.aborted:
        raise ToolError(OPERATION_ABORTED)


def _settle(fut: "asyncio.Future[Any]", ok: bool, value: Any) -> None:
    if fut.done():
        return
    if ok:
        fut.set_result(value)
    else:
        fut.set_exception(value)


def start_worker(loop: asyncio.AbstractEventLoop, fn: Callable[..., T], *args: Any) -> "asyncio.Future[T]":
    """Run ``fn(*args)`` on a new daemon thread; the returned future gets its result or exception.

    Not the loop's default executor: that pool has a handful of threads, a call that cannot be
    interrupted (a read stuck in the kernel, a search that has not reached its next cancellation point)
    would hold one of them, and ``asyncio.run`` waits for every one of them before the process may exit.
    A daemon thread holds nothing else and never delays the exit."""
    fut: asyncio.Future[T] = loop.create_future()

    def target() -> None:
        try:
            outcome: tuple[bool, Any] = (True, fn(*args))
        except BaseException as exc:  # noqa: BLE001 - handed to the awaiting task
            outcome = (False, exc)
        try:
            loop.call_soon_threadsafe(_settle, fut, *outcome)
        except RuntimeError:  # the loop is closed: nobody waits any more
            pass

    threading.Thread(target=target, name=f"pisces-tool-{getattr(fn, '__name__', 'work')}", daemon=True).start()
    return fut


async def run_abortable(signal: AbortSignal | None, fn: Callable[..., T], *args: Any,
                        cancel: threading.Event | None = None) -> T:
    """Run blocking ``fn(*args)`` on a worker thread (see ``start_worker``). An abort (or the awaiting task
    being cancelled) ends the wait at once, with pi's "Operation aborted" error for an abort, and sets
    ``cancel`` so that a cooperative ``fn`` stops at its next check."""
    check_aborted(signal)
    loop = asyncio.get_running_loop()
    work = start_worker(loop, fn, *args)
    work.add_done_callback(lambda f: f.cancelled() or f.exception())  # never "exception never retrieved"
    aborted: asyncio.Future[None] = loop.create_future()

    def on_abort() -> None:
        if cancel is not None:
            cancel.set()
        if not aborted.done():
            aborted.set_result(None)

    remove = signal.add_listener(on_abort) if signal is not None else (lambda: None)
    try:
        waiting: set[asyncio.Future[Any]] = {work, aborted}
        await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        if cancel is not None:
            cancel.set()
        raise
    finally:
        remove()
    if aborted.done():
        raise ToolError(OPERATION_ABORTED)
    aborted.cancel()
    return work.result()


async def await_abortable(signal: AbortSignal | None, awaitable: Awaitable[T]) -> T:
    """Await a backend call (a host answering over a connection). An abort cancels it and raises pi's
    "Operation aborted" error at once; a backend's own error becomes the tool's error text."""

    check_aborted(signal)
    task = asyncio.ensure_future(awaitable)
    def cancel() -> None:
        task.cancel()

    remove = signal.add_listener(cancel) if signal is not None else (lambda: None)
    try:
        return await task
    except asyncio.CancelledError:
        if signal is not None and signal.aborted and task.cancelled():
            raise ToolError(OPERATION_ABORTED) from None
        task.cancel()  # our caller was cancelled: do not leave the call running
        raise
    except (BackendError, OSError) as exc:
        raise ToolError(str(exc) or type(exc).__name__) from None
    finally:
        remove()
