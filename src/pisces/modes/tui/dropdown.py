"""The ``@`` file dropdown under the editor, as pi's: typing ``@query`` (a word of its own) lists the project's
files and folders matching it fuzzily (``fuzzy_files``), best first; Up/Down move, Tab or Enter put the chosen
path in place of ``@query`` (a file followed by a space; a folder keeps the list open on its contents), Esc
closes the list (the reply goes on: that Esc aborts nothing). The list follows what is typed and closes when
the cursor leaves the ``@`` word. After Esc it stays closed for that word until Tab asks for it again.

Guarantees: at most ROWS rows drawn; the walk and the ranking are fuzzy_files' (bounded, cached); the editor's
text changes only on an accept.
"""

from __future__ import annotations

import os
from typing import Any

from pisces.modes.tui.render import on_bg, style

ROWS = 8


def at_word(buf: Any) -> tuple[int, str] | None:
    """(start, ``@query``) of the ``@`` word just before the cursor, if there is one."""
    before = buf.document.text_before_cursor
    if not before or before[-1].isspace():
        return None
    word = before.rsplit(None, 1)[-1]
    if not word.startswith("@") or word.startswith("@mcp:"):
        return None
    return len(before) - len(word), word


class AtDropdown:
    def __init__(self) -> None:
        self.choices: list[str] = []
        self.index = 0
        self.start = -1
        self.word = ""
        self.dismissed: tuple[int, str] | None = None  # (start, text) of the @ word Esc closed the list on

    @property
    def open(self) -> bool:
        return bool(self.choices)

    def close(self) -> None:
        self.choices, self.index, self.word = [], 0, ""

    def update(self, buf: Any, *, force: bool = False) -> None:
        """Follow the editor after a key: open, refresh or close the list."""
        found = at_word(buf)
        if found is None:
            self.close()
            self.dismissed = None
            return
        start, word = found
        if not force and self.dismissed is not None and self.dismissed[0] == start:
            return
        if force:
            self.dismissed = None
        if word == self.word and start == self.start and self.open:
            return
        from pisces.modes.tui.fuzzy_files import matches, project_files  # noqa: PLC0415 - the first @

        keep = self.choices[self.index] if self.open else None
        self.choices = matches(word[1:], project_files(os.getcwd()))
        self.index = self.choices.index(keep) if keep in self.choices else 0
        self.start, self.word = start, word

    def key(self, action: str | None, buf: Any) -> bool:
        """A key while the list is open; True when the list took it."""
        if not self.open:
            return False
        if action == "cursorUp":
            self.index = (self.index - 1) % len(self.choices)
        elif action == "cursorDown":
            self.index = (self.index + 1) % len(self.choices)
        elif action in ("tab", "submit"):
            self.accept(buf)
        elif action == "interrupt":
            self.dismissed = (self.start, self.word)
            self.close()
        else:
            return False
        return True

    def accept(self, buf: Any) -> None:
        choice = self.choices[self.index]
        end = buf.cursor_position
        text = "@" + choice + ("" if choice.endswith("/") else " ")
        buf.text = buf.text[:self.start] + text + buf.text[end:]
        buf.cursor_position = self.start + len(text)
        self.close()
        if choice.endswith("/"):
            self.update(buf)  # a folder: its contents next

    def rows(self, width: int) -> list[str]:
        if not self.open:
            return []
        first = max(0, min(self.index - ROWS // 2, len(self.choices) - ROWS))
        out = []
        for i in range(first, min(len(self.choices), first + ROWS)):
            if i == self.index:
                out.append(on_bg(style(f"› {self.choices[i]}", 1), "selectedBg", 7))
            else:
                out.append(style(f"  {self.choices[i]}", 2))
        more = len(self.choices) - min(len(self.choices), first + ROWS)
        hint = "↑/↓ move · Tab/Enter insert · Esc close"
        out.append(style((f"  … {more} more · " if more else "  ") + hint, 2))
        return out
