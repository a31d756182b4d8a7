"""``/settings``: the main settings with their values as the host reports them (``get_state``), and the ones
the host has a command for changed here: auto-compaction (``set_auto_compaction``), auto-retry
(``set_auto_retry``), steering and follow-up mode (``set_steering_mode``/``set_follow_up_mode``), the thinking
level (``set_thinking_level`` over ``get_available_thinking_levels``). The approval mode, the project's trust
and the model open their own dialogs (``/approval``, ``/trust``, ``/model``). Rows without a command are shown,
not changed.

Each change is a host command whose answer is awaited; the values shown are then read again from
``get_state``, so the dialog never shows a value the session does not have.
"""

from __future__ import annotations

import asyncio
from typing import Any

from pisces.modes.tui.render import style
from pisces.modes.tui.views import View, list_rows

MODES = ("all", "one-at-a-time")


def _on(value: Any) -> str:
    return "on" if value else "off"


class SettingsDialog(View):
    title = "settings"

    def __init__(self, app: Any, state: dict[str, Any], levels: list[str]) -> None:
        super().__init__(app)
        self.state = state
        self.levels = levels or ["off"]
        self.index = 0

    def items(self) -> list[tuple[str, str, str | None]]:
        """(name, value, what Enter does: an action key or None)."""
        s = self.state
        model = s.get("model") or {}
        approval = s.get("approval") or {}
        sandbox = s.get("sandbox") or {}
        budget = s.get("budget")
        rows: list[tuple[str, str, str | None]] = [
            ("auto-compaction", _on(s.get("autoCompactionEnabled")), "compaction"),
            ("auto-retry", _on(s.get("autoRetryEnabled")), "retry"),
            ("steering mode", str(s.get("steeringMode")), "steering"),
            ("follow-up mode", str(s.get("followUpMode")), "followup"),
            ("thinking level", str(s.get("thinkingLevel")), "thinking"),
            ("model", f"{model.get('provider')}/{model.get('id')}" if model else "(none)", "/model"),
            ("approval mode", f"{approval.get('mode')} ({approval.get('modeSource')})" if approval
             else "(not available)", "/approval" if approval else None),
            ("project trusted", "yes" if s.get("projectTrusted") else "no", "/trust"),
            ("sandbox", str(sandbox.get("mode", sandbox.get("enabled", "off"))) if sandbox else "off", None),
            ("budget", "set" if budget else "none", None),
            ("session file", str(s.get("sessionFile") or "(in memory)"), None),
        ]
        return rows

    def rows(self, width: int) -> list[str]:
        items = self.items()
        self.index = min(self.index, len(items) - 1)
        labels = [f"{name:16} {value}" + ("" if act else style("  (shown only)", 2)) for name, value, act in items]
        return [style("┌ settings", 1, 35), *list_rows(labels, self.index, len(labels)),
                style("└ ↑/↓ choose · Enter/Space change · Esc close", 2)]

    def key(self, name: str, data: str) -> None:
        items = self.items()
        if name == "escape":
            self.close()
        elif name in ("up", "down"):
            self.index = (self.index + (1 if name == "down" else -1)) % len(items)
        elif name == "enter" or data == " ":
            action = items[self.index][2]
            if action is None:
                self.app.hint = f"{items[self.index][0]} has no command to change it here"
            elif action.startswith("/"):
                self.close()
                asyncio.ensure_future(self.app.command(action))
            else:
                self.run(self._change(action))

    async def _change(self, action: str) -> None:
        s = self.state
        if action == "compaction":
            await self.ask({"type": "set_auto_compaction", "enabled": not s.get("autoCompactionEnabled")})
        elif action == "retry":
            await self.ask({"type": "set_auto_retry", "enabled": not s.get("autoRetryEnabled")})
        elif action in ("steering", "followup"):
            key = "steeringMode" if action == "steering" else "followUpMode"
            mode = MODES[(MODES.index(s.get(key)) + 1) % 2] if s.get(key) in MODES else MODES[0]
            await self.ask({"type": "set_steering_mode" if action == "steering" else "set_follow_up_mode",
                            "mode": mode})
        elif action == "thinking":
            level = s.get("thinkingLevel")
            nxt = self.levels[(self.levels.index(level) + 1) % len(self.levels)] if level in self.levels \
                else self.levels[0]
            await self.ask({"type": "set_thinking_level", "level": nxt})
        self.state = await self.ask({"type": "get_state"})
        await self.app.refresh_state()


async def open_settings(app: Any) -> None:
    view = View(app)
    state = await view.ask({"type": "get_state"})
    levels = (await view.ask({"type": "get_available_thinking_levels"})).get("levels") or []
    SettingsDialog(app, state, list(levels)).open()
