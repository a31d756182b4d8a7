"""A lean HTTP/1.1 transport under httpx2 for the direct path: the reply body in one piece per socket read.

Providers stream replies as server-sent events, one event per HTTP chunk. Through httpx2's default transport
every chunk is an h11 event (an object per chunk, parsed by h11's state machine) raised through httpcore2's
connection, pool and stream layers and httpx2's own: on the benchmark machine most of the direct path's
40-55 µs per event (11-21 µs through this module). That cost is h11's event model, not a setting; the
HTTP/1.1 a client needs for a streamed reply is small, so this module speaks it and replaces only the layer
below httpx2 (an ``httpx2.AsyncBaseTransport``): httpx2 still builds the request (auth, headers, redirects,
the timeout configuration), owns the ``Response``, and runs ``_limits``' bounded body reader and its
inflation, and whatever a user configures in httpx2 keeps its meaning. Below it:

- connections per (scheme, host, port), on asyncio's own transports (an ``asyncio.Protocol``: bytes land in
  a list, no stream reader), kept alive for reuse up to ``keepalive_expiry`` and ``max_keepalive_connections``,
  at most ``max_connections`` open (a request waits ``pool`` seconds for one, then ``PoolTimeout``). A pooled
  connection the server has closed (its end seen, or the socket readable while idle) is dropped; a request
  whose reused connection turns out dead before a byte of reply is sent again, once, on a fresh connection;
- TLS through the ``ssl.SSLContext`` httpx2 itself builds for the same ``verify``/``cert``/``trust_env``
  (``httpx2.create_ssl_context``: the same trust store), SNI from the host, ALPN ``http/1.1``;
- a body reader that decodes chunked, ``Content-Length`` and close-delimited bodies and yields everything one
  wake-up of the loop brought, decoded, as one ``bytes`` (no h11 event and no stream layer per chunk);
- bounds on what a server sends: the status line and each header line 16 KB, the head 100 KB (httpcore2's
  figure), at most 256 header fields, a chunk-size line 4 KB (and at most 16 hex digits), trailers 100 KB;
  at most 256 KB read ahead of the reader (the socket is paused beyond). A malformed head, chunk size or
  framing raises ``RemoteProtocolError`` with what was wrong;
- the timeouts of ``request.extensions["timeout"]`` (connect, including the TLS handshake; read, per wait;
  write; pool), raised as httpx2's ``ConnectTimeout``/``ReadTimeout``/``WriteTimeout``/``PoolTimeout``, and
  socket errors as ``ConnectError``/``ReadError``/``WriteError``: the classes (and texts where there is one)
  httpcore2 raises, so ``direct``'s retries and error texts are those of the default transport;
- the request written as h11 writes it: the request line, then httpx2's headers in their order and casing
  (a header h11 would refuse, a name not a token or a value with control characters or
  surrounding blanks, is refused with the same ``LocalProtocolError``), the body after, chunk-encoded when
  httpx2 says ``Transfer-Encoding: chunked``.

It serves only what it can serve exactly; anything else goes to httpx2's default transport, built on first
use: a scheme other than http/https, an ``Upgrade`` or ``CONNECT`` request, a ``trace`` extension.
:func:`client_transport` returns no transport at all (httpx2 then builds its own, proxies included) when a
proxy is given or configured in the environment (``HTTP(S)_PROXY``, ``ALL_PROXY``, as httpx2 reads them,
whatever ``NO_PROXY`` says), HTTP/2 or a Unix socket is asked for, and when ``PISCES_HTTP_TRANSPORT=httpx``
asks for httpx2's transport.

A response's connection goes back to the pool only when its body was read to the end; closing it earlier
closes the connection. ``aclose()`` closes every connection, idle or not.
"""

from __future__ import annotations

import asyncio
import os
import re
import ssl
import threading
import urllib.request
from typing import Any, AsyncIterator

import httpx2

from pisces.ai.providers._http11_wire import FIELD_VALUE, MAX_HEAD, TOKEN, Chunked, Conn, framing, parse_head
from pisces.ai.providers._memo import coalesced

_HEAD_END = re.compile(rb"\n\r?\n")  # the blank line after a head (CRLF or bare LF lines, as h11 reads)
_DISCONNECTED = "Server disconnected without sending a response."
_INCOMPLETE = "peer closed connection without sending complete message body: "


def mode() -> str:
    """``PISCES_HTTP_TRANSPORT``: ``httpx`` sends through httpx2's default transport; anything else
    (``auto``, the default) through this module where it can."""
    value = os.environ.get("PISCES_HTTP_TRANSPORT", "auto").strip().lower()
    return "httpx" if value == "httpx" else "auto"


def proxy_configured() -> bool:
    """A proxy in the environment, as httpx2 reads it (``urllib.request.getproxies``: http, https, all)."""
    found = urllib.request.getproxies()
    return any(found.get(scheme) for scheme in ("http", "https", "all"))


def client_transport(*, verify: Any = True, cert: Any = None, trust_env: bool = True,
                     limits: httpx2.Limits | None = None, http2: bool = False, proxy: Any = None,
                     uds: str | None = None) -> Http11Transport | None:
    """The transport for an ``httpx2.AsyncClient`` with these options, or None where httpx2's own must be
    used: the setting asks for it, a proxy is given or configured in the environment (when the client
    trusts it), HTTP/2 or a Unix socket is asked for."""
    if mode() == "httpx" or http2 or proxy is not None or uds is not None or (trust_env and proxy_configured()):
        return None
    return Http11Transport(verify=verify, cert=cert, trust_env=trust_env, limits=limits)


class _Retry(Exception):
    """A reused connection died before the reply's first byte: send again on a fresh one."""


class Http11Transport(httpx2.AsyncBaseTransport):
    """HTTP/1.1 over asyncio for an ``httpx2.AsyncClient`` (see the module's docstring)."""

    def __init__(self, *, verify: Any = True, cert: Any = None, trust_env: bool = True,
                 limits: httpx2.Limits | None = None) -> None:
        self.limits = limits or httpx2.Limits(max_connections=100, max_keepalive_connections=20)
        self.trust_env = trust_env
        self._tls_options = (verify, cert, trust_env)
        self._tls: ssl.SSLContext | None = None
        self._tls_lock = threading.Lock()
        self._fallback: httpx2.AsyncHTTPTransport | None = None
        self._idle: dict[tuple, list[Conn]] = {}
        self._open: set[Conn] = set()
        self._waiters: list[asyncio.Future] = []
        self._closed = False

    @property
    def ssl_context(self) -> ssl.SSLContext:
        """httpx2's own context for these options (its trust store, SSL_CERT_FILE/DIR when trusting the
        environment), ALPN http/1.1. Built when first needed (an https connection; ``warm_tls`` on the
        warm-up thread): loading the trust store is most of a client's cost, and a server on plain http
        (a local model server) never needs it."""
        if self._tls is None:
            with self._tls_lock:
                if self._tls is None:
                    verify, cert, trust_env = self._tls_options
                    context = httpx2.create_ssl_context(verify=verify, cert=cert, trust_env=trust_env)
                    context.set_alpn_protocols(["http/1.1"])
                    self._tls = context
        return self._tls

    def warm_tls(self) -> None:
        """Build the TLS context now (for a thread: OpenSSL reads the trust store without the interpreter)."""
        _ = self.ssl_context

    # -- httpx2.AsyncBaseTransport ---------------------------------------------------------------
    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        url = request.url
        scheme = url.raw_scheme
        if (scheme not in (b"http", b"https") or "trace" in request.extensions or request.method == "CONNECT"
                or "upgrade" in request.headers):
            return await self.fallback().handle_async_request(request)
        if self._closed:
            raise RuntimeError("The transport is closed")
        https = scheme == b"https"
        host = url.raw_host.decode("ascii")
        port = url.port or (443 if https else 80)
        sni = request.extensions.get("sni_hostname") or host
        timeouts = request.extensions.get("timeout") or {}
        payload = await _request_bytes(request)
        closing = request.headers.get("connection", "").strip().lower() == "close"
        key = (scheme, host, port, sni)
        for attempt in (0, 1):
            conn = await self._acquire(key, host, port, https, sni, timeouts)
            retry = attempt == 0 and conn.served > 0  # a kept-alive connection may have died idle
            try:
                try:
                    await conn.write(payload, timeouts.get("write"))
                except httpx2.WriteError:
                    if retry:
                        raise _Retry() from None
                    raise
                minor, status, reason, headers, rest = await _read_head(conn, timeouts.get("read"), retry)
                kind, length = framing(request.method.encode("ascii"), status, headers)
            except _Retry:
                self.discard(conn)
                continue
            except BaseException:
                self.discard(conn)
                raise
            break
        reusable = minor == 1 and not closing and kind != "close" and not any(
            n.lower() == b"connection" and b"close" in v.lower() for n, v in headers)
        body = _Body(self, conn, kind, length, rest, timeouts.get("read"), reusable)
        if kind == "none":
            body.finish(reusable and not rest)
        return httpx2.Response(status_code=status, headers=headers, stream=body,
                               extensions={"http_version": b"HTTP/1.%d" % minor, "reason_phrase": reason})

    async def aclose(self) -> None:
        self._closed = True
        conns = list(self._open)
        self._open.clear()
        self._idle.clear()
        for conn in conns:
            conn.close()
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(None)
        if conns:
            await asyncio.sleep(0)  # the loop closes the sockets on its next turn
        if self._fallback is not None:
            await self._fallback.aclose()

    def fallback(self) -> httpx2.AsyncHTTPTransport:
        """httpx2's default transport, same TLS context and limits, for what this one does not serve."""
        if self._fallback is None:
            self._fallback = httpx2.AsyncHTTPTransport(verify=self.ssl_context, trust_env=self.trust_env,
                                                       limits=self.limits)
        return self._fallback

    # -- the pool ---------------------------------------------------------------------------------
    async def _acquire(self, key: tuple, host: str, port: int, https: bool, sni: str, timeouts: dict) -> Conn:
        loop = asyncio.get_running_loop()
        idle = self._idle.get(key)
        expiry = self.limits.keepalive_expiry
        while idle:
            conn = idle.pop()
            if conn.loop is loop and (expiry is None or loop.time() - conn.idle_since <= expiry) and conn.usable():
                return conn
            self.discard(conn)
        limit = self.limits.max_connections
        while limit is not None and len(self._open) >= limit:
            victim = next((c for conns in self._idle.values() for c in conns), None)
            if victim is not None:
                self.discard(victim)
                continue
            waiter = loop.create_future()
            self._waiters.append(waiter)
            try:
                await asyncio.wait_for(waiter, timeouts.get("pool"))
            except asyncio.TimeoutError:
                raise httpx2.PoolTimeout("Timed out waiting for a connection from the pool") from None
            finally:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)
            if self._closed:
                raise RuntimeError("The transport is closed")
        conn = Conn(loop, key)
        self._open.add(conn)
        timeout = timeouts.get("connect")
        try:
            await asyncio.wait_for(loop.create_connection(
                lambda: conn, host, port, ssl=self.ssl_context if https else None,
                server_hostname=sni if https else None,
                ssl_handshake_timeout=timeout if https and timeout else None), timeout)
        except asyncio.TimeoutError:
            self.discard(conn)
            raise httpx2.ConnectTimeout("The connect operation timed out") from None
        except OSError as exc:
            self.discard(conn)
            raise httpx2.ConnectError(str(exc) or type(exc).__name__) from exc
        except BaseException:
            self.discard(conn)
            raise
        return conn

    def release(self, conn: Conn) -> None:
        """A connection whose response was read to the end: kept for the next request to its host."""
        if self._closed or conn not in self._open or conn.closed or conn.transport.is_closing():
            self.discard(conn)
            return
        conn.served += 1
        conn.idle_since = conn.loop.time()
        if conn.timer is not None:
            conn.timer.cancel()
            conn.timer = None
        self._idle.setdefault(conn.key, []).append(conn)
        keep = self.limits.max_keepalive_connections
        if keep is not None and sum(len(c) for c in self._idle.values()) > keep:
            oldest = min((c for conns in self._idle.values() for c in conns), key=lambda c: c.idle_since)
            self.discard(oldest)
        self._wake_one()

    def discard(self, conn: Conn) -> None:
        conn.close()
        self._open.discard(conn)
        idle = self._idle.get(conn.key)
        if idle is not None and conn in idle:
            idle.remove(conn)
            if not idle:
                del self._idle[conn.key]
        self._wake_one()

    def _wake_one(self) -> None:
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(None)
                return


async def _request_bytes(request: httpx2.Request) -> list[bytes]:
    """The request as h11 writes it: request line, httpx2's headers in order and casing, blank line, body
    (chunk-encoded when the headers say ``Transfer-Encoding: chunked``), in pieces written one after the
    other. Gathered once: a retry resends it. A large piece of the body stays the piece it came as (a long
    session's request is as large as its history: joining the head to it would copy all of it once more)."""
    parts = [request.method.encode("ascii"), b" ", request.url.raw_path, b" HTTP/1.1\r\n"]
    chunked = False
    for name, value in request.headers.raw:
        if TOKEN.fullmatch(name) is None:
            raise httpx2.LocalProtocolError(f"Illegal header name {name[:100]!r}")
        if FIELD_VALUE.fullmatch(value) is None:
            raise httpx2.LocalProtocolError(f"Illegal header value {value[:100]!r}")
        if name.lower() == b"transfer-encoding" and b"chunked" in value.lower():
            chunked = True
        parts += (name, b": ", value, b"\r\n")
    parts.append(b"\r\n")
    stream: Any = request.stream
    async for piece in stream:
        if not piece:
            continue
        parts += (b"%x\r\n" % len(piece), piece, b"\r\n") if chunked else (piece,)
    if chunked:
        parts.append(b"0\r\n\r\n")
    return coalesced(parts)


async def _read_head(conn: Conn, timeout: float | None, retry: bool) -> tuple[int, int, bytes, list, bytes]:
    """The final response head (1xx ones skipped) and the bytes after it; ``_Retry`` when ``retry`` and the
    connection ended before a byte of it."""
    buf = b""
    while True:
        data = conn.take()
        if data:
            buf += data
        found = _HEAD_END.search(buf)
        if found is not None:
            if found.start() > MAX_HEAD:
                raise httpx2.RemoteProtocolError(f"the response head is longer than {MAX_HEAD} bytes")
            minor, status, reason, headers = parse_head(buf[:found.start()])
            buf = buf[found.end():]
            if status == 101:
                raise httpx2.RemoteProtocolError("the server switched protocols, which was not asked for")
            if 100 <= status < 200:
                continue  # informational: the real head follows
            return minor, status, reason, headers, buf
        if len(buf) > MAX_HEAD:
            raise httpx2.RemoteProtocolError(f"the response head is longer than {MAX_HEAD} bytes")
        if conn.eof:
            if not buf:
                if retry:
                    raise _Retry()
                if conn.lost is not None:
                    raise httpx2.ReadError(str(conn.lost) or type(conn.lost).__name__)
                raise httpx2.RemoteProtocolError(_DISCONNECTED)
            raise httpx2.RemoteProtocolError("the server closed the connection in the middle of the response head")
        await conn.wait(timeout)


async def _nothing() -> AsyncIterator[bytes]:
    return
    yield b""  # an async generator that yields nothing


class _Body(httpx2.AsyncByteStream):
    """A response body: every wake-up's bytes, decoded, as one piece; the connection back to the pool at
    the end when it can serve again, closed otherwise (and when the body is closed before its end)."""

    def __init__(self, pool: Http11Transport, conn: Conn, kind: str, length: int, rest: bytes,
                 timeout: float | None, reusable: bool) -> None:
        self.pool = pool
        self.conn = conn
        self.kind = kind
        self.length = length
        self.rest = rest
        self.timeout = timeout
        self.reusable = reusable
        self.finished = False

    def finish(self, reuse: bool) -> None:
        if self.finished:
            return
        self.finished = True
        if reuse:
            self.pool.release(self.conn)
        else:
            self.pool.discard(self.conn)

    async def aclose(self) -> None:
        self.finish(False)

    def __aiter__(self) -> AsyncIterator[bytes]:
        # the decoding generator itself, not a generator around it: one async step a piece
        if self.finished:
            return _nothing()
        return {"chunked": self._chunked, "length": self._sized}.get(self.kind, self._until_close)()

    def _ended(self, what: str) -> Exception:
        lost = self.conn.lost
        if lost is not None:
            return httpx2.ReadError(str(lost) or type(lost).__name__)
        return httpx2.RemoteProtocolError(_INCOMPLETE + what)

    async def _chunked(self) -> AsyncIterator[bytes]:
        try:
            conn, timeout = self.conn, self.timeout
            decoder = Chunked()
            data, self.rest = self.rest, b""
            while True:
                if data:
                    out = decoder.feed(data)
                    if out:
                        yield out
                    if decoder.state == 4:
                        self.finish(self.reusable and not decoder.extra and not conn.chunks)
                        return
                elif conn.eof:
                    raise self._ended("incomplete chunked read")
                else:
                    await conn.wait(timeout)
                data = conn.take()
        except BaseException:
            self.finish(False)
            raise

    async def _sized(self) -> AsyncIterator[bytes]:
        try:
            conn, timeout = self.conn, self.timeout
            remaining = self.length
            data, self.rest = self.rest, b""
            extra = False
            while remaining:
                if data:
                    if len(data) > remaining:
                        data, extra = data[:remaining], True
                    remaining -= len(data)
                    yield data
                elif conn.eof:
                    raise self._ended(f"received {self.length - remaining} bytes, expected {self.length}")
                else:
                    await conn.wait(timeout)
                data = conn.take()
            self.finish(self.reusable and not extra and not data and not conn.chunks)
        except BaseException:
            self.finish(False)
            raise

    async def _until_close(self) -> AsyncIterator[bytes]:
        try:
            conn, timeout = self.conn, self.timeout
            data, self.rest = self.rest, b""
            while True:
                if data:
                    yield data
                elif conn.eof:
                    if conn.lost is not None:  # reset, not closed: the body may be cut
                        raise self._ended("connection lost")
                    break
                else:
                    await conn.wait(timeout)
                data = conn.take()
            self.finish(False)
        except BaseException:
            self.finish(False)
            raise
