"""Entry point of ``pisces --mode acp``: an ACP agent on stdin/stdout for an editor to launch.

stdout carries protocol frames only: the real stdout is kept on a private descriptor and descriptor 1 is
pointed at stderr, so a stray ``print`` (ours, a library's, a child process's) cannot corrupt the stream.
stdin EOF ends the process with code 0 after every session was stopped and its file flushed; SIGINT, SIGTERM
and SIGHUP the same way, with 130, 143, 129 (pisces.modes.signals).
"""

from __future__ import annotations

import asyncio
import gc
import sys
from typing import Any

from pisces.modes.entry import run_and_exit, start_up_done, take_stdout


async def _serve(args: Any, out_fd: int) -> int:
    from acp.core import AgentSideConnection  # noqa: PLC0415 - the SDK: over a second to import, so only in this mode

    from .agent import PiscesAgent  # noqa: PLC0415 - loaded on first use
    from .outbox import ResponseWatch  # noqa: PLC0415 - loaded on first use
    from .transport import InFlight, StdioTransport  # noqa: PLC0415 - loaded on first use

    # The SDK's thousands of schema classes live as long as the process: no cycle search over them, during
    # the import (run_acp paused the collector) or ever after.
    start_up_done()

    if args.faux_script:  # refuse a bad script at start-up, as the other modes do
        from pisces.ai.providers import faux  # noqa: PLC0415 - loaded on first use

        try:
            faux.SCRIPT.load_file(args.faux_script)
        except ValueError as exc:
            sys.stderr.write(f"pisces: {exc}\n")
            return 1
    watch = ResponseWatch()
    in_flight = InFlight()
    agent = PiscesAgent(args, watch)

    async def at_eof() -> None:  # stop the turns, then let every request read so far be answered
        agent.cancel_all()
        await in_flight.drain()

    transport = StdioTransport(out_fd, on_eof=at_eof)
    conn = AgentSideConnection(agent,  # type: ignore[arg-type]  # no fork_session: the router serves what exists
                               transport, listening=False, use_unstable_protocol=True,
                               observers=[watch.observe, in_flight.observe])
    from pisces.modes import signals  # noqa: PLC0415 - loaded on first use

    received: list[int] = []
    main = asyncio.current_task()

    def on_signal(signum: int) -> None:  # SIGINT/SIGTERM/SIGHUP: stop the turns, then leave as at EOF
        received.append(signum)
        agent.cancel_all()
        if main is not None:
            main.cancel()

    remove_signals = signals.install(asyncio.get_running_loop(), on_signal)
    try:
        await conn.listen()
    except asyncio.CancelledError:
        if not received:
            raise
    finally:
        await agent.shutdown()
        await conn.close()
        remove_signals()
    return signals.exit_code(received[0]) if received else 0


def run_acp(args: Any) -> int:
    out_fd = take_stdout()
    gc.disable()
    run_and_exit(lambda: _serve(args, out_fd))
