"""Entry point of ``pisces --mode rpc``."""

from __future__ import annotations

import asyncio
import gc
import os
import sys
from typing import Any

from pisces.modes.rpc.output import FrameWriter


async def _serve(args: Any, writer: FrameWriter) -> int:
    from pisces.core.sdk import SessionConfigError, open_session_from_args
    from pisces.modes.rpc.server import RpcServer

    try:
        session = await open_session_from_args(args)
    except SessionConfigError as exc:
        sys.stderr.write(f"pisces: {exc}\n")
        return exc.exit_code
    writer.profile = getattr(args, "stream_profile", None) or writer.profile
    web = host = None
    if getattr(args, "web", False):  # browsers on the same live session (pisces.modes.web)
        from pisces.modes.host import Host
        from pisces.modes.web.main import host_options, start_web

        host = Host(session, resumable=True, **host_options(session))
        try:
            web = await start_web(host, args, announce=lambda text: sys.stderr.write(f"pisces web: {text}\n"))
        except OSError as exc:
            sys.stderr.write(f"pisces: cannot listen on {args.host or '127.0.0.1'}:{args.port or 0}: "
                             f"{exc.strerror or exc}\n")
            return 1
    from pisces.modes import signals

    server = RpcServer(session, writer, host)
    remove = signals.install(asyncio.get_running_loop(), server.terminate)
    # Start-up is over (the CLI paused the collector for it): what it built lives as long as the process,
    # so the collector never needs to look at it again.
    gc.freeze()
    gc.enable()
    try:
        code = await server.serve(ready=not args.no_ready)
    finally:
        remove()
        if web is not None:
            await web.close()
    return signals.exit_code(server.exit_signal) if server.exit_signal else code


def run_rpc(args: Any) -> int:
    writer = FrameWriter.take_stdout()
    try:
        code = asyncio.run(_serve(args, writer))
    except KeyboardInterrupt:
        code = 130
    except Exception:  # noqa: BLE001 - a bug: report it, then still leave through os._exit below
        import traceback

        traceback.print_exc()
        code = 1
    from pisces.modes.signals import kill_tool_processes

    kill_tool_processes()  # whatever the shutdown could not stop in time (no-op when nothing runs)
    sys.stderr.flush()
    # Leave at once: the stdin reader thread may still sit in a blocking read, and work in flight was
    # already aborted and flushed by the server's shutdown.
    os._exit(code)
