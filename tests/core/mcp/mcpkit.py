"""What the MCP tests share: the path of the SDK-built test servers, and a bounded wait for a condition."""

from __future__ import annotations

import asyncio
import os
from typing import Callable

SERVERS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "servers.py")


async def until(pred: Callable[[], object], timeout: float = 120.0) -> bool:
    """Poll ``pred`` every 50 ms until it is true or ``timeout`` seconds passed (a bound on a hang, not a
    timing assertion); its last value decides."""
    for _ in range(int(timeout * 20)):
        if pred():
            return True
        await asyncio.sleep(0.05)
    return bool(pred())
