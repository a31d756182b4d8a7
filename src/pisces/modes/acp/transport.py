"""JSON-RPC messages over stdin/stdout, as the SDK's message-level ``Transport``.

stdin is read on a thread (a pipe, a file or a terminal, lines of any length); each line is one message.
A line that is not JSON gets a ``-32700`` error and a JSON value that is not a JSON-RPC message a ``-32600``
error (both with ``id: null``), and the connection keeps serving: the SDK alone would drop such lines
without a word, leaving the client waiting. Frames go out on the private descriptor ``main`` took for
stdout, one line each, valid UTF-8, written in the order they are sent.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
from typing import Any, Awaitable, BinaryIO, Callable


def _encode(message: dict[str, Any]) -> bytes:
    text = json.dumps(message, ensure_ascii=False, separators=(",", ":"), default=str)
    try:
        return text.encode("utf-8") + b"\n"
    except UnicodeEncodeError:  # a lone surrogate: escape it rather than write invalid UTF-8
        return json.dumps(message, separators=(",", ":"), default=str).encode("ascii") + b"\n"


EOF_DRAIN = 10.0  # seconds requests still in flight at stdin EOF get to answer (turns are cancelled first)


class InFlight:
    """The requests read but not answered yet (an SDK stream observer). At stdin EOF the agent answers them
    before it leaves: a client that writes a request and closes its end still gets the answer."""

    def __init__(self) -> None:
        self._ids: set[Any] = set()
        self._idle = asyncio.Event()
        self._idle.set()

    def observe(self, event: Any) -> None:
        message = event.message
        request_id = message.get("id")
        if not isinstance(request_id, (int, str)):
            return
        if event.direction.value == "incoming" and "method" in message:
            self._ids.add(request_id)
            self._idle.clear()
        elif event.direction.value == "outgoing" and "method" not in message:
            self._ids.discard(request_id)
            if not self._ids:
                self._idle.set()

    async def drain(self, timeout: float = EOF_DRAIN) -> None:
        try:
            await asyncio.wait_for(self._idle.wait(), timeout)
        except asyncio.TimeoutError:
            pass


class StdioTransport:
    def __init__(self, out_fd: int, source: BinaryIO | None = None,
                 on_eof: Callable[[], Awaitable[None]] | None = None) -> None:
        self._on_eof = on_eof
        self._fd = out_fd
        self._source = source if source is not None else sys.stdin.buffer
        self._lines: asyncio.Queue[bytes | None] = asyncio.Queue()
        self._closed = False
        self.broken = False  # the client stopped reading (EPIPE)
        loop = asyncio.get_running_loop()
        threading.Thread(target=self._read, args=(loop,), name="acp-stdin", daemon=True).start()

    def _read(self, loop: asyncio.AbstractEventLoop) -> None:
        try:
            while True:
                line = self._source.readline()
                if not line:
                    break
                loop.call_soon_threadsafe(self._lines.put_nowait, line)
        except (OSError, ValueError):
            pass
        finally:
            try:
                loop.call_soon_threadsafe(self._lines.put_nowait, None)
            except RuntimeError:  # the loop is gone: the process is leaving
                pass

    async def send(self, message: dict[str, Any]) -> None:
        if self._closed or self.broken:
            raise ConnectionError("Connection closed")
        self._write(_encode(message))

    def _write(self, data: bytes) -> None:
        view = memoryview(data)
        try:
            while view:
                written = os.write(self._fd, view)
                view = view[written:]
        except OSError:
            self.broken = True
            raise ConnectionError("The client closed its end of stdout") from None

    async def receive(self) -> dict[str, Any] | None:
        while True:
            line = await self._lines.get()
            if line is None:
                if self._on_eof is not None:
                    await self._on_eof()
                return None
            line = line.strip()
            if not line:
                continue
            try:
                message = json.loads(line)
            except ValueError as exc:
                self._reply_error(-32700, f"Parse error: {exc}")
                continue
            if not isinstance(message, dict) or not ("method" in message or "id" in message):
                self._reply_error(-32600, "Invalid request: expected a JSON-RPC 2.0 request, notification or "
                                          "response object")
                continue
            return message

    def _reply_error(self, code: int, text: str) -> None:
        if self._closed or self.broken:
            return
        try:
            self._write(_encode({"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": text}}))
        except ConnectionError:
            pass

    async def close(self) -> None:
        self._closed = True
