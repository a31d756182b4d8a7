"""Themes in pi's JSON theme format: ``{"name", "vars": {...}, "colors": {...}}`` where every colour is a
``#RRGGBB`` hex, a 256-colour index (0-255), the name of a var, or ``""`` (the terminal's default). ``dark``
and ``light`` are built in; ``--theme PATH`` loads a file; the ``theme`` setting names a built-in or a file
``<agent dir>/themes/NAME.json`` (not read with ``--no-themes``).

How it applies: the UI draws with a few basic SGR colours (31 error, 32 success, 33 warning, 36 accent, 35
dialog border, 2 muted) and Pygments token roles; ``apply`` maps each to the theme's colour
(``render.PALETTE``), so a theme recolours every row without the drawing code knowing about themes. pi's
backgrounds (``selectedBg``, ``userMessageBg``, ``toolPendingBg``/``toolSuccessBg``/``toolErrorBg``) are
drawn where the UI asks for them with ``render.bg`` (a list's chosen entry, a user message, tool cards).

Guarantees: a theme that is missing a required colour, names an unknown var, loops through vars, or cannot be
read is refused with a message naming the problem, and the dark theme applies; files over 1 MiB are refused.
Colours are written as 24-bit SGR when ``COLORTERM`` says ``truecolor``/``24bit``, else as the nearest of the
256 colours.
"""

from __future__ import annotations

import json
import os
from typing import Any

from pisces.modes.tui import render

REQUIRED = (
    "accent", "border", "borderAccent", "borderMuted", "success", "error", "warning", "muted", "dim", "text",
    "thinkingText", "selectedBg", "userMessageBg", "userMessageText", "customMessageBg", "customMessageText",
    "customMessageLabel", "toolPendingBg", "toolSuccessBg", "toolErrorBg", "toolTitle", "toolOutput",
    "mdHeading", "mdLink", "mdLinkUrl", "mdCode", "mdCodeBlock", "mdCodeBlockBorder", "mdQuote", "mdQuoteBorder",
    "mdHr", "mdListBullet", "toolDiffAdded", "toolDiffRemoved", "toolDiffContext", "syntaxComment",
    "syntaxKeyword", "syntaxFunction", "syntaxVariable", "syntaxString", "syntaxNumber", "syntaxType",
    "syntaxOperator", "syntaxPunctuation", "thinkingOff", "thinkingMinimal", "thinkingLow", "thinkingMedium",
    "thinkingHigh", "thinkingXhigh", "bashMode",
)
# the UI's basic codes -> the theme colour that replaces them
ROLES: dict[int | str, str] = {31: "error", 32: "success", 33: "warning", 36: "accent", 35: "borderAccent",
                               2: "muted", 34: "mdLink"}
# pi's background colours, drawn behind: the selected entry of a list, a user message, tool cards
BACKGROUNDS = ("selectedBg", "userMessageBg", "customMessageBg", "toolPendingBg", "toolSuccessBg", "toolErrorBg")
SYNTAX = ("syntaxKeyword", "syntaxFunction", "syntaxType", "syntaxString", "syntaxNumber", "syntaxComment",
          "syntaxOperator", "syntaxVariable", "syntaxPunctuation")


def _builtin(name: str, v: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    colors = {k: "" for k in REQUIRED}
    colors.update({"accent": "accent", "border": "blue", "borderAccent": "cyan", "borderMuted": "faint",
                   "success": "green", "error": "red", "warning": "yellow", "muted": "grey", "dim": "faint",
                   "thinkingText": "grey", "toolOutput": "grey", "mdHeading": "yellow", "mdLink": "blue",
                   "mdLinkUrl": "faint", "mdCode": "accent", "mdCodeBlock": "green", "mdCodeBlockBorder": "grey",
                   "mdQuote": "grey", "mdQuoteBorder": "grey", "mdHr": "grey", "mdListBullet": "accent",
                   "toolDiffAdded": "green", "toolDiffRemoved": "red", "toolDiffContext": "grey",
                   "customMessageLabel": "purple", "thinkingOff": "faint", "thinkingMinimal": "grey",
                   "thinkingLow": "blue", "thinkingMedium": "cyan", "thinkingHigh": "purple",
                   "thinkingXhigh": "purple", "bashMode": "green", "selectedBg": "selBg", "userMessageBg": "userBg",
                   "customMessageBg": "userBg", "toolPendingBg": "toolBg", "toolSuccessBg": "toolBg",
                   "toolErrorBg": "toolBg"})
    colors.update(over)
    return {"name": name, "vars": v, "colors": colors}


BUILTIN = {
    "dark": _builtin("dark", {"accent": "#7fc8c0", "blue": "#6c9eff", "cyan": "#3fd0f0", "green": "#a8c66c",
                              "red": "#e06c6c", "yellow": "#f0d060", "grey": "#8a8a8a", "faint": "#5c5c5c",
                              "purple": "#b48ee0", "selBg": "#363646", "userBg": "#30323c", "toolBg": "#26262e"},
                     {"syntaxKeyword": "#6aa8e0", "syntaxFunction": "#e0dca0", "syntaxType": "#5cc8b0",
                      "syntaxString": "#d8946c", "syntaxNumber": "#b0d0a0", "syntaxComment": "#6a9a5a",
                      "syntaxOperator": "#d0d0d0", "syntaxVariable": "#9cd0f0", "syntaxPunctuation": "#d0d0d0"}),
    "light": _builtin("light", {"accent": "#2a7f78", "blue": "#2851b8", "cyan": "#087a98", "green": "#3f7a1c",
                                "red": "#b42828", "yellow": "#8a6400", "grey": "#6a6a6a", "faint": "#9a9a9a",
                                "purple": "#7a3fb0", "selBg": "#dcdcec", "userBg": "#ececf2", "toolBg": "#f2f2f6"},
                      {"syntaxKeyword": "#0032b4", "syntaxFunction": "#7a5a00", "syntaxType": "#1a7a6a",
                       "syntaxString": "#a0301a", "syntaxNumber": "#2a7a3a", "syntaxComment": "#5a7a4a",
                       "syntaxOperator": "#303030", "syntaxVariable": "#103a80", "syntaxPunctuation": "#303030"}),
}


class ThemeError(ValueError):
    pass


def resolve(theme: dict[str, Any]) -> dict[str, str | int]:
    """Every required colour as a hex string, an int index or "" (vars followed), or ThemeError."""
    if not isinstance(theme, dict) or not isinstance(theme.get("colors"), dict):
        raise ThemeError("a theme is a JSON object with \"name\" and \"colors\"")
    colors, vars_ = theme["colors"], theme.get("vars") or {}
    if not isinstance(vars_, dict):
        raise ThemeError("\"vars\" must be an object")
    missing = [k for k in REQUIRED if k not in colors]
    if missing:
        raise ThemeError(f"missing colors: {', '.join(missing[:8])}" + (" …" if len(missing) > 8 else ""))
    out: dict[str, str | int] = {}
    for key in REQUIRED:
        value = colors[key]
        seen: list[str] = []
        while isinstance(value, str) and value and not value.startswith("#"):
            if value not in vars_ or value in seen:
                raise ThemeError(f"{key}: {value!r} is neither a colour nor a var" if value not in vars_
                                 else f"{key}: the vars loop ({' -> '.join([*seen, value])})")
            seen.append(value)
            value = vars_[value]
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            raise ThemeError(f"{key}: {value!r} is not a colour")
        if isinstance(value, int) and not 0 <= value <= 255:
            raise ThemeError(f"{key}: {value} is not a 256-colour index")
        if isinstance(value, str) and value and (len(value) != 7 or any(c not in "0123456789abcdefABCDEF"
                                                                         for c in value[1:])):
            raise ThemeError(f"{key}: {value!r} is not #RRGGBB")
        out[key] = value
    return out


def _cube(c: int) -> int:
    return 0 if c < 48 else 1 if c < 115 else (c - 35) // 40


def sgr(value: str | int, truecolor: bool) -> str | None:
    """The foreground SGR parameters of a colour (None for the terminal's default)."""
    if value == "":
        return None
    if isinstance(value, int):
        return f"38;5;{value}"
    r, g, b = (int(value[i:i + 2], 16) for i in (1, 3, 5))
    if truecolor:
        return f"38;2;{r};{g};{b}"
    return f"38;5;{16 + 36 * _cube(r) + 6 * _cube(g) + _cube(b)}"


def palette(colors: dict[str, str | int], truecolor: bool) -> dict[int | str, str]:
    out: dict[int | str, str] = {}
    for code, role in ROLES.items():
        got = sgr(colors[role], truecolor)
        if got is not None:
            out[code] = got
    for role in SYNTAX:
        got = sgr(colors[role], truecolor)
        if got is not None:
            out[role] = got
    for role in BACKGROUNDS:
        got = sgr(colors[role], truecolor)
        if got is not None:
            out[role] = "48" + got[2:]  # the same colour as a background
    return out


def theme_path(paths: list[str] | None, setting: Any, agent_dir: str, no_themes: bool = False) -> str | None:
    """The file ``choose`` reads the theme from (None for a built-in): what a hot reload watches."""
    if paths:
        return paths[-1]
    name = setting if isinstance(setting, str) and setting else "dark"
    if name in BUILTIN or no_themes or "/" in name or name.startswith("."):
        return None
    return os.path.join(agent_dir, "themes", name + ".json")


def read_theme_file(path: str) -> dict[str, Any]:
    try:
        if os.path.getsize(path) > 1 << 20:
            raise ThemeError(f"{path} is over 1 MiB")
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError) as exc:
        raise ThemeError(f"{path} could not be read ({exc})") from None
    return data if isinstance(data, dict) else {}


def choose(setting: Any, paths: list[str] | None, agent_dir: str, no_themes: bool = False
           ) -> tuple[str, dict[str, str | int], str | None]:
    """(name, resolved colours, a problem to show) for the session: the last ``--theme`` file, else the
    ``theme`` setting (a built-in name or ``<agent dir>/themes/NAME.json``), else dark."""
    try:
        if paths:
            data = read_theme_file(paths[-1])
            return str(data.get("name") or os.path.basename(paths[-1])), resolve(data), None
        name = setting if isinstance(setting, str) and setting else "dark"
        if name in BUILTIN:
            return name, resolve(BUILTIN[name]), None
        if no_themes:
            raise ThemeError(f"theme {name!r} is not built in and --no-themes skips theme files")
        if "/" in name or name.startswith("."):
            raise ThemeError(f"theme {name!r}: a theme name, not a path (--theme PATH loads a file)")
        return name, resolve(read_theme_file(os.path.join(agent_dir, "themes", name + ".json"))), None
    except ThemeError as exc:
        return "dark", resolve(BUILTIN["dark"]), f"theme: {exc}; the dark theme applies"


def apply(colors: dict[str, str | int], truecolor: bool | None = None) -> None:
    """Make ``colors`` the palette every row is drawn with."""
    if truecolor is None:
        truecolor = os.environ.get("COLORTERM", "").lower() in ("truecolor", "24bit")
    render.PALETTE.clear()
    render.PALETTE.update(palette(colors, truecolor))
