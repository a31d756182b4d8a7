"""The protocol's only writer: one JSON object per line on the original stdout.

At start-up the real stdout is duplicated to a private descriptor and descriptor 1 is pointed at stderr,
so a stray ``print`` (ours, a library's, or a child process's) can never corrupt the protocol stream.
Frames are encoded by the stream encoder (``pisces.modes.host.encoding``) for the writer's profile.
"""

from __future__ import annotations

import os
from typing import Any

from pisces.modes.entry import take_stdout
from pisces.modes.host.encoding import FULL, StreamEncoder


class FrameWriter:
    def __init__(self, fd: int, encoder: StreamEncoder | None = None) -> None:
        self.fd = fd
        self.encoder = encoder or StreamEncoder()
        self.profile = FULL  # what message_update frames carry (see stream_encoding)
        self.closed = False
        self.bytes_written = 0

    @classmethod
    def take_stdout(cls) -> "FrameWriter":
        """Claim the process's stdout for protocol frames and send everything else written to fd 1 to stderr."""
        return cls(take_stdout())

    def write(self, obj: Any) -> None:
        """Encode ``obj`` for this writer's profile and write it as one line. Raises when it cannot be
        encoded (nothing is written then)."""
        if self.closed:
            return
        parts = self.encoder.encode_parts(obj, self.profile)
        if len(parts) == 1:
            self.write_bytes(parts[0])
            return
        try:
            total = sum(len(p) for p in parts)
            done = os.writev(self.fd, parts)
            if done < total:  # interrupted part-way: the rest in one piece
                rest = memoryview(b"".join(parts))[done:]
                while rest:
                    rest = rest[os.write(self.fd, rest):]
            self.bytes_written += total
        except (BrokenPipeError, OSError):
            self.closed = True

    def write_bytes(self, frame: bytes) -> None:
        """Write one already encoded frame (its final newline included)."""
        if self.closed:
            return
        try:
            view = memoryview(frame)
            total = len(frame)
            done = 0
            while done < total:
                done += os.write(self.fd, view[done:])
            self.bytes_written += total
        except (BrokenPipeError, OSError):
            self.closed = True
