"""The TUI's navigation and session commands: ``/tree``, ``/clone``, ``/settings``, ``/approval``, ``/trust``,
``/model`` (a searchable selector) and ``/redraw``. Each is one or more commands of the host's table
(``get_tree``/``navigate_tree``/``set_entry_label``, ``clone``, ``get_state`` and the setters,
``set_approval_mode``, ``trust_project``, ``get_available_models``/``set_model``, ``get_messages``): the TUI
stays a client of the host.
"""

from __future__ import annotations

import asyncio
from typing import Any

NAV_COMMANDS = {
    "/tree": "navigate the session tree (fold, search, filters, labels, summarize)",
    "/clone": "copy this session to a new file and continue there",
    "/settings": "show and change the main settings",
    "/approval": "show or set the approval mode (/approval yolo|write|always-ask|default)",
    "/trust": "show the project's trust, trust or untrust it",
    "/redraw": "clear the screen and scrollback and write the whole transcript again",
}
APPROVAL_MODES = {
    "always-ask": "always-ask: ask before edits, writes and commands",
    "write": "write: edits and writes run, commands ask",
    "yolo": "yolo: everything runs (known-dangerous commands still ask)",
    "default": "default: the mode of the settings, the CLI or the front end",
}


async def _ask(app: Any, cmd: dict[str, Any]) -> Any:
    resp = await app.client.request(cmd)
    if not resp.get("success"):
        raise RuntimeError(resp.get("error", "failed"))
    return resp.get("data") or {}


def _later(app: Any, text: str) -> None:
    asyncio.ensure_future(app.command(text))


async def run_nav_command(app: Any, name: str, rest: str) -> bool:
    """Run ``name`` if it is one of these commands; False when it is not."""
    t = app.transcript
    if name == "/tree":
        from pisces.modes.tui.tree_dialog import open_tree  # noqa: PLC0415 - loaded on first use

        if app.busy:
            t.note("/tree: wait for the reply to end (or Esc to abort it)", 33)
        else:
            await open_tree(app)
    elif name == "/clone":
        data = await _ask(app, {"type": "clone"})
        if data.get("cancelled"):
            t.note("/clone was cancelled (by an extension)", 33)
        else:
            state = await _ask(app, {"type": "get_state"})
            t.note(f"cloned: you continue in {state.get('sessionFile') or 'a new session (in memory)'}", 2)
            await app.refresh_state()
    elif name == "/settings":
        from pisces.modes.tui.settings_dialog import open_settings  # noqa: PLC0415 - loaded on first use

        await open_settings(app)
    elif name == "/approval":
        await _approval(app, rest)
    elif name == "/trust":
        await _trust(app, rest)
    elif name == "/model" and not rest:
        await _models(app)
    elif name == "/redraw":
        from pisces.modes.tui.history import rebuild  # noqa: PLC0415 - loaded on first use

        if app.busy:
            t.note("/redraw: wait for the reply to end", 33)
        else:
            count = await rebuild(app, clear=True)
            t.note(f"redrawn from the session's {count} messages", 2)
    else:
        return False
    return True


async def _models(app: Any) -> None:
    from pisces.modes.tui.views import SearchSelect  # noqa: PLC0415 - loaded on first use

    models = (await _ask(app, {"type": "get_available_models"})).get("models", [])
    names = [f"{m.get('provider')}/{m.get('id')}" for m in models]
    if not names:
        app.transcript.note("no models are available (no credentials?)", 33)
        return
    cur = (app.state.get("model") or {})
    SearchSelect(app, "model", names, lambda choice: _later(app, f"/model {choice}"),
                 current=f"{cur.get('provider')}/{cur.get('id')}" if cur else None).open()


async def _approval(app: Any, rest: str) -> None:
    if rest:
        mode = rest.split()[0]
        if mode not in APPROVAL_MODES:
            raise RuntimeError(f"unknown mode {mode!r}: use {', '.join(APPROVAL_MODES)}")
        data = await _ask(app, {"type": "set_approval_mode", "mode": None if mode == "default" else mode})
        app.transcript.note(f"approval mode: {data.get('mode')} ({data.get('modeSource')}), for this session", 2)
        await app.refresh_state()
        return
    state = await _ask(app, {"type": "get_state"})
    approval = state.get("approval")
    if not approval:
        app.transcript.note("tool approval is not available in this session", 33)
        return
    choices = {label: mode for mode, label in APPROVAL_MODES.items()}
    app.pick_command(f"approval mode (now {approval.get('mode')}, from {approval.get('modeSource')})", choices,
                     "/approval")


async def _trust(app: Any, rest: str) -> None:
    t = app.transcript
    if rest in ("yes", "no"):
        data = await _ask(app, {"type": "trust_project", "trusted": rest == "yes"})
        t.note(f"project {'trusted' if data.get('trusted') else 'not trusted'} (saved in {data.get('path')})"
               + ("; restart pisces to apply the project's settings" if data.get("restartRequired") else ""), 2)
        await app.refresh_state()
        return
    state = await _ask(app, {"type": "get_state"})
    trusted = bool(state.get("projectTrusted"))
    ignored = state.get("ignoredProjectSettings") or []
    t.note(f"this project is {'trusted' if trusted else 'not trusted'}"
           + (f"; ignored project settings: {', '.join(map(str, ignored))}" if ignored else ""), 2)
    choices = {"Trust this project": "yes", "Do not trust this project": "no"}
    app.pick_command(f"project trust (now: {'trusted' if trusted else 'not trusted'})", choices, "/trust")
