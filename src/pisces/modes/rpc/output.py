"""The protocol's only writer: one JSON object per line on the original stdout.

At start-up the real stdout is duplicated to a private descriptor and descriptor 1 is pointed at stderr,
so a stray ``print`` (ours, a library's, or a child process's) can never corrupt the protocol stream.
Frames are encoded by the stream encoder (``pisces.modes.host.encoding``) for the writer's profile.

Alone (``--mode rpc``), the writer writes each frame at once on the caller's thread: the stdio client is the
only one, and a peer that stops reading holds up nobody else. Beside other clients (``--mode rpc --web``), the
writer hands frames to a thread of its own (``start_thread``), so a stdio peer that stops reading can never
block the event loop, and with it the browsers. Its queue is bounded (``STDIO_QUEUE_MAX`` bytes): a stdio peer
that falls that far behind is detached, as a browser that far behind is disconnected. Frames cannot be dropped
from a stream without breaking it, and the stdio peer owns the process (stdin's end still ends it), so pisces
stops writing to stdout for good, says so once on stderr, and goes on serving the other clients.
"""

from __future__ import annotations

import collections
import os
import sys
import threading
from typing import Any

from pisces.modes.entry import take_stdout
from pisces.modes.host.encoding import FULL, StreamEncoder

STDIO_QUEUE_MAX = 64 * 1024 * 1024  # as a browser's (pisces.modes.web.server.MAX_QUEUED)


class FrameWriter:
    def __init__(self, fd: int, encoder: StreamEncoder | None = None) -> None:
        self.fd = fd
        self.encoder = encoder or StreamEncoder()
        self.profile = FULL  # what message_update frames carry (see stream_encoding)
        self.closed = False
        self.bytes_written = 0
        self._queue: collections.deque[bytes] | None = None  # set by start_thread
        self._queued = 0
        self._cond = threading.Condition()
        self._limit = STDIO_QUEUE_MAX

    def start_thread(self, limit: int = STDIO_QUEUE_MAX) -> None:
        """From now on frames go through a queue that a thread of its own writes (see the module's text)."""
        if self._queue is not None:
            return
        self._queue = collections.deque()
        self._limit = limit
        threading.Thread(target=self._drain, name="pisces-stdout", daemon=True).start()

    def _enqueue(self, frame: bytes) -> None:
        queue = self._queue
        assert queue is not None  # only called once start_thread made it
        with self._cond:
            if self.closed:
                return
            if self._queued + len(frame) > self._limit:
                self.closed = True
                queue.clear()
                self._queued = 0
                self._cond.notify_all()
                sys.stderr.write(f"pisces: the stdio client stopped reading ({self._limit // (1024 * 1024)} MiB of "
                                 "frames waiting): no more frames go to stdout; the other clients go on\n")
                return
            queue.append(frame)
            self._queued += len(frame)
            self._cond.notify()

    def _drain(self) -> None:
        assert self._queue is not None
        while True:
            with self._cond:
                while not self._queue and not self.closed:
                    self._cond.wait()
                if self.closed and not self._queue:
                    self._cond.notify_all()
                    return
                batch = list(self._queue)
                self._queue.clear()
            data = b"".join(batch)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(self.fd, view):]
            except OSError:
                with self._cond:
                    self.closed = True
                    self._queue.clear()
                    self._queued = 0
                    self._cond.notify_all()
                return
            with self._cond:
                self._queued -= len(data)
                self.bytes_written += len(data)
                self._cond.notify_all()

    def flush(self, timeout: float) -> bool:
        """Wait until the thread wrote everything queued (or the peer is gone); False on the time-out."""
        if self._queue is None:
            return True
        with self._cond:
            return self._cond.wait_for(lambda: self.closed or not self._queue and self._queued == 0, timeout)

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
        if self._queue is not None:
            self._enqueue(parts[0] if len(parts) == 1 else b"".join(parts))
            return
        if len(parts) == 1:
            self.write_bytes(parts[0])
            return
        try:
            total = sum(map(len, parts))
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
        if self._queue is not None:
            self._enqueue(frame)
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
