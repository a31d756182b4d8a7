"""SIGINT, SIGTERM and SIGHUP end pisces as cleanly as stdin EOF does, in every mode.

Supervisors, IDEs and ``docker stop`` send SIGTERM; a closed terminal sends SIGHUP. Their default action kills
the process on the spot, leaving the agent's tool processes (each in its own process group) running and a
frame possibly half written; SIGINT's KeyboardInterrupt cancelled the tasks without recording the aborted
reply. With :func:`install` all three reach the mode's ``on_signal`` on the event loop, between two frames:
the mode aborts the work in flight (which kills the tool processes and records what was aborted), closes the
session, and exits with ``128 + signal`` (130, 143, 129), as a shell reports a process ended by that signal.
A second signal while that runs kills the tool processes and exits at once. A signal the process was started
ignoring (``nohup`` ignores SIGHUP) stays ignored.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from typing import Callable

TERMINATING = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def exit_code(signum: int) -> int:
    return 128 + signum


def kill_tool_processes() -> None:
    """Kill every command the agent still runs (the last step before leaving). Free when no command ever ran:
    the registry lives in ``pisces.core.tools.bash_exec``, which is not imported until one does."""
    bash_exec = sys.modules.get("pisces.core.tools.bash_exec")
    if bash_exec is not None:
        bash_exec.kill_running_process_groups()
    mcp_manager = sys.modules.get("pisces.core.mcp.manager")  # MCP servers, when any was started
    if mcp_manager is not None:
        mcp_manager.kill_all()


def install(loop: asyncio.AbstractEventLoop, on_signal: Callable[[int], None]) -> Callable[[], None]:
    """Route SIGINT, SIGTERM and SIGHUP to ``on_signal(signum)`` on ``loop``; returns a function that removes
    them (SIGINT then raises KeyboardInterrupt again)."""
    first: list[int] = []

    def handle(signum: int) -> None:
        if first:  # asked twice: stop waiting for a clean shutdown
            kill_tool_processes()
            os._exit(exit_code(first[0]))
        first.append(signum)
        on_signal(signum)

    installed: list[int] = []
    for sig in TERMINATING:
        if signal.getsignal(sig) is signal.SIG_IGN:  # e.g. started under nohup: the user asked to ignore it
            continue
        try:
            loop.add_signal_handler(sig, handle, sig)
            installed.append(sig)
        except (NotImplementedError, RuntimeError, ValueError):  # no signals here (another thread, Windows)
            pass

    def remove() -> None:
        for sig in installed:
            try:
                loop.remove_signal_handler(sig)
            except (RuntimeError, ValueError):
                pass

    return remove
