"""The slash commands of the TUI, each a command of the host's table (no second dispatcher)."""

from __future__ import annotations

import base64
from typing import Any


async def run_command(app: Any, text: str) -> None:
    name, _, rest = text.strip().partition(" ")
    rest = rest.strip()
    c, t = app.client, app.transcript

    async def ask(cmd: dict[str, Any]) -> Any:
        resp = await c.request(cmd)
        if not resp.get("success"):
            raise RuntimeError(resp.get("error", "failed"))
        return resp.get("data")

    if name == "/quit":
        app.done.set()
    elif name == "/hotkeys":
        from pisces.modes.tui.app import HOTKEYS  # noqa: PLC0415 - already loaded

        for key, what in HOTKEYS:
            t.note(f"{key:22} {what}")
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

            def chosen(choice: str) -> None:
                import asyncio  # noqa: PLC0415 - already loaded

                asyncio.ensure_future(app.command(f"/model {choice}"))
            app.pick("model", names, chosen)
            return
        await app.refresh_state()
    elif name == "/thinking":
        await ask({"type": "set_thinking_level", "level": rest or "medium"})
        await app.refresh_state()
    elif name == "/compact":
        await ask({"type": "compact", **({"customInstructions": rest} if rest else {})})
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
    elif name == "/reload":
        await ask({"type": "reload_resources"})
        t.note("reloaded", 2)
