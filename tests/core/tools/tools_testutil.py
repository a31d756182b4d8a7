"""Helpers shared by the tool tests."""

import os
import signal

from pisces.ai.types import TextContent
from proc_table import in_groups


def text_of(result) -> str:
    return "".join(c.text for c in result.content if isinstance(c, TextContent))


def live_group_members(pgid: int) -> list[int]:
    """Pids (not zombies) whose process group is ``pgid``."""
    return in_groups({pgid})


def kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except OSError:
        pass
