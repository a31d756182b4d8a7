"""What the entry points of the modes share: claiming stdout for frames, opening the session or saying why
not, the end of start-up, and leaving the process (rpc, acp, web; print opens its session the same way).

Kept free of heavy imports: ``pisces --mode rpc`` imports it on its start-up path.
"""

from __future__ import annotations

import asyncio
import gc
import os
import sys
from typing import Any, Callable, Coroutine, NoReturn

from pisces.core.errors import SessionConfigError
from pisces.core.session.build import open_session_from_args
from pisces.modes.signals import kill_tool_processes


def take_stdout() -> int:
    """Claim the process's stdout for protocol frames: returns a private descriptor on the real stdout and
    points descriptor 1 (and ``sys.stdout``) at stderr, so a stray ``print`` (ours, a library's, a child
    process's) cannot corrupt the stream."""
    sys.stdout.flush()
    fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return fd


async def open_session_or_report(args: Any) -> Any:
    """The session the command line asks for, or, when its configuration is refused, the exit code after the
    reason was written to stderr (callers: ``if isinstance(session, int): return session``)."""

    try:
        return await open_session_from_args(args)
    except SessionConfigError as exc:
        sys.stderr.write(f"pisces: {exc}\n")
        return exc.exit_code


def start_up_done() -> None:
    """Start-up is over (the CLI paused the collector for it): what it built lives as long as the process,
    so the collector never needs to look at it again."""
    gc.freeze()
    gc.enable()


SHUTDOWN_GRACE_S = 5.0  # what still runs when serve() returns gets this long to end after being cancelled


def run_bounded(serve: Callable[[], Coroutine[Any, Any, int]]) -> int:
    """``asyncio.run(serve())``, except that the tasks still running afterwards are cancelled and waited for at
    most ``SHUTDOWN_GRACE_S``: a handler that swallows its cancellation (an extension abandoned after an abort,
    see pisces.core.extensions.runner) cannot keep the process from exiting."""
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        code = loop.run_until_complete(serve())
        left = [t for t in asyncio.all_tasks(loop) if not t.done()]
        for task in left:
            task.cancel()
        if left:
            loop.run_until_complete(asyncio.wait(left, timeout=SHUTDOWN_GRACE_S))
        return code
    finally:
        asyncio.set_event_loop(None)


def run_and_exit(serve: Callable[[], Coroutine[Any, Any, int]]) -> NoReturn:
    """Run a long-running mode's ``serve()`` to its end and leave the process with its exit code: 130 on a
    KeyboardInterrupt that got past the signal handlers, 1 (after the traceback) on a bug. Leaves through
    ``os._exit``: a stdin reader thread may still sit in a blocking read, and the work in flight was already
    aborted and flushed by the mode's shutdown."""
    try:
        code = run_bounded(serve)
    except KeyboardInterrupt:
        code = 130
    except Exception:  # noqa: BLE001 - a bug: report it, then still leave through os._exit below
        import traceback  # noqa: PLC0415 - not needed at start-up

        traceback.print_exc()
        code = 1

    kill_tool_processes()  # whatever the shutdown could not stop in time (no-op when nothing runs)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
