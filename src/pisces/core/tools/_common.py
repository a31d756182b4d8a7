"""Small helpers the tools share: running blocking file work off the event loop, abortably."""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Awaitable, Callable, TypeVar

from pisces.agent.types import AgentToolResult, ToolError
from pisces.ai.abort import AbortSignal
from pisces.ai.types import UNSET, TextContent

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


async def run_abortable(signal: AbortSignal | None, fn: Callable[..., T], *args: Any,
                        cancel: threading.Event | None = None) -> T:
    """Run blocking ``fn(*args)`` on a worker thread. An abort ends the wait at once with pi's
    "Operation aborted" error and sets ``cancel`` so that a cooperative ``fn`` can stop early."""
    check_aborted(signal)
    loop = asyncio.get_running_loop()
    work = loop.run_in_executor(None, fn, *args)
    if signal is None:
        return await work
    aborted: asyncio.Future[None] = loop.create_future()

    def on_abort() -> None:
        if cancel is not None:
            cancel.set()
        if not aborted.done():
            aborted.set_result(None)

    remove = signal.add_listener(on_abort)
    try:
        await asyncio.wait({work, aborted}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        remove()
    if aborted.done():
        work.add_done_callback(lambda f: f.cancelled() or f.exception())  # never "exception never retrieved"
        raise ToolError(OPERATION_ABORTED)
    aborted.cancel()
    return work.result()


async def await_abortable(signal: AbortSignal | None, awaitable: Awaitable[T]) -> T:
    """Await a backend call (a host answering over a connection). An abort cancels it and raises pi's
    "Operation aborted" error at once; a backend's own error becomes the tool's error text."""
    from pisces.core.tools.backends import BackendError

    check_aborted(signal)
    task = asyncio.ensure_future(awaitable)
    remove = signal.add_listener(task.cancel) if signal is not None else (lambda: None)
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
