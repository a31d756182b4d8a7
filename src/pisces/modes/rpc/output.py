"""The protocol's only writer: one JSON object per line on the original stdout.

At start-up the real stdout is duplicated to a private descriptor and descriptor 1 is pointed at stderr,
so a stray ``print`` (ours, a library's, or a child process's) can never corrupt the protocol stream.
"""

from __future__ import annotations

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

    def write(self, obj: Any) -> None:
        if self.closed:
            return
        buf = self._buf
        self._encoder.encode_into(obj, buf)
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
