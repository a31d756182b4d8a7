"""The scrollback-first renderer: finished rows are written once into the terminal's own scrollback and never
rewritten; only the live region at the bottom (streaming tail, tool progress, queue, editor, footer) is
redrawn.

Guarantees:
- ``commit(rows)`` rows are emitted exactly once, in order, each on its own line, above the live region;
- the live region is redrawn by diff (only changed rows are written) inside synchronized output
  (``CSI ?2026h`` ... ``CSI ?2026l``); a frame costs what the live region holds, never the transcript;
- every row written is cut to the terminal's width (it never wraps), so the renderer always knows where the
  live region starts; the live region is cut to the terminal's height minus one row;
- rows are strings that may hold SGR sequences made by the UI (``style``); text from outside is cleaned
  before it gets here (``pisces.modes.tui.sanitize``).
"""

from __future__ import annotations

import re
from typing import Callable

from wcwidth import wcwidth

SYNC_ON, SYNC_OFF = "\x1b[?2026h", "\x1b[?2026l"
RESET = "\x1b[0m"
_SGR = re.compile(r"\x1b\[[0-9;]*m")
PALETTE: dict[int | str, str] = {}  # the theme's colour for a basic code (theme.apply); empty: plain ANSI


def style(text: str, *codes: int | str) -> str:
    """``text`` in SGR ``codes`` (e.g. 1 bold, 2 dim, 31 red, "38;5;75"), the basic colours as the theme
    draws them."""
    if not codes or not text:
        return text
    if PALETTE:
        codes = tuple(PALETTE.get(c, c) for c in codes)
    return f"\x1b[{';'.join(str(c) for c in codes)}m{text}{RESET}"


def bg(role: str, fallback: int | str | None = None) -> tuple[int | str, ...]:
    """The theme's background ``role`` (``selectedBg``, ``userMessageBg``, ...) as codes for ``style``;
    ``fallback`` (e.g. 7, reverse video) when no theme gives one."""
    code = PALETTE.get(role)
    if code is not None:
        return (code,)
    return () if fallback is None else (fallback,)


def on_bg(row: str, role: str, fallback: int | str | None = None, width: int = 0) -> str:
    """``row`` (styled or not) drawn on the theme's background ``role`` (kept through the row's own resets),
    padded with spaces to ``width`` columns when given; ``row`` unchanged without such a background."""
    codes = bg(role, fallback)
    if not codes:
        return row
    if PALETTE and fallback is not None and codes == (fallback,):
        codes = (PALETTE.get(fallback, fallback),)
    start = f"\x1b[{codes[0]}m"
    pad = " " * max(0, width - width_of(row)) if width else ""
    return start + row.replace(RESET, RESET + start) + pad + RESET


def visible(row: str) -> str:
    return _SGR.sub("", row)


def char_width(ch: str) -> int:
    w = wcwidth(ch)
    return w if w > 0 else 0


def width_of(row: str) -> int:
    if row.isascii():  # rows are cleaned: printable ASCII is one column a character
        return len(visible(row)) if "\x1b" in row else len(row)
    return sum(char_width(c) for c in visible(row))


_FITTED: dict[tuple[str, int], str] = {}  # fit's answers for rows that are not plain ASCII (bounded)
FIT_CACHE_ROWS = 512


def fit(row: str, width: int) -> str:
    """``row`` cut to ``width`` columns (SGR sequences kept, a reset added when cut)."""
    if width <= 0:
        return ""
    if row.isascii() and "\x1b" not in row:  # the common case, one column a character
        return row[:width]
    # the live region's styled rows (rules, editor, footer) come back unchanged frame after frame: measuring
    # them a character at a time each frame was most of a frame's cost
    key = (row, width)
    done = _FITTED.get(key)
    if done is None:
        if len(_FITTED) >= FIT_CACHE_ROWS:
            _FITTED.clear()
        done = _FITTED[key] = _fit(row, width)
    return done


def _fit(row: str, width: int) -> str:
    out: list[str] = []
    used = 0
    pos = 0
    cut = False
    for m in _SGR.finditer(row):
        used, piece, cut = _take(row[pos:m.start()], used, width)
        out.append(piece)
        if cut:
            break
        out.append(m.group())
        pos = m.end()
    if not cut:
        used, piece, cut = _take(row[pos:], used, width)
        out.append(piece)
    return "".join(out) + (RESET if cut and "\x1b[" in row else "")


def _take(text: str, used: int, width: int) -> tuple[int, str, bool]:
    for i, ch in enumerate(text):
        w = char_width(ch)
        if used + w > width:
            return used, text[:i], True
        used += w
    return used, text, False


def wrap(text: str, width: int) -> list[str]:
    """Plain ``text`` (no SGR, no newline) broken into rows of at most ``width`` columns, at spaces when a
    word fits, else inside the word. Greedy: every row but the last stays the same when text is appended."""
    width = max(1, width)
    rows: list[str] = []
    while width_of(text) > width:
        cut = len(fit(text, width))
        space = text.rfind(" ", 0, cut + 1)
        if space > 0:
            rows.append(text[:space])
            text = text[space + 1:]
        else:
            cut = max(cut, 1)
            rows.append(text[:cut])
            text = text[cut:]
    rows.append(text)
    return rows


class Renderer:
    """Writes to ``write`` (a terminal of ``width`` x ``height``). Call ``commit``/``set_live`` any number of
    times, then ``flush`` once per frame."""

    def __init__(self, write: Callable[[str], None], width: int, height: int, *, sync: bool = True) -> None:
        self.write = write
        self.width = max(1, width)
        self.height = max(2, height)
        self.sync = sync
        self._pending: list[str] = []  # committed rows not yet written
        self._live: list[str] = []  # the live region as it should be
        self._cursor: tuple[int, int] | None = None  # (row, col) in the live region, None: after its end
        self._shown: list[str] = []  # the live region as it is on the screen
        self._row = 0  # the row of the live region the terminal's cursor is on
        self._dirty = False
        self.frames = 0
        self.bytes_written = 0

    @property
    def dirty(self) -> bool:
        return self._dirty or bool(self._pending)

    def commit(self, rows: list[str]) -> None:
        self._pending.extend(fit(r, self.width) for r in rows)

    def set_live(self, rows: list[str], cursor: tuple[int, int] | None = None) -> None:
        limit = self.height - 1
        if len(rows) > limit:
            drop = len(rows) - limit
            rows = rows[drop:]
            if cursor is not None:
                cursor = (max(0, cursor[0] - drop), cursor[1])
        rows = [fit(r, self.width) for r in rows]
        if rows != self._live or cursor != self._cursor:
            self._live, self._cursor = rows, cursor
            self._dirty = True

    def resize(self, width: int, height: int) -> None:
        """The terminal changed size: the live region is drawn again whole (the rows already committed stay
        where the terminal keeps them)."""
        self.width, self.height = max(1, width), max(2, height)
        self._live = [fit(r, self.width) for r in self._live]
        out = [self._to_top(), "\x1b[J"]
        self._shown = []
        self._row = 0
        self._dirty = True
        self._emit("".join(out))

    def flush(self) -> None:
        if not self.dirty:
            return
        out: list[str] = [SYNC_ON] if self.sync else []
        if self._pending:
            out.append(self._to_top())
            out.append("\r\x1b[J")
            for row in self._pending:
                out.append(row + RESET + "\r\n")
            self._pending = []
            self._shown = []
            self._row = 0
        out.append(self._draw())
        if self.sync:
            out.append(SYNC_OFF)
        self._dirty = False
        self.frames += 1
        self._emit("".join(out))

    def clear_live(self) -> None:
        """Erase the live region (before leaving, suspending or handing the terminal to a command)."""
        self._emit(self._to_top() + "\r\x1b[J")
        self._shown = []
        self._row = 0
        self._dirty = True

    def _emit(self, text: str) -> None:
        if text:
            self.bytes_written += len(text)
            self.write(text)

    def _to_top(self) -> str:
        up = self._row
        return f"\r\x1b[{up}A" if up > 0 else "\r"

    def _move(self, row: int) -> str:
        """From the current row to ``row`` of the live region (rows below the last shown are made with
        newlines, so the terminal scrolls when it must)."""
        out = ""
        if row < self._row:
            out = f"\x1b[{self._row - row}A"
        elif row > self._row:
            existing = max(0, min(row, len(self._shown) - 1) - self._row)
            if existing:
                out = f"\x1b[{existing}B"
            out += "\r\n" * (row - self._row - existing)
        self._row = row
        return out + "\r"

    def _draw(self) -> str:
        out: list[str] = []
        new, old = self._live, self._shown
        for i, row in enumerate(new):
            if i < len(old) and old[i] == row:
                continue
            out.append(self._move(i))
            out.append(row + RESET + "\x1b[K")
        if len(old) > len(new):
            if new:
                out.append(self._move(len(new) - 1))
                # the old rows below exist on the screen, so one row down never scrolls
                out.append("\x1b[1B\r\x1b[J\x1b[1A")
            else:
                out.append(self._move(0))
                out.append("\x1b[J")
        self._shown = list(new)
        if self._cursor is not None and new:
            at_row, col = self._cursor
            at_row = min(at_row, len(new) - 1)
            out.append(self._move(at_row))
            if col > 0:
                out.append(f"\x1b[{min(col, self.width - 1)}C")
        elif new:
            out.append(self._move(len(new) - 1))
        return "".join(out)
