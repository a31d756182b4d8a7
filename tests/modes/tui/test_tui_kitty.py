"""The kitty keyboard protocol: the real ``pisces`` in a pseudo-terminal driven by a test that plays a terminal
which answers the flags query (as kitty, WezTerm, foot, Ghostty do) or one that does not; the flags pushed only
after an answer and popped on every way out (quit, SIGTERM, before a suspend); Shift+Enter told from Enter;
the protocol's CSI u keys turned back into the bytes the key bindings know."""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from fcntl import ioctl

import pyte
import pytest

from pisces.modes.tui import kitty

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "e2e"))

from e2eproc import PISCES, Home  # noqa: E402


def test_csi_u_keys_become_legacy_bytes() -> None:
    cases = {
        "\x1b[99;5u": "\x03",  # Ctrl+C
        "\x1b[100;5u": "\x04",  # Ctrl+D
        "\x1b[27u": "\x1b",  # Esc
        "\x1b[97;3u": "\x1ba",  # Alt+A
        "\x1b[13;3u": "\x1b\r",  # Alt+Enter (follow-up)
        "\x1b[13;2u": "\x1b[13;2u",  # Shift+Enter: kept, keybindings names it
        "\x1b[9;2u": "\x1b[Z",  # Shift+Tab
        "\x1b[106;5u": "\n",  # Ctrl+J
        "\x1b[45;5u": "\x1f",  # Ctrl+- (undo)
        "\x1b[127;3u": "\x1b\x7f",  # Alt+Backspace
        "\x1b[57399u": "",  # a keypad key of the protocol's private range: dropped, never typed as text
        "\x1b[97;9u": "",  # Super+A: nothing legacy
        "\x1b[98;7u": "\x1b\x02",  # Ctrl+Alt+B
        "\x1b[97:65;2u": "A",  # Shift+A with its shifted key reported
    }
    for seq, out in cases.items():
        assert kitty.translate("x" + seq + "y") == ("x" + out + "y", []), seq
    assert kitty.translate("a\x1b[?1ub") == ("ab", [1])  # the answer to the query is taken out
    assert kitty.translate("\x1b[A\x1b[1;5C\x1b[200~p\x1b[201~") == ("\x1b[A\x1b[1;5C\x1b[200~p\x1b[201~", [])


def test_a_sequence_cut_between_reads_is_joined_once_the_flags_are_pushed() -> None:
    class Reader:
        closed = False

        def __init__(self, chunks):
            self.chunks = list(chunks)

        def read(self, count=1024):
            return self.chunks.pop(0)

    answers: list[int] = []
    r = kitty.KittyReader(Reader(["ab\x1b[?", "0u", "\x1b[99;", "5u", "\x1b[13", ";2u", "\x1b"]), answers.append)
    assert r.read() == "ab" and r.read() == "" and answers == [0]
    r.active = True
    assert r.read() == "" and r.read() == "\x03"
    assert r.read() == "" and r.read() == "\x1b[13;2u"
    assert r.read() == "\x1b"  # a lone Esc is a key: never held back


class KittyTerminal:
    """A pseudo-terminal with pyte behind it that, when ``answers``, replies to ``CSI ? u`` as kitty does."""

    def __init__(self, home: Home, script: list, answers: bool, cols: int = 80, rows: int = 24) -> None:
        path = os.path.join(home.root, "script.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(script, f)
        master, slave = pty.openpty()
        ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        self.stty_before = termios.tcgetattr(slave)
        self.slave = slave
        self.p = subprocess.Popen([*PISCES, "--faux-script", path, "--no-session"], stdin=slave, stdout=slave,
                                  stderr=slave, cwd=home.cwd, env=home.env(TERM="xterm-256color"),
                                  start_new_session=True)
        self.fd = master
        self.answers = answers
        self.out = b""
        self.screen = pyte.Screen(cols, rows)
        self.stream = pyte.ByteStream(self.screen)

    def pump(self, timeout: float) -> None:
        r, _, _ = select.select([self.fd], [], [], timeout)
        if not r:
            return
        try:
            data = os.read(self.fd, 1 << 16)
        except OSError:
            return
        before = len(self.out)
        self.out += data
        if self.answers and b"\x1b[?u" in self.out[max(0, before - 4):]:
            os.write(self.fd, b"\x1b[?0u")
        # pyte reads CSI u as "restore cursor": the protocol's sequences are not for it
        for seq in (b"\x1b[?u", b"\x1b[>1u", b"\x1b[<u"):
            data = data.replace(seq, b"")
        self.stream.feed(data)

    def until(self, pred, timeout: float = 30.0, what: str = "") -> None:
        deadline = time.monotonic() + timeout
        while not pred():
            if time.monotonic() > deadline:
                raise AssertionError(f"{what} did not happen within {timeout}s; screen:\n" + self.text())
            self.pump(0.1)

    def text(self) -> str:
        return "\n".join(line.rstrip() for line in self.screen.display)

    def type(self, data: bytes) -> None:
        os.write(self.fd, data)

    def close(self) -> None:
        try:
            if self.p.poll() is None:
                self.p.kill()
            self.p.wait(10)
        finally:
            os.close(self.fd)
            os.close(self.slave)


@pytest.fixture
def home(tmp_path):
    return Home(str(tmp_path))


def _exited(t: KittyTerminal) -> bool:
    t.pump(0.05)
    return t.p.poll() is not None


def test_shift_enter_on_a_kitty_terminal_and_the_flags_popped_on_quit(home):
    t = KittyTerminal(home, [{"text": "two lines seen"}], answers=True)
    try:
        t.until(lambda: b"\x1b[>1u" in t.out, what="the flags pushed after the answer")
        t.until(lambda: "›" in t.text(), what="the editor")
        t.type(b"first")
        t.type(b"\x1b[13;2u")  # Shift+Enter under the protocol
        t.type(b"second")
        t.until(lambda: "› first" in t.text() and "  second" in t.text(), what="two lines in the editor")
        t.type(b"\x1b[99;5u")  # Ctrl+C under the protocol: clears the editor
        t.until(lambda: "second" not in t.text(), what="the editor cleared")
        t.type(b"alpha\x1b[13;2ubeta\r")  # Shift+Enter then Enter: one message of two lines, sent
        t.until(lambda: "two lines seen" in t.text(), what="the reply")
        assert "› alpha" in t.text() and "  beta" in t.text()
        t.type(b"\x1b[100;5u")  # Ctrl+D under the protocol, on the empty editor: quit
        t.until(lambda: _exited(t), what="the exit")
        t.pump(0.2)
        assert t.p.returncode == 0
        assert t.out.count(b"\x1b[>1u") == 1 and t.out.rfind(b"\x1b[<u") > t.out.rfind(b"\x1b[>1u")
        assert termios.tcgetattr(t.slave) == t.stty_before  # raw mode undone too
    finally:
        t.close()


def test_a_terminal_that_does_not_answer_is_left_as_it_is(home):
    t = KittyTerminal(home, [{"text": "ok"}], answers=False)
    try:
        t.until(lambda: "›" in t.text(), what="the editor")
        assert b"\x1b[?u" in t.out  # asked
        t.type(b"hi\r")
        t.until(lambda: "ok" in t.text(), what="the reply")
        t.type(b"\x04")
        t.until(lambda: _exited(t), what="the exit")
        assert b"\x1b[>1u" not in t.out and b"\x1b[<u" not in t.out
    finally:
        t.close()


def test_the_flags_are_popped_on_sigterm_and_around_a_suspend(home):
    t = KittyTerminal(home, [{"text": "x"}], answers=True)
    try:
        t.until(lambda: b"\x1b[>1u" in t.out and "›" in t.text(), what="the flags pushed")
        mark = len(t.out)
        t.type(b"\x1b[122;5u")  # Ctrl+Z under the protocol: suspend
        # this test's process group has no shell to stop it (the kernel discards a stop signal sent to an
        # orphaned group, tmux's e2e test covers the stop itself): the flags are popped before the stop
        # signal and pushed again after it
        t.until(lambda: b"\x1b[>1u" in t.out[mark:], what="the suspend and the resume")
        seen = t.out[mark:]
        assert b"\x1b[<u" in seen and seen.index(b"\x1b[<u") < seen.index(b"\x1b[>1u")
        assert seen.index(b"\x1b[?2004l") < seen.index(b"\x1b[>1u")  # with bracketed paste, in one write
        os.kill(t.p.pid, signal.SIGTERM)
        t.until(lambda: _exited(t), what="the exit")
        t.pump(0.2)
        assert t.p.returncode == 143
        assert t.out.rfind(b"\x1b[<u") > t.out.rfind(b"\x1b[>1u")
    finally:
        t.close()
