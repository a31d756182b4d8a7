"""Entry point of ``pisces --mode acp``: an ACP agent on stdin/stdout for an editor to launch.

stdout carries protocol frames only: the real stdout is kept on a private descriptor and descriptor 1 is
pointed at stderr, so a stray ``print`` (ours, a library's, a child process's) cannot corrupt the stream.
stdin EOF ends the process with code 0 after every session was stopped and its file flushed.
"""

from __future__ import annotations

import asyncio
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
    from .transport import StdioTransport

    if args.faux_script:  # refuse a bad script at start-up, as the other modes do
        from pisces.ai.providers import faux

        try:
            faux.SCRIPT.load_file(args.faux_script)
        except ValueError as exc:
            sys.stderr.write(f"pisces: {exc}\n")
            return 1
    watch = ResponseWatch()
    agent = PiscesAgent(args, watch)
    transport = StdioTransport(out_fd)
    conn = AgentSideConnection(agent, transport, listening=False, use_unstable_protocol=True,
                               observers=[watch.observe])
    try:
        await conn.listen()
    finally:
        await agent.shutdown()
        await conn.close()
    return 0


def run_acp(args: Any) -> int:
    out_fd = _take_stdout()
    try:
        code = asyncio.run(_serve(args, out_fd))
    except KeyboardInterrupt:
        code = 130
    except Exception:  # noqa: BLE001 - a bug: report it, then still leave through os._exit below
        import traceback

        traceback.print_exc()
        code = 1
    sys.stderr.flush()
    os._exit(code)  # the stdin reader thread may still sit in a blocking read
