"""Helpers shared by the tool tests."""

import os
import signal

from pisces.ai.types import TextContent


def text_of(result) -> str:
    return "".join(c.text for c in result.content if isinstance(c, TextContent))


def live_group_members(pgid: int) -> list[int]:
    """Pids (not zombies) whose process group is ``pgid``."""
    members = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        state, pgrp = fields[0], int(fields[2])
        if pgrp == pgid and state != "Z":
            members.append(int(entry))
    return members


def kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except OSError:
        pass
