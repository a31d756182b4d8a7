"""Abort always wins over code that does not cooperate: a tool (extension or host tool) or a tool-call gate
awaited by the agent loop.

``until_aborted(awaitable, signal)`` awaits ``awaitable`` as a task. Once ``signal`` aborts, the task gets
``ABORT_GRACE_S`` seconds to finish by itself (a tool that honours the signal returns its own "aborted"
result); after that the loop stops waiting: the task is cancelled (``CancelledError`` at its next ``await``)
and abandoned, and :class:`Abandoned` is raised for the caller to turn into an "Operation aborted" result.
A handler that catches the cancellation and keeps running is left to itself: nothing waits for it, its
result is discarded, and an error it raises later is swallowed. The watchdog needs no cooperation from the
handler, only that it yields the event loop (a handler that blocks the thread itself cannot be interrupted
in-process; see docs/security.md). Extension event handlers (pisces.core.extensions.runner) get the same
grace and are dropped the same way (``drop_late_result``), with one deadline shared by every handler of a wind-down.
"""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, TypeVar

from pisces.ai.abort import AbortSignal

__all__ = ["ABORT_GRACE_S", "ABORTED_TEXT", "Abandoned", "drop_late_result", "until_aborted"]

ABORT_GRACE_S = 1.0  # how long an aborted tool or extension handler may take to return before it is abandoned
ABORTED_TEXT = "Operation aborted"

T = TypeVar("T")


class Abandoned(Exception):
    """The awaited handler did not finish after the abort; it was cancelled and is no longer waited for."""


def drop_late_result(task: asyncio.Future[Any]) -> None:
    """Done-callback for an abandoned task: its late error is retrieved, so it is not reported as unhandled."""
    if not task.cancelled():
        task.exception()  # retrieved: an abandoned handler's late error is not reported as unhandled


async def until_aborted(awaitable: Awaitable[T], signal: AbortSignal | None, grace: float = ABORT_GRACE_S) -> T:
    if signal is None:
        return await awaitable
    task = asyncio.ensure_future(awaitable)
    if not task.done():
        fired = asyncio.get_running_loop().create_future()

        def on_abort() -> None:
            if not fired.done():
                fired.set_result(None)

        remove = signal.add_listener(on_abort)
        try:
            try:
                await asyncio.wait({task, fired}, return_when=asyncio.FIRST_COMPLETED)
            except asyncio.CancelledError:
                task.cancel()
                raise
            if not task.done():
                await asyncio.wait({task}, timeout=grace)
        finally:
            remove()
        if not task.done():
            task.cancel()
            task.add_done_callback(drop_late_result)
            raise Abandoned(ABORTED_TEXT)
    return task.result()
