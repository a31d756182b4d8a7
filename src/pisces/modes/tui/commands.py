"""The slash commands of the TUI, each a command of the host's table (no second dispatcher)."""

from __future__ import annotations

import base64
from typing import Any


async def replay_session(app: Any) -> None:
    from pisces.modes.tui.main import replay_message  # noqa: PLC0415 - already loaded

    resp = await app.client.request({"type": "get_messages"})
    for m in ((resp.get("data") or {}).get("messages") or [])[-40:]:
        replay_message(app, m)


async def run_command(app: Any, text: str) -> None:
    name, _, rest = text.strip().partition(" ")
    rest = rest.strip()
    c, t = app.client, app.transcript
    from pisces.modes.tui.nav_commands import run_nav_command  # noqa: PLC0415 - loaded with this module

    if await run_nav_command(app, name, rest):  # /tree, /clone, /settings, /approval, /trust, /model, /redraw
        return

    async def ask(cmd: dict[str, Any]) -> Any:
        resp = await c.request(cmd)
        if not resp.get("success"):
            raise RuntimeError(resp.get("error", "failed"))
        return resp.get("data")

    if name in ("/login", "/logout"):  # subscription logins (pisces.modes.tui.login)
        from pisces.modes.tui.login import run  # noqa: PLC0415 - loaded on /login only

        await run(app, name, rest)
    elif name == "/quit":
        app.done.set()
    elif name == "/mcp":
        app.mcp.load(await ask({"type": "mcp_status"}))
        for row in app.mcp.rows(app.renderer.width):
            t.note(row)
    elif name == "/hotkeys":
        for action, keys in app.keymap.bindings.items():
            t.note(f"{action:20} {', '.join(keys)}")
        t.note("keybindings.json in the agent dir rebinds them (pi's action ids and key names)", 2)
    elif name == "/new":
        await ask({"type": "new_session"})
        t.note("new session", 2)
    elif name == "/model":
        if rest:
            provider, _, model_id = rest.rpartition("/")
            data = await ask({"type": "set_model", "provider": provider or None, "modelId": model_id})
            t.note(f"model: {data.get('provider')}/{data.get('id')}", 2)
        else:
            models = (await ask({"type": "get_available_models"})).get("models", [])
            names = [f"{m.get('provider')}/{m.get('id')}" for m in models]
            app.pick_command("model", {n: n for n in names}, "/model")
            return
        await app.refresh_state()
    elif name == "/thinking":
        await ask({"type": "set_thinking_level", "level": rest or "medium"})
        await app.refresh_state()
    elif name == "/thinking-cycle":
        data = await ask({"type": "cycle_thinking_level"})
        app.hint = f"thinking: {(data or {}).get('level', 'off')}"
        await app.refresh_state()
    elif name == "/compact":
        await ask({"type": "compact", **({"customInstructions": rest} if rest else {})})
    elif name == "/plan":  # plan mode (docs/planning.md): /plan switches it, /plan on|off sets it
        if rest not in ("", "on", "off"):
            raise RuntimeError("use /plan, /plan on or /plan off")
        current = ((await ask({"type": "get_state"})) or {}).get("planMode") or {}
        enabled = rest == "on" if rest else not current.get("enabled")
        plan = (await ask({"type": "set_plan_mode", "enabled": enabled}))["planMode"]
        t.note(f"plan mode on: only reads and {plan.get('planFile')} until you approve the plan" if plan["enabled"]
               else "plan mode off", 2)
        await app.refresh_state()
    elif name == "/name":
        await ask({"type": "set_session_name", "name": rest})
        await app.refresh_state()
    elif name == "/session":
        data = await ask({"type": "get_session_stats"})
        for k, v in (data or {}).items():
            t.note(f"{k}: {v}", 2)
    elif name == "/export":
        data = await ask({"type": "export_html", **({"outputPath": rest} if rest else {})})
        t.note(f"exported: {data.get('path')}", 2)
    elif name == "/copy":
        data = await ask({"type": "get_last_assistant_text"})
        text = (data or {}).get("text") or ""
        app._write("\x1b]52;c;" + base64.b64encode(text.encode()).decode() + "\x07")
        t.note(f"copied {len(text)} characters", 2)
    elif name == "/resume":
        sessions = (await ask({"type": "list_sessions", "includeSearchText": False})).get("sessions", [])
        labels = {f"{str(x.get('modified', ''))[:16]}  {str(x.get('name') or x.get('firstMessage', ''))[:60]}"
                  f"  ({x.get('messageCount')})": x["path"] for x in sessions}
        if not labels:
            t.note("no other sessions in this directory", 2)
            return
        app.pick_command("resume a session", labels, "/switch-to")
    elif name == "/switch-to":  # what /resume's selector runs
        data = await ask({"type": "switch_session", "sessionPath": rest})
        if not (data or {}).get("cancelled"):
            t.note(f"resumed {rest}", 2)
            await replay_session(app)
        await app.refresh_state()
    elif name == "/fork":
        messages = (await ask({"type": "get_fork_messages"})).get("messages", [])
        labels = {f"{i + 1}. {str(m.get('text', '')).splitlines()[0][:70] if m.get('text') else ''}": m["entryId"]
                  for i, m in enumerate(messages)}
        if not labels:
            t.note("nothing to fork from yet", 2)
            return
        app.pick_command("fork from which message", labels, "/fork-at")
    elif name == "/fork-at":  # what /fork's selector runs
        data = await ask({"type": "fork", "entryId": rest})
        if not (data or {}).get("cancelled"):
            t.note("forked into a new session; the message is in the editor", 2)
            if not app.editor.text:
                app.editor.text = (data or {}).get("text", "")
                app.editor.cursor_position = len(app.editor.text)
        await app.refresh_state()
    elif name == "/sandbox":
        from pisces.modes.tui.sandbox_command import sandbox_command  # noqa: PLC0415 - loaded on first use

        await sandbox_command(ask, lambda text: t.note(text, 2), rest)
    elif name == "/reload":
        await ask({"type": "reload_resources"})
        t.note("reloaded", 2)
