"""When the RPC server loads the HTTP transport a direct request needs (``providers.prepare_transport``: httpx2
and a TLS client, some 100-150 ms of interpreter time on a thread).

A prompt sent right after start-up wants it loaded as early as possible; any other command wants the
interpreter to itself (a thread importing modules holds the interpreter about half the time while both run:
an ``export_html`` sent right after ``get_state`` took half as long again). So the thread starts at once for
a command that leads to a model request (a prompt, steer, follow-up or compaction), before that command
runs, and otherwise only once the server has been idle for ``IDLE_S``: no line read and no command in
flight; a stream of commands postpones it for at most ``MAX_DELAY_S``. Once a process.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

from pisces.ai.providers import DIRECT_APIS, prepare_transport

MODEL_COMMANDS = frozenset({"prompt", "steer", "follow_up", "compact"})
IDLE_S = 0.01  # no line and no command in flight for this long: the server is idle
MAX_DELAY_S = 1.0  # a steady stream of commands postpones the warm-up for no longer than this


class TransportWarmUp:
    """``on_command`` for each command line, before it is dispatched; ``api`` gives the current model's API and
    ``busy`` whether a command is still in flight."""

    def __init__(self, api: Callable[[], str], busy: Callable[[], bool]) -> None:
        self._api = api
        self._busy = busy
        self.started = False
        self._timer: asyncio.TimerHandle | None = None
        self._first = 0.0

    def on_command(self, loop: asyncio.AbstractEventLoop, cmd: Any) -> None:
        """Before ``cmd`` (a command line's decoded object) is dispatched."""
        if self.started:
            return
        if isinstance(cmd, dict) and cmd.get("type") in MODEL_COMMANDS:
            self.start()
            return
        now = loop.time()
        if self._timer is None:
            self._first = now
        elif now - self._first >= MAX_DELAY_S:
            return  # let the pending timer fire
        else:
            self._timer.cancel()
        self._timer = loop.call_later(IDLE_S, self._idle, loop)

    def _idle(self, loop: asyncio.AbstractEventLoop) -> None:
        self._timer = None
        if self.started:
            return
        if self._busy() and loop.time() - self._first < MAX_DELAY_S:
            self._timer = loop.call_later(IDLE_S, self._idle, loop)
            return
        self.start()

    def start(self) -> None:
        """Start the thread now (when the current model's API goes without its SDK)."""
        if self.started:
            return
        self.started = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        api = self._api()
        if api in DIRECT_APIS:
            threading.Thread(target=prepare_transport, args=(api,), name="transport-warm-up", daemon=True).start()


__all__ = ["TransportWarmUp", "MODEL_COMMANDS", "IDLE_S", "MAX_DELAY_S"]
