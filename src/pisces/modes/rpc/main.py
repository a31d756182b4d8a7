"""Entry point of ``pisces --mode rpc``."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from pisces.modes import signals
from pisces.modes.entry import open_session_or_report, run_and_exit, start_up_done
from pisces.modes.rpc.output import FrameWriter
from pisces.modes.rpc.server import RpcServer


async def _serve(args: Any, writer: FrameWriter) -> int:
    session = await open_session_or_report(args)
    if isinstance(session, int):
        return session
    writer.profile = getattr(args, "stream_profile", None) or writer.profile
    web = host = None
    if getattr(args, "web", False):  # browsers on the same live session (pisces.modes.web)
        from pisces.modes.web.main import new_host, start_web  # noqa: PLC0415 - not needed at start-up

        host = new_host(session)
        writer.start_thread()  # beside browsers, a stdio peer that stops reading must not hold up the loop
        web = await start_web(host, args, announce=lambda text: sys.stderr.write(f"pisces web: {text}\n"))
        if web is None:
            return 1

    server = RpcServer(session, writer, host)
    remove = signals.install(asyncio.get_running_loop(), server.terminate)
    start_up_done()
    try:
        code = await server.serve(ready=not args.no_ready)
    finally:
        remove()
        if web is not None:
            await web.close()
            # what is queued for stdout still goes out (the peer may be reading slowly), within a bound
            await asyncio.to_thread(writer.flush, 10.0)
    return signals.exit_code(server.exit_signal) if server.exit_signal else code


def run_rpc(args: Any) -> int:
    writer = FrameWriter.take_stdout()
    run_and_exit(lambda: _serve(args, writer))
