"""The watchdog a stdio MCP server runs under (Linux): ``python -I -S guard.py PARENT_PID COMMAND ARGS...``.

It leads the server's process group (the transport starts it in a new session), starts the server as its child
(stdin, stdout and stderr inherited), asks the kernel for SIGTERM when pisces dies (``PR_SET_PDEATHSIG``: also
after ``kill -9`` of pisces, which runs no clean-up of its own) and then SIGKILLs the whole group, so that a
server's own children (``npx`` -> ``node``) go too. It exits with the server's status. Stdlib only, imports
nothing of pisces (it runs with ``-I -S`` for a fast start).
"""

from __future__ import annotations

import os
import signal
import sys

PR_SET_PDEATHSIG = 1


def _kill_group(*_: object) -> None:
    os.killpg(0, signal.SIGKILL)  # this guard included


def main(argv: list[str]) -> int:
    parent, command = int(argv[1]), argv[2:]
    signal.signal(signal.SIGTERM, _kill_group)
    signal.signal(signal.SIGHUP, _kill_group)
    try:
        import ctypes  # noqa: PLC0415 - only here, after the signal handlers

        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the parent check below still runs once
        pass
    if os.getppid() != parent:  # pisces died before the request took effect
        _kill_group()
    try:
        pid = os.fork()
    except OSError as exc:
        sys.stderr.write(f"mcp guard: cannot fork: {exc}\n")
        return 126
    if pid == 0:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGHUP, signal.SIG_DFL)
        try:
            os.execvp(command[0], command)
        except OSError as exc:
            sys.stderr.write(f"cannot run {command[0]}: {exc}\n")
            os._exit(127)
    # Only the server's output may reach pisces through stdout: the guard keeps no copy of the pipes.
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    while True:
        try:
            _, status = os.waitpid(pid, 0)
        except InterruptedError:
            continue
        except ChildProcessError:
            return 0
        return os.waitstatus_to_exitcode(status) & 0xFF if os.WIFEXITED(status) else 128 + os.WTERMSIG(status)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
