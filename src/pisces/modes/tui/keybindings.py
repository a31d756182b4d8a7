"""Keys to actions, with pi's action ids and key names, rebindable in ``<agent dir>/keybindings.json``
(``{"followUp": "alt+enter", "newLine": ["shift+enter", "ctrl+j"]}``: an action id to a key or a list of
keys; ``modifier+key`` with ``ctrl``, ``alt``, ``shift``; ``esc``/``return`` as synonyms).

A user's binding replaces that action's defaults. A bad file is reported once and the defaults are used.
"""

from __future__ import annotations

import json
import os
from typing import Any

DEFAULTS: dict[str, list[str]] = {
    "submit": ["enter"],
    "newLine": ["shift+enter", "ctrl+j"],  # most terminals send Shift+Enter as Enter: Ctrl+J is the fallback
    "followUp": ["alt+enter"],
    "interrupt": ["escape"],
    "clear": ["ctrl+c"],
    "exit": ["ctrl+d"],
    "suspend": ["ctrl+z"],
    "toggleThinking": ["ctrl+t"],
    "expandTools": ["ctrl+o"],
    "cycleThinkingLevel": ["shift+tab"],
    "selectModel": ["ctrl+l"],
    "dequeue": ["alt+up"],
    "cursorUp": ["up"],
    "cursorDown": ["down"],
    "cursorLeft": ["left", "ctrl+b"],
    "cursorRight": ["right", "ctrl+f"],
    "cursorWordLeft": ["alt+left", "ctrl+left", "alt+b"],
    "cursorWordRight": ["alt+right", "ctrl+right", "alt+f"],
    "cursorLineStart": ["home", "ctrl+a"],
    "cursorLineEnd": ["end", "ctrl+e"],
    "deleteCharBackward": ["backspace"],
    "deleteCharForward": ["delete"],
    "deleteWordBackward": ["ctrl+w", "alt+backspace"],
    "deleteToLineStart": ["ctrl+u"],
    "deleteToLineEnd": ["ctrl+k"],
    "deleteWordForward": ["alt+d", "alt+delete"],
    "yank": ["ctrl+y"],
    "yankPop": ["alt+y"],
    "undo": ["ctrl+-", "ctrl+_"],
    "tab": ["tab"],
}
_SYNONYMS = {"esc": "escape", "return": "enter", "pageup": "pageup", "pagedown": "pagedown"}
SHIFT_ENTER_SEQUENCES = ("\x1b[13;2u", "\x1b[27;2;13~")  # kitty keyboard protocol, xterm modifyOtherKeys
_PT_NAMES = {"c-m": "enter", "c-i": "tab", "c-h": "backspace", "s-tab": "shift+tab",
             "escape": "escape", "c-_": "ctrl+_", "c-j": "ctrl+j"}


def normalize(key: str) -> str:
    parts = [p for p in key.strip().lower().split("+") if p] or [key]
    *mods, base = parts
    base = _SYNONYMS.get(base, base)
    order = [m for m in ("ctrl", "alt", "shift") if m in mods]
    return "+".join([*order, base])


def key_id(key: Any, data: str, alt: bool = False) -> str:
    """pi's name for a prompt_toolkit key press (``alt`` when an Esc came just before it)."""
    value = getattr(key, "value", key)
    if data in SHIFT_ENTER_SEQUENCES:
        name = "shift+enter"
    elif value in _PT_NAMES:
        name = _PT_NAMES[value]
    elif isinstance(value, str) and value.startswith("c-s-"):
        name = "ctrl+shift+" + value[4:]
    elif isinstance(value, str) and value.startswith("c-") and len(value) > 2:
        name = "ctrl+" + value[2:]
    elif isinstance(value, str) and value.startswith("s-") and len(value) > 2:
        name = "shift+" + value[2:]
    else:
        name = str(value).lower() if len(str(value)) > 1 else str(value)
    return normalize(("alt+" if alt else "") + name)


# pi 0.73's namespaced ids (``tui.editor.yank``, ``app.model.select``) name the same actions as the older ids
_NAMESPACES = ("tui.editor.", "tui.input.", "app.")
_NAMESPACED = {"app.thinking.cycle": "cycleThinkingLevel", "app.model.select": "selectModel",
               "app.tools.expand": "expandTools", "app.thinking.toggle": "toggleThinking",
               "app.message.followUp": "followUp", "app.message.dequeue": "dequeue"}


def action_id(name: str) -> str:
    """The action a ``keybindings.json`` key names, in the older ids used here."""
    if name in _NAMESPACED:
        return _NAMESPACED[name]
    for prefix in _NAMESPACES:
        if name.startswith(prefix) and "." not in name[len(prefix):]:
            return name[len(prefix):]
    return name


class Keymap:
    def __init__(self, overrides: dict[str, Any] | None = None) -> None:
        self.bindings = {a: list(k) for a, k in DEFAULTS.items()}
        for action, keys in (overrides or {}).items():
            action = action_id(action)
            if isinstance(keys, str):
                keys = [keys]
            if isinstance(keys, list) and all(isinstance(k, str) for k in keys):
                self.bindings[action] = keys
        self.actions: dict[str, str] = {}
        for action, keys in self.bindings.items():
            for k in keys:
                self.actions.setdefault(normalize(k), action)

    def action(self, key: Any, data: str, alt: bool = False) -> str | None:
        return self.actions.get(key_id(key, data, alt))

    def keys_of(self, action: str) -> str:
        return ", ".join(self.bindings.get(action, [])) or "(unbound)"


def load_keymap(agent_dir: str) -> tuple[Keymap, str | None]:
    """The keymap from ``keybindings.json`` in ``agent_dir`` (defaults when absent), and a problem to show."""
    path = os.path.join(agent_dir, "keybindings.json")
    try:
        with open(path, encoding="utf-8") as f:
            data = json.loads(f.read(1 << 20))
    except FileNotFoundError:
        return Keymap(), None
    except (OSError, ValueError) as exc:
        return Keymap(), f"{path} could not be read ({exc}): the default keys apply"
    if not isinstance(data, dict):
        return Keymap(), f"{path} is not a JSON object: the default keys apply"
    return Keymap(data), None
