"""The stdio transport of pisces' MCP client: the SDK's message streams over a server process, with bounds.

What it adds to the SDK's own ``stdio_client`` (whose message format and shutdown order it follows: close stdin,
wait, SIGTERM the group, SIGKILL):

- **bounded messages**: a line over :data:`MAX_MESSAGE` bytes is never held whole; its head and tail are kept
  (512 bytes each) to find its JSON-RPC ``id``, and the waiting request gets the error ``message over N bytes
  refused`` while the rest of the line is skipped, so a server answering 100 MB costs pisces a bounded amount of
  memory and time (the SDK's reader keeps the whole line, re-joined at every chunk);
- **no orphan**: on Linux the server runs under :mod:`pisces.core.mcp.guard`, which leads the process group and
  SIGKILLs it when pisces dies, even by ``kill -9``;
- **a clear error** for a command that does not exist (before anything is spawned).

Imported only when a stdio server starts (it needs the SDK).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import sys
from collections.abc import AsyncGenerator
from typing import Any, TextIO

import anyio
import anyio.lowlevel
import mcp_types as types
from mcp.client.stdio import get_default_environment
from mcp.shared.message import SessionMessage

MAX_MESSAGE = 8 << 20  # bytes of one JSON-RPC message from a server
_KEEP = 512
_ID = re.compile(rb'"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.){0,200}")')
GUARD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "guard.py")


def command_line(command: str, args: list[str], env: dict[str, str]) -> list[str]:
    """What is spawned: the program found on the server's PATH, under the guard on Linux."""
    found = shutil.which(command, path=env.get("PATH")) if os.sep not in command else command
    if found is None or not os.path.exists(found):
        raise FileNotFoundError(f"command not found: {command}")
    if sys.platform.startswith("linux"):
        return [sys.executable, "-I", "-S", GUARD, str(os.getpid()), found, *args]
    return [found, *args]


class _Lines:
    """Splits a byte stream into lines of at most ``limit`` bytes; a longer one is reported as
    ``(None, head, tail, size)`` once it ends, never held."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.parts: list[bytes] = []
        self.size = 0
        self.head = b""
        self.tail = b""

    def feed(self, chunk: bytes) -> list[Any]:
        out: list[Any] = []
        while chunk:
            cut = chunk.find(b"\n")
            piece, chunk = (chunk, b"") if cut < 0 else (chunk[:cut], chunk[cut + 1:])
            self._add(piece)
            if cut >= 0:
                out.append(self._end())
        return out

    def _add(self, piece: bytes) -> None:
        if self.size + len(piece) <= self.limit:
            self.parts.append(piece)
        else:
            if self.parts:
                joined = b"".join(self.parts)
                self.head, self.parts = joined[:_KEEP], []
                self.tail = joined[-_KEEP:]
            if not self.head:
                self.head = piece[:_KEEP]
            self.tail = (self.tail + piece)[-_KEEP:]
        self.size += len(piece)

    def _end(self) -> Any:
        if self.parts or self.size <= self.limit:
            line: Any = b"".join(self.parts)
        else:
            line = (None, self.head, self.tail, self.size)
        self.parts, self.size, self.head, self.tail = [], 0, b"", b""
        return line


def _too_big(head: bytes, tail: bytes, size: int) -> SessionMessage | Exception:
    """The error answer for an oversized message, when its id can be found; otherwise an error value."""
    text = f"message over {MAX_MESSAGE} bytes refused ({size} bytes)"
    for part in (head, tail):
        match = _ID.search(part)
        if match:
            ident = json.loads(match.group(1))
            raw = json.dumps({"jsonrpc": "2.0", "id": ident, "error": {"code": -32603, "message": text}})
            return SessionMessage(types.jsonrpc_message_adapter.validate_json(raw, by_name=False))
    return ValueError(text)


def _parse(line: bytes) -> SessionMessage | Exception:
    try:
        return SessionMessage(types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError as exc:
        return exc


def _killpg(pgid: int, sig: int) -> None:
    with contextlib.suppress(OSError):
        os.killpg(pgid, sig)


@contextlib.asynccontextmanager
async def stdio_transport(command: str, args: list[str], env: dict[str, str] | None, cwd: str | None,
                          errlog: TextIO, on_spawn: Any = None) -> AsyncGenerator[Any, None]:
    """``(read_stream, write_stream)`` for ``ClientSession``; ``on_spawn(pgid)`` is told the process group."""
    full_env = get_default_environment() | (env or {})
    argv = command_line(command, args, full_env)
    process = await anyio.open_process(argv, env=full_env, stderr=errlog, cwd=cwd, start_new_session=True)
    if on_spawn is not None:
        on_spawn(process.pid)
    read_writer, read_stream = anyio.create_memory_object_stream[Any](0)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)

    async def reader() -> None:
        assert process.stdout is not None
        lines = _Lines(MAX_MESSAGE)
        async with read_writer:
            with contextlib.suppress(anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError,
                                     OSError):
                while True:
                    chunk = await process.stdout.receive(1 << 16)
                    for line in lines.feed(chunk):
                        if isinstance(line, tuple):
                            item = _too_big(*line[1:])
                        elif not line.strip():
                            continue
                        else:
                            item = _parse(line)
                        await read_writer.send(item)

    async def writer() -> None:
        assert process.stdin is not None
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            async with write_reader:
                async for message in write_reader:
                    data = message.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
                    await process.stdin.send(data.encode())
        with contextlib.suppress(Exception):
            await read_writer.aclose()  # the server cannot be written to: the session sees the end

    async def wait_exit(seconds: float) -> bool:
        with anyio.move_on_after(seconds):
            while process.returncode is None:
                await anyio.sleep(0.02)
        return process.returncode is not None

    async with anyio.create_task_group() as tg:
        tg.start_soon(reader)
        tg.start_soon(writer)
        try:
            yield read_stream, write_stream
        finally:
            with anyio.CancelScope(shield=True):
                write_stream.close()
                read_stream.close()
                if process.stdin is not None:
                    with contextlib.suppress(Exception):
                        await process.stdin.aclose()
                if not await wait_exit(2.0):
                    _killpg(process.pid, signal.SIGTERM)
                    if not await wait_exit(2.0):
                        _killpg(process.pid, signal.SIGKILL)
                        await wait_exit(2.0)
                _killpg(process.pid, signal.SIGKILL)  # what the server left in its group
                if process.stdout is not None:
                    with contextlib.suppress(Exception):
                        await process.stdout.aclose()
                # the asyncio transport of the process, closed now rather than when collected (after the loop)
                close = getattr(getattr(getattr(process, "_process", None), "_transport", None), "close", None)
                if callable(close):
                    with contextlib.suppress(Exception):
                        close()
            tg.cancel_scope.cancel()
