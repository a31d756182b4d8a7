"""The protocol's only writer: one JSON object per line on the original stdout.

At start-up the real stdout is duplicated to a private descriptor and descriptor 1 is pointed at stderr,
so a stray ``print`` (ours, a library's, or a child process's) can never corrupt the protocol stream.
"""

from __future__ import annotations

import json
import math
import os
import sys
from typing import Any

import msgspec


def _enc_hook(obj: Any) -> Any:
    if isinstance(obj, (set, frozenset, tuple)):
        return list(obj)
    if isinstance(obj, BaseException):
        return str(obj)
    raise NotImplementedError(f"cannot encode {type(obj).__name__}")


def _finite(obj: Any) -> Any:
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, list):
        return [_finite(v) for v in obj]
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    return obj


def encode_with_lone_surrogates(obj: Any) -> bytes:
    """A frame holding a lone UTF-16 surrogate (JSON.parse accepts ``"\\ud800"``; UTF-8 cannot carry it), written
    as JSON.stringify writes it: a ``\\uXXXX`` escape. Rare, so the slow path."""
    data = _finite(msgspec.to_builtins(obj, enc_hook=_enc_hook))
    return json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "backslashreplace")


DEEP_ENCODE_LIMIT = 20_000  # nesting levels allowed when a frame is deeper than Python's recursion limit


class FrameWriter:
    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._encoder = msgspec.json.Encoder(enc_hook=_enc_hook)
        self._buf = bytearray()
        self.closed = False
        self.bytes_written = 0

    @classmethod
    def take_stdout(cls) -> "FrameWriter":
        """Claim the process's stdout for protocol frames and send everything else written to fd 1 to stderr."""
        sys.stdout.flush()
        fd = os.dup(1)
        os.dup2(2, 1)
        sys.stdout = sys.stderr
        return cls(fd)

    def _encode(self, obj: Any, buf: bytearray) -> None:
        try:
            self._encoder.encode_into(obj, buf)
        except UnicodeEncodeError:
            buf[:] = encode_with_lone_surrogates(obj)
        except RecursionError:
            # A deep value: get_session_tree nests two levels per entry, so a long session's tree outgrows
            # Python's default limit of 1000. msgspec recurses in C with little stack per level (200,000 levels
            # fit in the 8 MB main stack), so allow more levels for this one encode.
            buf.clear()
            old = sys.getrecursionlimit()
            sys.setrecursionlimit(max(old, DEEP_ENCODE_LIMIT))
            try:
                self._encoder.encode_into(obj, buf)
            finally:
                sys.setrecursionlimit(old)

    def write(self, obj: Any) -> None:
        if self.closed:
            return
        buf = self._buf
        try:
            self._encode(obj, buf)
        except BaseException:
            buf.clear()  # never leave half a frame in front of the next one
            raise
        buf.extend(b"\n")
        try:
            view = memoryview(buf)
            total = len(buf)
            done = 0
            while done < total:
                done += os.write(self.fd, view[done:])
            self.bytes_written += total
        except (BrokenPipeError, OSError):
            self.closed = True
        finally:
            del view
            buf.clear()
