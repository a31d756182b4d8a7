"""Entry point of ``pisces --mode acp``: an ACP agent on stdin/stdout for an editor to launch.

stdout carries protocol frames only: the real stdout is kept on a private descriptor and descriptor 1 is
pointed at stderr, so a stray ``print`` (ours, a library's, a child process's) cannot corrupt the stream.
stdin EOF ends the process with code 0 after every session was stopped and its file flushed; SIGINT, SIGTERM
and SIGHUP the same way, with 130, 143, 129 (pisces.modes.signals).
"""

from __future__ import annotations

import asyncio
import gc
import os
import sys
from typing import Any


def _take_stdout() -> int:
    sys.stdout.flush()
    fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return fd


async def _serve(args: Any, out_fd: int) -> int:
    from acp.core import AgentSideConnection  # the SDK: over a second to import, so only in this mode

    from .agent import PiscesAgent
    from .outbox import ResponseWatch
    from .transport import InFlight, StdioTransport

    # The SDK's thousands of schema classes live as long as the process: no cycle search over them, during
    # the import (run_acp paused the collector) or ever after.
    gc.freeze()
    gc.enable()

    if args.faux_script:  # refuse a bad script at start-up, as the other modes do
        from pisces.ai.providers import faux

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
    conn = AgentSideConnection(agent, transport, listening=False, use_unstable_protocol=True,
                               observers=[watch.observe, in_flight.observe])
    from pisces.modes import signals

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
    out_fd = _take_stdout()
    gc.disable()
    try:
        code = asyncio.run(_serve(args, out_fd))
    except KeyboardInterrupt:
        code = 130
    except Exception:  # noqa: BLE001 - a bug: report it, then still leave through os._exit below
        import traceback

        traceback.print_exc()
        code = 1
    from pisces.modes.signals import kill_tool_processes

    kill_tool_processes()  # whatever the shutdown could not stop in time (no-op when nothing runs)
    sys.stderr.flush()
    os._exit(code)  # the stdin reader thread may still sit in a blocking read
