"""``pisces --resume``: pick one of this directory's sessions from a numbered list.

pi opens a full-screen picker; pisces has no terminal UI, so it prints the sessions (newest first) on stderr
and reads a number from the terminal: stdin when that is a terminal, else ``/dev/tty`` (RPC mode keeps stdin
for the protocol). An empty answer, ``q``, end of input or no answer within PICK_TIMEOUT_S picks nothing.
"""

from __future__ import annotations

import os
import select
import sys
from typing import Any, TextIO

from pisces.core.config.paths import agent_dir
from pisces.core.config.settings import Settings
from pisces.core.store import list_sessions, resolve_session_dir

PICK_TIMEOUT_S = 300.0  # nobody waits forever: no answer in five minutes picks nothing
SHOWN = 20


def describe(info: Any) -> str:
    name = getattr(info, "name", None)
    title = name if isinstance(name, str) and name else (info.firstMessage or "(no messages)")
    title = " ".join(title.split())
    if len(title) > 60:
        title = title[:57] + "..."
    return f"{info.modified[:16].replace('T', ' ')}  {info.messageCount:>4} msgs  {title}"


def choose(sessions: list[Any], inp: TextIO, out: TextIO, timeout_s: float = PICK_TIMEOUT_S) -> Any | None:
    """Show ``sessions`` on ``out`` and read a choice from ``inp``; the chosen session or None."""
    shown = sessions[:SHOWN]
    for i, info in enumerate(shown, 1):
        out.write(f"{i:>3}. {describe(info)}\n")
    if len(sessions) > SHOWN:
        out.write(f"     ... {len(sessions) - SHOWN} older sessions: open one with --session <id>\n")
    while True:
        out.write(f"Session to resume (1-{len(shown)}, Enter to cancel): ")
        out.flush()
        line = _read_line(inp, timeout_s)
        if line is None or line.strip().lower() in ("", "q", "quit"):
            out.write("\n" if line is None else "")
            return None
        answer = line.strip()
        if answer.isdigit() and 1 <= int(answer) <= len(shown):
            return shown[int(answer) - 1]
        out.write(f"Not a number from 1 to {len(shown)}: {answer}\n")


def _read_line(inp: TextIO, timeout_s: float) -> str | None:
    try:
        ready, _, _ = select.select([inp], [], [], timeout_s)
    except (OSError, ValueError):  # not selectable: read without a time limit
        ready = [inp]
    if not ready:
        return None
    line = inp.readline()
    return line if line else None


def pick_session(args: Any) -> str | int | None:
    """The chosen session file, None when nothing was chosen (exit 0, as pi), or an exit code on error."""

    cwd = os.getcwd()
    directory = resolve_session_dir(cwd, args.session_dir, Settings(agent_dir(), cwd).session_dir)
    sessions = list_sessions(directory)
    if not sessions:
        sys.stderr.write(f"pisces: no sessions to resume in {directory}\n")
        return None
    inp: TextIO | None = None
    close = False
    try:
        if sys.stdin is not None and sys.stdin.isatty():
            inp = sys.stdin
        else:
            inp = open("/dev/tty", encoding="utf-8", errors="replace")
            close = True
    except OSError:
        sys.stderr.write("pisces: --resume needs a terminal to pick a session; use --session <path|id> or "
                         "-c/--continue instead\n")
        return 2
    try:
        chosen = choose(sessions, inp, sys.stderr)
    finally:
        if close:
            inp.close()
    if chosen is None:
        sys.stderr.write("No session selected\n")
        return None
    return chosen.path
