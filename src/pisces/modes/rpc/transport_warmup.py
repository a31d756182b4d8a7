"""When the RPC server loads the HTTP transport a direct request needs (``providers.prepare_transport``: httpx2,
a client and then its TLS context, some 100-150 ms of interpreter time on a thread).

A prompt sent right after start-up wants it loaded as early as possible; any other command wants the
interpreter to itself (a thread importing modules holds the interpreter about half the time while both run:
an ``export_html`` sent right after ``get_state`` took twice as long). So a command that leads to a model
request (a prompt, steer, follow-up or compaction) starts the thread at once, before that command runs, and
no other command does: while commands come without a pause, nothing else is loaded; once the server has
been idle for ``WARM_UP_IDLE_S`` (``pisces.modes.rpc.server``), its idle warm-up (``providers.prepare``)
loads the transport anyway. Once a process.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from pisces.ai.providers import DIRECT_APIS, prepare_transport

MODEL_COMMANDS = frozenset({"prompt", "steer", "follow_up", "compact"})


class TransportWarmUp:
    """``on_command`` for each command line, before it is dispatched; ``api`` gives the current model's API and
    ``base_url`` its base URL (a plain-http server gets no TLS context built)."""

    def __init__(self, api: Callable[[], str], base_url: Callable[[], str | None] = lambda: None) -> None:
        self._api = api
        self._base_url = base_url
        self.started = False

    def on_command(self, cmd: Any) -> None:
        """Before ``cmd`` (a command line's decoded object) is dispatched: start the thread for a model
        command (when the current model's API goes without its SDK)."""
        if self.started or not (isinstance(cmd, dict) and cmd.get("type") in MODEL_COMMANDS):
            return
        self.started = True
        api = self._api()
        if api in DIRECT_APIS:
            threading.Thread(target=prepare_transport, args=(api, self._base_url()), name="transport-warm-up",
                             daemon=True).start()


__all__ = ["TransportWarmUp", "MODEL_COMMANDS"]
