"""The TUI's idle warm-up: what the first prompt would load, loaded while the person is still typing it.

Guarantees: it runs once, WARM_S after the editor is first drawn, and only if no reply has started by then
(a prompt sent straight away loads what it needs itself, and a warm-up beside a stream would take the
interpreter from it). On one short-lived thread, for the APIs whose requests go without their SDK
(``providers.direct``): the provider module and the HTTP client, with its TLS trust store when the model's
server is https, as the RPC server's idle warm-up loads them (``providers.prepare``; no SDK is imported: an
SDK import holds the interpreter for hundreds of milliseconds, which the keys being typed would feel); the
modules the first prompt imports; the code highlighter the first code fence needs. On the loop: the system
prompt. No timer is left behind: idle stays at zero wake-ups.
"""

from __future__ import annotations

import asyncio
import importlib
import threading
from typing import Any, Callable

WARM_S = 0.3
FIRST_PROMPT_MODULES = ("pisces.core.session.compactor", "pisces.core.session.prompt_input",
                        "pisces.core.session.image_urls", "pisces.core.planning.rules",
                        "pisces.modes.tui.highlight")


def schedule(session: Any, busy: Callable[[], bool]) -> asyncio.TimerHandle:
    """Arm the warm-up; ``busy`` says whether a reply runs (then it does nothing)."""
    loop = asyncio.get_running_loop()
    return loop.call_later(WARM_S, _warm, session, busy)


def _warm(session: Any, busy: Callable[[], bool]) -> None:
    if busy():
        return
    model = getattr(session, "model", None)
    api = str(getattr(model, "api", "") or "")
    threading.Thread(target=_load, args=(api, getattr(model, "baseUrl", None)), name="tui-warm-up",
                     daemon=True).start()
    try:
        session.prepare_first_prompt()
    except Exception:  # noqa: BLE001 - the prompt builds it again and reports a real failure
        pass


def _load(api: str, base_url: str | None = None) -> None:
    from pisces.ai.providers import DIRECT_APIS, prepare  # noqa: PLC0415 - the warm-up

    if api in DIRECT_APIS:  # the RPC server's idle warm-up, which imports no SDK for these APIs
        try:
            prepare(api, base_url)
        except Exception:  # noqa: BLE001 - the request reports a real failure
            pass
    for name in FIRST_PROMPT_MODULES:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - imported again where used, which reports a real failure
            pass
    try:
        from pisces.modes.tui.highlight import lexer_for  # noqa: PLC0415 - the warm-up

        lexer_for("python")  # Pygments' lexer table, loaded by the first fence otherwise
    except Exception:  # noqa: BLE001 - the first fence loads it and shows a plain fence on failure
        pass
