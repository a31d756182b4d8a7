"""Dialog views of the TUI that own their keys and rows (the tree, the settings, searchable selectors).

A view is put in ``app.dialog`` as ``{"view": view, ...}``; the app hands it every key (``key(name, data)``,
``name`` being pi's key name from ``keybindings.key_id``) and draws ``rows(width)`` above the editor. A view
closes itself with ``close()``; the editor's text is never touched by a view unless it says so.

Guarantees: a view only reads what the host answered and acts through the host's commands (the app's client);
a failed command is reported in the transcript and the UI keeps serving.
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable

from pisces.modes.tui.render import on_bg, style
from pisces.modes.tui.sanitize import clean

VISIBLE = 10  # rows of a list shown at once; the list scrolls with the choice


class View:
    title = ""

    def __init__(self, app: Any) -> None:
        self.app = app

    def open(self) -> bool:
        """Show this view, unless another dialog (an approval, an extension's question) arrived meanwhile:
        that one is never hidden. Returns whether it opened."""
        if self.app.dialog is not None:
            self.app.transcript.note(f"{self.title}: another dialog is open: answer it first", 33)
            self.app.schedule()
            return False
        self.app.dialog = {"id": None, "method": "view", "view": self, "title": self.title}
        self.app.schedule()
        return True

    def close(self) -> None:
        if self.app.dialog is not None and self.app.dialog.get("view") is self:
            self.app.dialog = None
        self.app.schedule()

    def run(self, coro: Any) -> None:
        """Run a host command in the background; its failure becomes a line in the transcript."""
        async def guarded() -> None:
            try:
                await coro
            except Exception as exc:  # noqa: BLE001 - reported, the UI keeps serving
                self.app.transcript.note(f"{self.title}: {exc}", 31)
            self.app.schedule()
        asyncio.ensure_future(guarded())

    async def ask(self, cmd: dict[str, Any]) -> Any:
        resp = await self.app.client.request(cmd)
        if not resp.get("success"):
            raise RuntimeError(resp.get("error", "failed"))
        return resp.get("data") or {}

    def rows(self, width: int) -> list[str]:
        raise NotImplementedError

    def key(self, name: str, data: str) -> None:
        raise NotImplementedError


def window(count: int, at: int, size: int = VISIBLE) -> tuple[int, int]:
    """The first and one-past-last index of a ``size``-row window over ``count`` rows that shows ``at``."""
    first = max(0, min(at - size // 2, count - size))
    return first, min(count, first + size)


def list_rows(labels: list[str], at: int, size: int = VISIBLE) -> list[str]:
    return window_rows(len(labels), at, labels.__getitem__, size)


def window_rows(count: int, at: int, label: Callable[[int], str], size: int = VISIBLE) -> list[str]:
    """The rows of a list of ``count`` entries scrolled to show ``at``; only the shown entries are formatted
    (``label(i)``), so a long list costs its window."""
    first, last = window(count, at, size)
    rows = []
    if first > 0:
        rows.append(style(f"│   … {first} more", 2))
    for i in range(first, last):
        row = style(f"│ {'›' if i == at else ' '} {label(i)}", 1 if i == at else 0)
        rows.append(on_bg(row, "selectedBg") if i == at else row)
    if last < count:
        rows.append(style(f"│   … {count - last} more", 2))
    return rows


def matches(query: str, text: str) -> bool:
    """Every word of ``query`` occurs in ``text`` (case-insensitive)."""
    low = text.lower()
    return all(w in low for w in query.lower().split())


class SearchSelect(View):
    """A list filtered by what is typed (every typed word must occur in the option): Up/Down move, Enter
    picks, Backspace edits the search, Esc clears it, then closes."""

    def __init__(self, app: Any, title: str, options: list[str], then: Callable[[str], None], *,
                 current: str | None = None) -> None:
        super().__init__(app)
        self.title = title
        self.options = [clean(o) for o in options]
        self.then = then
        self.query = ""
        self.index = self.options.index(current) if current in self.options else 0
        self.current = current

    def shown(self) -> list[str]:
        return [o for o in self.options if matches(self.query, o)] if self.query else self.options

    def rows(self, width: int) -> list[str]:
        shown = self.shown()
        self.index = min(self.index, max(0, len(shown) - 1))
        rows = [style(f"┌ {self.title}", 1, 35),
                "│ search: " + self.query + "█" + style(f"  {len(shown)} of {len(self.options)}", 2)]
        labels = [o + ("  ← current" if o == self.current else "") for o in shown]
        rows.extend(list_rows(labels, self.index) if shown else [style("│   (nothing matches)", 2)])
        rows.append(style("└ type to search · ↑/↓ choose · Enter pick · Esc clear/close", 2))
        return rows

    def key(self, name: str, data: str) -> None:
        shown = self.shown()
        if name == "escape":
            if self.query:
                self.query, self.index = "", 0
            else:
                self.close()
        elif name in ("up", "down") and shown:
            self.index = (self.index + (1 if name == "down" else -1)) % len(shown)
        elif name == "pageup":
            self.index = max(0, self.index - VISIBLE)
        elif name == "pagedown":
            self.index = min(max(0, len(shown) - 1), self.index + VISIBLE)
        elif name == "enter":
            if shown:
                self.close()
                self.then(shown[min(self.index, len(shown) - 1)])
        elif name == "backspace":
            self.query, self.index = self.query[:-1], 0
        elif name == "ctrl+u":
            self.query, self.index = "", 0
        elif name == "<bracketed-paste>":
            self.query, self.index = self.query + " ".join(data.split()), 0
        elif len(data) == 1 and data.isprintable():
            self.query, self.index = self.query + data, 0


DIALOG_ROWS = 10  # options of a selector shown at once (the list scrolls with the choice)


def dialog_rows(d: dict[str, Any], width: int, typed: str) -> list[str]:
    """The rows of an extension dialog or a tool approval (``d``, the App's dialog), ``typed`` its text."""
    if "view" in d:  # a dialog that draws itself (views.py)
        return list(d["view"].rows(width))
    rows = [style("┌ " + d.get("title", ""), 1, 35)]
    if d.get("message"):
        rows.append(style("│ " + d["message"], 35))
    rows.extend(d.get("body", []))
    if d["method"] in ("select", "approval"):
        opts, at = d["options"], d["index"]
        first = max(0, min(at - DIALOG_ROWS // 2, len(opts) - DIALOG_ROWS))
        if first > 0:
            rows.append(style(f"│   … {first} more", 2))
        for i in range(first, min(len(opts), first + DIALOG_ROWS)):
            mark = "›" if i == at else " "
            row = style(f"│ {mark} {opts[i]}", 1 if i == at else 0)
            rows.append(on_bg(row, "selectedBg") if i == at else row)
        if first + DIALOG_ROWS < len(opts):
            rows.append(style(f"│   … {len(opts) - first - DIALOG_ROWS} more", 2))
        rows.append(style("└ ↑/↓ choose · Enter pick · Esc cancel", 2))
    elif d["method"] == "confirm":
        rows.append(style("└ y yes · n no · Esc cancel", 2))
    elif d["method"] == "approval_reason":
        rows.append("│ why not: " + typed + "█")
        rows.append(style("└ Enter deny with this message · Esc cancel", 2))
    else:
        rows.append("│ " + typed + "█")
        rows.append(style("└ Enter submit · Esc cancel", 2))
    return rows
