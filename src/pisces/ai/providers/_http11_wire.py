"""The wire side of :mod:`pisces.ai.providers.http11`: the connection's protocol object, the response head's
parser and the body framing, with the bounds that module's docstring lists (every limit raises httpx2's
``RemoteProtocolError`` saying which). Imported with that module only, on the first direct request."""

from __future__ import annotations

import asyncio
import math
import re
import select
from typing import Any

import httpx2

MAX_LINE = 16 * 1024
MAX_HEAD = 100 * 1024
MAX_FIELDS = 256
MAX_CHUNK_LINE = 4 * 1024
MAX_TRAILERS = 100 * 1024
READ_AHEAD = 256 * 1024

TOKEN = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_STATUS = re.compile(rb"HTTP/1\.([01]) ([0-9]{3})(?: (.*))?")
_HEX = re.compile(rb"[0-9A-Fa-f]{1,16}")
_SIZE_LINE = re.compile(rb"([0-9A-Fa-f]{1,16})\r\n")  # no extension, no blanks: what servers send
# a header value as h11 accepts one: visible characters (and obs-text), blanks only between them
FIELD_VALUE = re.compile(rb"(?:[\x21-\x7e\x80-\xff]+(?:[ \t]+[\x21-\x7e\x80-\xff]+)*)?")


class Conn(asyncio.Protocol):
    """One connection: what arrived (``chunks``), whether the server's end came, the writer's flow control."""

    def __init__(self, loop: asyncio.AbstractEventLoop, key: tuple) -> None:
        self.loop = loop
        self.key = key
        self.transport: Any = None
        self.chunks: list[bytes] = []
        self.buffered = 0
        self.eof = False
        self.lost: BaseException | None = None
        self.closed = False
        self.waiter: asyncio.Future | None = None
        self.drain: asyncio.Future | None = None
        self.paused_reading = False
        self.paused_writing = False
        self.deadline = 0.0
        self.timer: asyncio.TimerHandle | None = None
        self.idle_since = 0.0
        self.served = 0  # responses read to the end on this connection

    # -- asyncio.Protocol ---------------------------------------------------------------------
    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.chunks.append(data)
        self.buffered += len(data)
        if self.buffered > READ_AHEAD and not self.paused_reading:
            self.paused_reading = True
            self.transport.pause_reading()
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def eof_received(self) -> None:
        self.eof = True
        self._wake()

    def connection_lost(self, exc: Exception | None) -> None:
        self.eof = True
        self.closed = True
        self.lost = exc
        self._wake()
        drain = self.drain
        if drain is not None and not drain.done():
            drain.set_result(None)

    def pause_writing(self) -> None:
        self.paused_writing = True

    def resume_writing(self) -> None:
        self.paused_writing = False
        drain = self.drain
        if drain is not None and not drain.done():
            drain.set_result(None)

    def _wake(self) -> None:
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    # -- reading ------------------------------------------------------------------------------
    def take(self) -> bytes:
        """Everything that arrived and was not taken yet (b"" if nothing)."""
        chunks = self.chunks
        if not chunks:
            return b""
        data = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        chunks.clear()
        self.buffered = 0
        if self.paused_reading:
            self.paused_reading = False
            self.transport.resume_reading()
        return data

    async def wait(self, timeout: float | None) -> None:
        """Until more bytes or the end arrive; ``ReadTimeout`` after ``timeout`` seconds without."""
        if self.chunks or self.eof:
            return
        waiter = self.waiter = self.loop.create_future()
        if timeout is None:
            self.deadline = math.inf
        else:
            # one timer for many waits: while bytes keep coming it fires, finds the deadline moved, and is
            # set again once; a timer set for a later deadline (an earlier, longer timeout) is replaced
            self.deadline = self.loop.time() + timeout
            timer = self.timer
            if timer is None or timer.when() > self.deadline:
                if timer is not None:
                    timer.cancel()
                self.timer = self.loop.call_at(self.deadline, self._on_timer)
        try:
            await waiter
        finally:
            self.waiter = None
        if waiter.result() is not None:
            raise httpx2.ReadTimeout("The read operation timed out")

    def _on_timer(self) -> None:
        self.timer = None
        waiter = self.waiter
        if waiter is None or waiter.done():
            return
        if self.loop.time() >= self.deadline:
            waiter.set_result(True)  # timed out
        elif self.deadline != math.inf:
            self.timer = self.loop.call_at(self.deadline, self._on_timer)

    # -- writing ------------------------------------------------------------------------------
    async def write(self, parts: list[bytes], timeout: float | None) -> None:
        """Write ``parts`` one after the other; wait (at most ``timeout`` seconds) while the transport holds
        more than its high-water mark."""
        if self.closed or self.transport.is_closing():
            raise httpx2.WriteError(str(self.lost) if self.lost else "The connection is closed")
        for data in parts:
            # a view: what the socket did not take at once is copied into the transport's buffer once,
            # where a ``bytes`` is sliced (a copy) and then copied in
            self.transport.write(memoryview(data))
        if self.paused_writing and not self.closed:
            self.drain = self.loop.create_future()
            try:
                await asyncio.wait_for(self.drain, timeout)
            except asyncio.TimeoutError:
                raise httpx2.WriteTimeout("The write operation timed out") from None
            finally:
                self.drain = None
        if self.closed and self.lost is not None:
            raise httpx2.WriteError(str(self.lost))

    # -- state --------------------------------------------------------------------------------
    def usable(self) -> bool:
        """Idle and still open: the server neither closed it nor sent anything (the socket is not readable)."""
        if self.closed or self.eof or self.chunks or self.transport.is_closing():
            return False
        sock = self.transport.get_extra_info("socket")
        if sock is None:
            return True
        try:
            return not _readable(sock.fileno())
        except (OSError, ValueError):
            return False

    def close(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        self.closed = True
        if self.transport is not None:
            self.transport.abort()  # now, without a TLS goodbye: nothing more is sent on a dropped connection


def _readable(fd: int) -> bool:
    """The socket has bytes or its end waiting (poll: select would fail on a descriptor past 1023)."""
    if hasattr(select, "poll"):
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        return bool(poller.poll(0))
    readable, _, _ = select.select([fd], [], [], 0)
    return bool(readable)


def _status_line(line: bytes) -> tuple[int, int, bytes]:
    found = _STATUS.fullmatch(line)
    if found is None:
        raise httpx2.RemoteProtocolError(f"illegal status line: {line[:200]!r}")
    return int(found.group(1)), int(found.group(2)), found.group(3) or b""


def parse_head(head: bytes) -> tuple[int, int, bytes, list[tuple[bytes, bytes]]]:
    """(minor version, status, reason, raw headers) of a response head without its blank line."""
    lines = head.split(b"\n")
    if len(lines) > MAX_FIELDS + 1:
        raise httpx2.RemoteProtocolError(f"the server sent more than {MAX_FIELDS} header fields")
    for line in lines:
        if len(line) > MAX_LINE:
            raise httpx2.RemoteProtocolError(f"a header line longer than {MAX_LINE} bytes")
    minor, status, reason = _status_line(lines[0].rstrip(b"\r"))
    headers: list[tuple[bytes, bytes]] = []
    for raw in lines[1:]:
        line = raw.rstrip(b"\r")
        if line[:1] in (b" ", b"\t"):  # obsolete line folding: a continuation of the previous value
            if not headers:
                raise httpx2.RemoteProtocolError("a continuation line before any header")
            name, value = headers[-1]
            headers[-1] = (name, (value + b" " + line.strip(b" \t")).strip(b" \t"))
            continue
        name, sep, value = line.partition(b":")
        if not sep or TOKEN.fullmatch(name) is None:
            raise httpx2.RemoteProtocolError(f"illegal header line: {line[:200]!r}")
        value = value.strip(b" \t")
        if b"\r" in value or b"\0" in value:
            raise httpx2.RemoteProtocolError(f"illegal header value in {name[:100]!r}")
        headers.append((name, value))
    return minor, status, reason, headers


def framing(method: bytes, status: int, headers: list[tuple[bytes, bytes]]) -> tuple[str, int]:
    """How the body ends: ("none", 0), ("chunked", 0), ("length", n) or ("close", 0) (RFC 9112 6.3)."""
    if method == b"HEAD" or status in (204, 304) or 100 <= status < 200:
        return "none", 0
    lengths: set[bytes] = set()
    codings: list[bytes] = []
    for name, value in headers:
        lowered = name.lower()
        if lowered == b"transfer-encoding":
            codings += [c.strip().lower() for c in value.split(b",") if c.strip()]
        elif lowered == b"content-length":
            lengths.update(v.strip() for v in value.split(b","))
    if codings:
        if codings != [b"chunked"]:
            raise httpx2.RemoteProtocolError(f"unsupported Transfer-Encoding: {b', '.join(codings)[:200]!r}")
        return "chunked", 0
    if lengths:
        if len(lengths) > 1 or not all(v.isdigit() and len(v) <= 18 for v in lengths):
            raise httpx2.RemoteProtocolError(f"bad Content-Length: {b', '.join(sorted(lengths))[:200]!r}")
        return "length", int(lengths.pop())
    return "close", 0


class Chunked:
    """Incremental chunked decoding: ``feed`` returns the data bytes of what it was given, all in one."""

    def __init__(self) -> None:
        self.remaining = 0  # data bytes left in the current chunk
        self.state = 0  # 0: size line, 1: data, 2: CRLF after data, 3: trailers, 4: done
        self.tail = b""  # an incomplete line, kept for the next feed
        self.trailers = 0
        self.extra = False  # bytes came after the end

    def feed(self, data: bytes) -> bytes:
        if self.tail:
            data = self.tail + data
            self.tail = b""
        out: list[bytes] = []
        pos = 0
        end = len(data)
        while pos < end:
            state = self.state
            if state == 0:  # the common case first: a whole size line, its data and CRLF in hand
                found = _SIZE_LINE.match(data, pos)
                if found is not None:
                    size = int(found.group(1), 16)
                    start = found.end()
                    stop = start + size
                    if size and data[stop:stop + 2] == b"\r\n":
                        out.append(data[start:stop])
                        pos = stop + 2
                        continue
            if state == 1:
                take = min(self.remaining, end - pos)
                out.append(data[pos:pos + take])
                pos += take
                self.remaining -= take
                if not self.remaining:
                    self.state = 2
            elif state == 0:
                nl = data.find(b"\n", pos, pos + MAX_CHUNK_LINE + 1)
                if nl < 0:
                    if end - pos > MAX_CHUNK_LINE:
                        raise httpx2.RemoteProtocolError(f"a chunk-size line longer than {MAX_CHUNK_LINE} bytes")
                    self.tail = data[pos:]
                    break
                line = data[pos:nl].rstrip(b"\r")
                digits = line.split(b";", 1)[0].strip(b" \t")
                if _HEX.fullmatch(digits) is None:
                    raise httpx2.RemoteProtocolError(f"illegal chunk size: {line[:100]!r}")
                pos = nl + 1
                self.remaining = int(digits, 16)
                self.state = 1 if self.remaining else 3
            elif state == 2:
                if data[pos:pos + 2] == b"\r\n":
                    pos += 2
                elif data[pos:pos + 1] == b"\n":
                    pos += 1
                elif end - pos == 1 and data[pos:pos + 1] == b"\r":
                    self.tail = b"\r"
                    break
                else:
                    raise httpx2.RemoteProtocolError("a chunk's data is not followed by CRLF")
                self.state = 0
            elif state == 3:
                nl = data.find(b"\n", pos)
                if nl < 0:  # an incomplete trailer line: kept, counted once complete
                    if self.trailers + end - pos > MAX_TRAILERS:
                        raise httpx2.RemoteProtocolError(f"trailers longer than {MAX_TRAILERS} bytes")
                    self.tail = data[pos:]
                    break
                self.trailers += nl + 1 - pos
                if self.trailers > MAX_TRAILERS:
                    raise httpx2.RemoteProtocolError(f"trailers longer than {MAX_TRAILERS} bytes")
                blank = nl == pos or (nl == pos + 1 and data[pos:nl] == b"\r")
                pos = nl + 1
                if blank:
                    self.state = 4
            else:  # bytes after the body's end: the body is whole, the connection is not reused
                self.extra = True
                break
        if len(out) == 1:
            return out[0]
        return b"".join(out)

