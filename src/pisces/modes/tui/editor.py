"""The editor's pi behaviours on top of prompt_toolkit's ``Buffer``: the kill-ring (Ctrl+K, Ctrl+U, Ctrl+W,
Alt+D kill; Ctrl+Y yanks; Alt+Y right after a yank cycles to the older kills), large-paste markers
(``[paste #1 +42 lines]`` or ``[paste #2 1500 chars]``, expanded when the message is sent) and the
``\\`` + Enter new line for terminals that cannot tell Shift+Enter from Enter.

Guarantees: nothing pasted is lost (a marker's text is kept until the editor is reset by a send, and a marker
the user deleted is simply not expanded); consecutive kills accumulate into one entry as in Emacs and pi;
the ring holds at most RING_LIMIT entries; Shift+Enter is recognised when the terminal sends it as
``CSI 13;2u`` (kitty keyboard protocol) or ``CSI 27;2;13~`` (xterm modifyOtherKeys), both registered with
prompt_toolkit's parser when this module is imported (``keybindings.key_id`` names them ``shift+enter``).
"""

from __future__ import annotations

import re
from typing import Any

from prompt_toolkit.input.ansi_escape_sequences import ANSI_SEQUENCES
from prompt_toolkit.keys import Keys

from pisces.modes.tui.keybindings import SHIFT_ENTER_SEQUENCES

RING_LIMIT = 60
PASTE_LINES = 10  # a paste of more lines than this becomes a marker (as pi)
PASTE_CHARS = 1000  # ... or of more characters than this
_MARKER = re.compile(r"\[paste #(\d+)(?: (?:\+\d+ lines|\d+ chars))?\]")

for _seq in SHIFT_ENTER_SEQUENCES:  # parsed as Ctrl+J (a key press needs a Keys member); key_id tells it by its data
    ANSI_SEQUENCES.setdefault(_seq, Keys.ControlJ)


class KillRing:
    def __init__(self) -> None:
        self.entries: list[str] = []

    def push(self, text: str, *, prepend: bool, accumulate: bool) -> None:
        if not text:
            return
        if accumulate and self.entries:
            self.entries[-1] = text + self.entries[-1] if prepend else self.entries[-1] + text
            return
        self.entries.append(text)
        del self.entries[:-RING_LIMIT]

    def top(self) -> str | None:
        return self.entries[-1] if self.entries else None

    def rotate(self) -> None:
        """The newest entry goes to the back: ``top`` is now the one killed before it."""
        if len(self.entries) > 1:
            self.entries.insert(0, self.entries.pop())


class EditorOps:
    """The pi editing actions the plain ``Buffer`` lacks. ``handle(action)`` runs one if it is one of them."""

    ACTIONS = frozenset({"deleteToLineStart", "deleteToLineEnd", "deleteWordBackward", "deleteWordForward",
                         "yank", "yankPop"})

    def __init__(self, buffer: Any) -> None:
        self.buffer = buffer
        self.ring = KillRing()
        self.pastes: dict[int, str] = {}
        self.paste_count = 0
        self.last: str | None = None  # "kill" or "yank" when the previous key was one
        self.yanked: tuple[int, int] | None = None  # where the last yank put its text

    # -- kill and yank -------------------------------------------------------------------------
    def handle(self, action: str | None) -> bool:
        if action not in self.ACTIONS:
            self.last = None
            return False
        buf = self.buffer
        doc = buf.document
        if action in ("yank", "yankPop"):
            (self.yank if action == "yank" else self.yank_pop)()
            return True
        accumulate = self.last == "kill"
        if action == "deleteToLineEnd":
            n = doc.get_end_of_line_position() or (1 if doc.cursor_position < len(doc.text) else 0)
            prepend = False
        elif action == "deleteWordForward":
            n = doc.find_next_word_ending() or 0
            prepend = False
        elif action == "deleteToLineStart":
            n = -doc.get_start_of_line_position() or (1 if doc.cursor_position > 0 else 0)
            prepend = True
        else:
            n = -(doc.find_start_of_previous_word() or 0)
            prepend = True
        if n > 0:
            buf.save_to_undo_stack()
            text = buf.delete(n) if not prepend else buf.delete_before_cursor(n)
            self.ring.push(text, prepend=prepend, accumulate=accumulate)
        self.last = "kill"
        return True

    def yank(self) -> None:
        text = self.ring.top()
        if text is None:
            return
        self.buffer.save_to_undo_stack()
        start = self.buffer.cursor_position
        self.buffer.insert_text(text)
        self.yanked = (start, start + len(text))
        self.last = "yank"

    def yank_pop(self) -> None:
        """Alt+Y right after a yank: the yanked text is replaced by the kill before it."""
        if self.last != "yank" or self.yanked is None or len(self.ring.entries) < 2:
            self.last = None
            return
        start, end = self.yanked
        buf = self.buffer
        text = buf.text
        self.ring.rotate()
        new = self.ring.top() or ""
        buf.text = text[:start] + new + text[end:]
        buf.cursor_position = start + len(new)
        self.yanked = (start, start + len(new))
        self.last = "yank"

    # -- paste ---------------------------------------------------------------------------------------
    def paste(self, data: str) -> None:
        text = data.replace("\r\n", "\n").replace("\r", "\n").expandtabs(4)
        text = "".join(ch for ch in text if ch == "\n" or ord(ch) >= 32)
        lines = text.count("\n") + 1
        self.last = None
        self.buffer.save_to_undo_stack()
        if lines > PASTE_LINES or len(text) > PASTE_CHARS:
            self.paste_count += 1
            self.pastes[self.paste_count] = text
            marker = f"[paste #{self.paste_count} +{lines} lines]" if lines > PASTE_LINES else \
                f"[paste #{self.paste_count} {len(text)} chars]"
            self.buffer.insert_text(marker)
            return
        self.buffer.insert_text(text)

    def expand(self, text: str) -> str:
        """``text`` with every marker of a paste still held replaced by the pasted text."""
        if not self.pastes or "[paste #" not in text:
            return text

        def sub(m: re.Match[str]) -> str:
            got = self.pastes.get(int(m.group(1)))
            return m.group() if got is None else got

        return _MARKER.sub(sub, text)

    def sent(self) -> None:
        """The editor was sent: its pastes are no longer needed."""
        self.pastes.clear()
        self.last = None

    # -- Enter -------------------------------------------------------------------------------------------
    def backslash_newline(self) -> bool:
        """Enter right after a ``\\``: the backslash becomes a new line (pi's fallback for Shift+Enter)."""
        if self.buffer.document.char_before_cursor == "\\":
            self.buffer.delete_before_cursor(1)
            self.buffer.insert_text("\n")
            return True
        return False
