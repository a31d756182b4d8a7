"""The QR encoder of the pairing link (pisces.modes.web.qr), decoded by a real reader (zbarimg, Debian's
zbar-tools): links of every length up to version 10 read back exactly, through the matrix and through the
terminal rendering (half blocks turned back into modules); and ``--host 0.0.0.0`` prints one."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import time
import zlib

import pytest
from webproc import WebProc

from pisces.modes.web.qr import matrix, terminal

ZBAR = shutil.which("zbarimg")
needs_zbar = pytest.mark.skipif(ZBAR is None, reason="no zbarimg here (apt-get install zbar-tools)")


def png(path: str, dark: list[list[bool]], scale: int = 4, quiet: int = 4) -> None:
    h, w = len(dark) + 2 * quiet, len(dark[0]) + 2 * quiet
    rows = []
    for y in range(h * scale):
        my = y // scale - quiet
        line = bytearray(b"\x00")  # filter: none
        for x in range(w * scale):
            mx = x // scale - quiet
            on = 0 <= my < len(dark) and 0 <= mx < len(dark[my]) and dark[my][mx]
            line.append(0 if on else 255)
        rows.append(bytes(line))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w * scale, h * scale, 8, 0, 0, 0, 0))
                + chunk(b"IDAT", zlib.compress(b"".join(rows))) + chunk(b"IEND", b""))


def decode(path: str) -> str:
    run = subprocess.run([ZBAR, "--quiet", "--raw", path], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    return run.stdout.rstrip("\n")


def from_terminal(text: str) -> list[list[bool]]:
    """The modules back from the half blocks (light drawn, dark as spaces), quiet zone included."""
    top = {"\u2588": (True, True), "\u2580": (True, False), "\u2584": (False, True), " ": (False, False)}
    grid: list[list[bool]] = []
    for line in text.split("\n"):
        grid += [[not top[c][0] for c in line], [not top[c][1] for c in line]]
    return grid


@needs_zbar
@pytest.mark.parametrize("length", [10, 40, 75, 77, 120, 200, 271])
def test_links_of_every_length_read_back(tmp_path, length):
    text = ("http://192.168.1.23:54321/pair?token=" + "Ab3_-" * 60)[:length]
    path = str(tmp_path / "qr.png")
    png(path, matrix(text))
    assert decode(path) == text
    dark = from_terminal(terminal(text, quiet=2))
    path = str(tmp_path / "terminal.png")
    png(path, dark, quiet=2)
    assert decode(path) == text


def test_too_long_is_a_clear_error():
    with pytest.raises(ValueError, match="too long"):
        matrix("x" * 272)


@needs_zbar
def test_listening_on_every_address_prints_a_qr_code_of_the_link(home, tmp_path):
    token = tmp_path / "token"
    with open(os.open(token, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
        f.write("a-long-enough-token-for-the-qr-test")
    with WebProc(home, "--provider", "faux", "--no-session", "--host", "0.0.0.0", "--web-token-file",
                 str(token)) as w:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # the code follows the link line
            block = [line for line in w.output.splitlines() if line and set(line) <= set("\u2588\u2580\u2584 ")]
            if len(block) > 10 and block[-1] == "\u2588" * len(block[0]):  # its bottom edge has come
                break
            time.sleep(0.05)
        assert len(block) > 10, w.output
        path = str(tmp_path / "printed.png")
        png(path, from_terminal("\n".join(block)), quiet=2)
        assert decode(path) == w.pair_url  # the link printed beside it, the LAN address when there is one
