"""A scripted HTTP server for tests: binds 127.0.0.1 on a free port, in a thread, and replays responses.

Each request pops the next scripted ``Reply`` (FIFO). A reply is a status, headers and a list of body
chunks; a chunk may be ``DROP`` (close the connection abruptly) or ``Stall(seconds)`` (send nothing for a
while), or an iterator of such chunks, expanded lazily while sending (so a hostile reply can be endless, or
50 MB long, without being built in memory first). A body holding an iterator is sent chunked whatever its
content type. Every request is recorded (method, path, headers, parsed JSON body), and every reply sent as
a ``Sent`` (body bytes written, and whether the client hung up before the end).

    with ScriptedServer() as srv:
        srv.push(Reply.sse([{"type": "message_start", ...}, ...]))
        client = SomeSDK(base_url=srv.url)
"""

from __future__ import annotations

import json
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

DROP = object()


@dataclass
class Stall:
    seconds: float


@dataclass
class Gate:
    """Send nothing more until ``event`` is set (at most ``timeout`` seconds, so a failing test cannot hang):
    a reply held mid-stream for exactly as long as a test needs."""
    event: threading.Event
    timeout: float = 30.0


@dataclass
class Reply:
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    chunks: list[Any] = field(default_factory=list)  # bytes | str | DROP | Stall | Gate
    chunk_delay: float = 0.0

    @classmethod
    def sse(cls, events: list[Any], *, named: bool = False, done: bool = False, delay: float = 0.0,
            extra: list[Any] | None = None) -> "Reply":
        """Server-sent events. ``events`` are dicts (JSON data lines) or raw strings, or DROP/Stall markers.
        With ``named``, each dict's ``type`` is also sent as the ``event:`` line (Anthropic, Responses)."""
        chunks: list[Any] = []
        for ev in events:
            if ev is DROP or isinstance(ev, (Stall, Gate)):
                chunks.append(ev)
            elif isinstance(ev, (bytes, str)):
                chunks.append(ev)
            else:
                data = json.dumps(ev)
                prefix = f"event: {ev.get('type')}\n" if named and isinstance(ev, dict) else ""
                chunks.append(f"{prefix}data: {data}\n\n")
        if done:
            chunks.append("data: [DONE]\n\n")
        chunks.extend(extra or [])
        return cls(status=200, headers={"content-type": "text/event-stream", "cache-control": "no-cache"},
                   chunks=chunks, chunk_delay=delay)

    @classmethod
    def json(cls, status: int, body: Any, headers: dict[str, str] | None = None) -> "Reply":
        h = {"content-type": "application/json", "x-should-retry": "false"}
        h.update(headers or {})
        return cls(status=status, headers=h, chunks=[json.dumps(body)])


@dataclass
class Sent:
    bytes: int = 0
    client_hung_up: bool = False
    finished: bool = False


def _expand(chunks: list[Any]):
    for chunk in chunks:
        if chunk is DROP or isinstance(chunk, (bytes, str, Stall, Gate)):
            yield chunk
        else:
            yield from chunk  # an iterator of chunks


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: Any
    raw: bytes = b""


class ScriptedServer:
    def __init__(self) -> None:
        self.replies: list[Reply | Callable[[Recorded], Reply]] = []
        self.fallback: Reply | Callable[[Recorded], Reply] | None = None  # answers when nothing is queued
        self.requests: list[Recorded] = []
        self.sent: list[Sent] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> "ScriptedServer":
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a: Any) -> None:  # quiet
                pass

            def _handle(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = raw.decode("utf-8", "replace")
                headers = {k.lower(): v for k, v in self.headers.items()}
                rec = Recorded(self.command, self.path, headers, body, raw)
                with outer._lock:
                    outer.requests.append(rec)
                    reply = outer.replies.pop(0) if outer.replies else outer.fallback
                if callable(reply):
                    reply = reply(rec)
                if reply is None:
                    reply = Reply.json(500, {"error": {"message": "scripted server: no reply queued"}})
                self._send(reply)

            def _send(self, reply: Reply) -> None:
                sent = Sent()
                with outer._lock:
                    outer.sent.append(sent)
                self.send_response(reply.status)
                for k, v in reply.headers.items():
                    self.send_header(k, v)
                streaming = reply.headers.get("content-type", "").startswith("text/event-stream") or any(
                    not (c is DROP or isinstance(c, (bytes, str, Stall, Gate))) for c in reply.chunks)
                if streaming:
                    self.send_header("transfer-encoding", "chunked")
                    self.send_header("connection", "close")
                    self.end_headers()
                    try:
                        for chunk in _expand(reply.chunks):
                            if chunk is DROP:
                                self.wfile.flush()
                                self.connection.shutdown(socket.SHUT_RDWR)
                                self.close_connection = True
                                return
                            if isinstance(chunk, Stall):
                                time.sleep(chunk.seconds)
                                continue
                            if isinstance(chunk, Gate):
                                chunk.event.wait(chunk.timeout)
                                continue
                            data = chunk.encode() if isinstance(chunk, str) else chunk
                            if not data:
                                continue
                            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                            self.wfile.flush()
                            sent.bytes += len(data)
                            if reply.chunk_delay:
                                time.sleep(reply.chunk_delay)
                        self.wfile.write(b"0\r\n\r\n")
                        self.wfile.flush()
                        sent.finished = True
                    except (BrokenPipeError, ConnectionResetError, OSError):
                        sent.client_hung_up = True
                    self.close_connection = True
                else:
                    data = b"".join(c.encode() if isinstance(c, str) else c for c in reply.chunks
                                    if isinstance(c, (str, bytes)))
                    self.send_header("content-length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    sent.bytes, sent.finished = len(data), True

            do_POST = _handle
            do_GET = _handle

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02},
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> "ScriptedServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # -- scripting --------------------------------------------------------------------------
    @property
    def port(self) -> int:
        assert self._server is not None
        return self._server.server_address[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def push(self, *replies: Reply | Callable[[Recorded], Reply]) -> None:
        with self._lock:
            self.replies.extend(replies)
