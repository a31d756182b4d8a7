"""The RPC client's side of the agent subprocess: an ``asyncio.SubprocessProtocol`` that splits stdout into
lines (on ``\\n`` only), keeps the tail of stderr, tracks stdin's flow control and reports the exit; and the
decoding of one line into a frame.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
from typing import TYPE_CHECKING, Any

import msgspec

if TYPE_CHECKING:
    from pisces.client.client import RpcClient

STDERR_KEEP = 64 * 1024  # bytes of stderr kept
STDERR_REPORT = 2048  # bytes of stderr quoted in an exit error
DEEP_DECODE_LIMIT = 20_000  # nesting levels allowed for a frame deeper than Python's recursion limit
# Where a response's id (ours: req-N) or pi's id-less error (type and command) show, near a line's start
ID_IN_HEAD = re.compile(rb'"id"\s*:\s*"(req-\d+)"')
RESPONSE_IN_HEAD = re.compile(rb'"type"\s*:\s*"response"')
COMMAND_IN_HEAD = re.compile(rb'"command"\s*:\s*"([^"\\]{1,100})"')
_decode = msgspec.json.Decoder().decode


def decode_frame(line: bytes) -> tuple[Any, str | None]:
    """``(value, None)``, or ``(None, why)`` when the line is not JSON we can read.

    A deep frame is decoded too: get_session_tree nests two levels per entry, so a 500-entry branch is past
    Python's default recursion limit of 1000 (msgspec recurses in C with little stack per level, and the
    agent's own writer allows the same depth)."""
    try:
        return _decode(line), None
    except RecursionError:
        old = sys.getrecursionlimit()
        sys.setrecursionlimit(max(old, DEEP_DECODE_LIMIT))
        try:
            return _decode(line), None
        except (msgspec.DecodeError, ValueError, RecursionError) as exc:
            return None, f"{type(exc).__name__}: {exc}"
        finally:
            sys.setrecursionlimit(old)
    except (msgspec.DecodeError, UnicodeDecodeError, ValueError):
        pass
    try:  # what JSON.parse accepts and msgspec does not (lone surrogates)
        return json.loads(line.decode("utf-8", "surrogateescape")), None
    except (ValueError, RecursionError) as exc:
        return None, f"{type(exc).__name__}: {exc}"


# -- the process's protocol ----------------------------------------------------------------------
class _AgentProtocol(asyncio.SubprocessProtocol):
    def __init__(self, client: "RpcClient") -> None:
        self.client = client
        self.buf = bytearray()
        self.stderr = bytearray()
        self.paused = False
        self.drain_waiters: list[asyncio.Future] = []
        self.stdin_lost: BaseException | None = None

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        if fd == 1:
            self._split(data)
        elif fd == 2:
            self.stderr += data
            if len(self.stderr) > 2 * STDERR_KEEP:
                del self.stderr[:-STDERR_KEEP]

    def _split(self, data: bytes) -> None:
        start = 0
        while True:
            nl = data.find(b"\n", start)
            if nl < 0:
                if start < len(data):
                    self.buf += data[start:] if start else data
                return
            if self.buf:
                self.buf += data[start:nl]
                line = bytes(self.buf)
                self.buf.clear()
            else:
                line = data[start:nl]
            start = nl + 1
            self.client._handle_line(line)

    def pipe_connection_lost(self, fd: int, exc: BaseException | None) -> None:
        if fd == 0:
            self.stdin_lost = exc or BrokenPipeError("the agent's stdin is closed")
            self.resume_writing()
        elif fd == 1:
            if self.buf:  # the last line may lack its newline
                line = bytes(self.buf)
                self.buf.clear()
                self.client._handle_line(line)
            self.client._stdout_closed.set()
            self.client._begin_finish()
        elif fd == 2:
            self.client._stderr_closed.set()

    def process_exited(self) -> None:
        self.client._exited.set()
        self.client._begin_finish()

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False
        waiters, self.drain_waiters = self.drain_waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    async def drain(self) -> None:
        if self.paused and self.stdin_lost is None:
            waiter = asyncio.get_running_loop().create_future()
            self.drain_waiters.append(waiter)
            await waiter
        if self.stdin_lost is not None:
            raise BrokenPipeError(str(self.stdin_lost))
