"""The kitty keyboard protocol, as progressive enhancement (https://sw.kovidgoyal.net/kitty/keyboard-protocol/).

At start the TUI asks the terminal for its keyboard flags (``CSI ? u``). A terminal that speaks the protocol
answers ``CSI ? flags u``; only then does the TUI push flag 1, "disambiguate escape codes" (``CSI > 1 u``),
under which Shift+Enter arrives as ``CSI 13;2u`` and is told from Enter. A terminal that does not answer is
left as it is (nothing is pushed; Shift+Enter falls back to ``\\`` + Enter or Ctrl+J). The pushed flags are
popped (``CSI < u``) on every way out: quit, a signal, an error (``App.restore``) and before a suspend (pushed
again on resume), so the shell never inherits them.

Under flag 1 the terminal also reports Esc, Ctrl+key, Alt+key (and combinations) as ``CSI code;mods u``.
``KittyReader`` wraps prompt_toolkit's stdin reader and turns those back into the legacy bytes the parser and
the key bindings know (``CSI 99;5u`` -> Ctrl+C's ``\\x03``, ``CSI 27u`` -> Esc, ``CSI 97;3u`` -> Esc ``a``),
keeping the sequences that carry what legacy bytes cannot (Shift+Enter). It removes the terminal's answer to
the query and reports it (``on_answer``). A sequence cut between two reads is kept until the next read.
"""

from __future__ import annotations

import re
from typing import Any, Callable

QUERY = "\x1b[?u"
PUSH = "\x1b[>1u"
POP = "\x1b[<u"

_ANSWER = re.compile(r"\x1b\[\?(\d+)u")
_CSI_U = re.compile(r"\x1b\[(\d+)(?::\d*)*(?:;(\d+)(?::\d+)?)?(?:;[\d:]*)?u")
_PARTIAL = re.compile(r"\x1b\[[\d;:?]*\Z")  # the start of a CSI sequence at the very end of a read

SHIFT, ALT, CTRL = 1, 2, 4
_KEEP = {(13, SHIFT): "\x1b[13;2u"}  # Shift+Enter: the sequence keybindings names shift+enter
_NAMED = {27: "\x1b", 13: "\r", 9: "\t", 127: "\x7f", 8: "\x7f", 32: " "}


def legacy(code: int, mods: int) -> str | None:
    """The bytes a terminal without the protocol sends for key ``code`` (a Unicode code point or one of the
    protocol's key numbers) with modifiers ``mods`` (shift 1, alt 2, ctrl 4); None for keys that have none
    (the keypad's private-use numbers, Super and Hyper)."""
    kept = _KEEP.get((code, mods))
    if kept is not None:
        return kept
    if mods & ~(SHIFT | ALT | CTRL):
        return None
    if code == 9 and mods & SHIFT:
        base = "\x1b[Z"
    elif code in _NAMED:
        base = _NAMED[code]
        if code == 32 and mods & CTRL:
            base = "\x00"
        elif code in (127, 8) and mods & CTRL:
            base = "\x08"
    elif 0xE000 <= code <= 0xF8FF or code > 0x10FFFF or code < 32:
        return None
    else:
        ch = chr(code)
        if mods & SHIFT and ch.isalpha():
            ch = ch.upper()
        if mods & CTRL:
            if "a" <= ch.lower() <= "z":
                ch = chr(ord(ch.lower()) & 0x1F)
            elif ch in "@[\\]^_":
                ch = chr(ord(ch) & 0x1F)
            elif ch == "-" or ch == "/":
                ch = "\x1f"
            elif ch == "2":
                ch = "\x00"
        base = ch
    return ("\x1b" if mods & ALT else "") + base


def translate(text: str) -> tuple[str, list[int]]:
    """``text`` with the protocol's ``CSI ... u`` keys turned into legacy bytes; also the flags of any answer
    to the query found (and removed)."""
    answers = [int(m.group(1)) for m in _ANSWER.finditer(text)]
    if answers:
        text = _ANSWER.sub("", text)
    if "u" not in text:
        return text, answers

    def sub(m: re.Match[str]) -> str:
        code = int(m.group(1))
        mods = int(m.group(2)) - 1 if m.group(2) else 0
        out = legacy(code, mods)
        return "" if out is None else out

    return _CSI_U.sub(sub, text), answers


class KittyReader:
    """Wraps a prompt_toolkit stdin reader (``read() -> str``, ``closed``)."""

    def __init__(self, reader: Any, on_answer: Callable[[int], None]) -> None:
        self.reader = reader
        self.on_answer = on_answer
        self.held = ""
        self.active = False  # the flags are pushed: a CSI cut at the end of a read is a key's first half

    @property
    def closed(self) -> bool:
        return bool(self.reader.closed)

    def read(self, count: int = 1024) -> str:
        text = self.held + self.reader.read(count)
        self.held = ""
        partial = _PARTIAL.search(text) if self.active or "\x1b[?" in text else None
        if partial is not None:
            # ``ESC [ 1 3 ;`` at the end: the rest comes with the next read (a lone Esc goes on: it is a key)
            self.held, text = text[partial.start():], text[:partial.start()]
        text, answers = translate(text)
        for flags in answers:
            self.on_answer(flags)
        return text

    def flush(self) -> str:
        """What was held back, as it is (the App's Esc timer: nothing more came)."""
        held, self.held = self.held, ""
        return translate(held)[0]


class Protocol:
    """The App's side: asks (``query``), pushes the flags once the terminal answers, pops them (``pop`` gives
    the sequence to write with the rest of a restore; "" when nothing is pushed)."""

    def __init__(self, inp: Any, write: Callable[[str], None]) -> None:
        self.write = write
        self.pushed = False
        reader = getattr(inp, "stdin_reader", None)  # prompt_toolkit's Vt100Input; none: not a terminal
        self.reader = KittyReader(reader, self._answered) if reader is not None else None
        if self.reader is not None:
            inp.stdin_reader = self.reader

    def query(self) -> str:
        return QUERY if self.reader is not None else ""

    def _answered(self, _flags: int) -> None:
        if not self.pushed:
            self.push()

    def push(self) -> None:
        self.pushed = True
        if self.reader is not None:
            self.reader.active = True
        self.write(PUSH)

    def pop(self) -> str:
        if not self.pushed:
            return ""
        self.pushed = False
        if self.reader is not None:
            self.reader.active = False
        return POP

    def flush(self) -> str:
        return self.reader.flush() if self.reader is not None and self.reader.held else ""
