"""The live processes, read from /proc: for tests that check what a run left behind."""

from __future__ import annotations

import os
from typing import NamedTuple


class ProcInfo(NamedTuple):
    comm: str
    ppid: int
    pgid: int
    sid: int


def _info(pid: int) -> ProcInfo | None:
    """A live process's stat line; None when it is gone or a zombie."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read().decode("utf-8", "replace")
    except OSError:
        return None
    close = data.rindex(")")
    fields = data[close + 2:].split()
    if fields[0] in ("Z", "X"):
        return None
    return ProcInfo(data[data.index("(") + 1:close], int(fields[1]), int(fields[2]), int(fields[3]))


def live_processes() -> dict[int, ProcInfo]:
    out: dict[int, ProcInfo] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            info = _info(int(name))
            if info is not None:
                out[int(name)] = info
    return out


def in_groups(pgids: set[int]) -> list[int]:
    """Pids of the live processes in these process groups."""
    return [p for p, info in live_processes().items() if info.pgid in pgids]


def children_of(pid: int) -> list[int]:
    return [p for p, info in live_processes().items() if info.ppid == pid]


def descendants(pid: int) -> list[int]:
    """Pids of the live descendants of ``pid``."""
    procs = live_processes()
    found: list[int] = []
    frontier = [pid]
    while frontier:
        parent = frontier.pop()
        for p, info in procs.items():
            if info.ppid == parent and p not in found:
                found.append(p)
                frontier.append(p)
    return found
