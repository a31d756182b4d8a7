"""``providers.http11``: the direct path's HTTP/1.1 transport against real sockets on 127.0.0.1 (servers that
send exactly the bytes each test scripts): body framings, one piece per read, keep-alive and its failures,
hostile heads and chunk sizes, timeouts, refused ports, TLS with a CA made here, fallbacks, and no socket
left open."""

from __future__ import annotations

import asyncio
import datetime
import gc
import gzip
import os
import socket
import ssl
import tracemalloc
import warnings
from typing import Any, Awaitable, Callable

import httpx2
import pytest

from pisces.ai.providers import direct, http11
from pisces.ai.providers._http11_wire import Chunked
from pisces.ai.providers._limits import body_chunks, http_client_options
from pisces.ai.providers._memo import LARGE, JsonBody, encoded

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter, int], Awaitable[None]]


class RawServer:
    """A 127.0.0.1 server running ``handler(reader, writer, index)`` for each connection it accepts."""

    def __init__(self, handler: Handler, ssl_context: ssl.SSLContext | None = None) -> None:
        self.handler = handler
        self.ssl_context = ssl_context
        self.writers: list[asyncio.StreamWriter] = []
        self.requests: list[bytes] = []
        self.closed_by_client: list[int] = []
        self.tasks: set[asyncio.Task] = set()

    async def __aenter__(self) -> RawServer:
        self.server = await asyncio.start_server(self._on, "127.0.0.1", 0, ssl=self.ssl_context)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self.server.close()
        for writer in self.writers:
            writer.transport.abort()
        for task in list(self.tasks):
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        await self.server.wait_closed()

    @property
    def url(self) -> str:
        return f"{'https' if self.ssl_context else 'http'}://127.0.0.1:{self.port}"

    async def _on(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        index = len(self.writers)
        self.writers.append(writer)
        task = asyncio.current_task()
        assert task is not None
        self.tasks.add(task)
        try:
            await self.handler(reader, writer, index)
        except (ConnectionError, asyncio.IncompleteReadError, ssl.SSLError, asyncio.CancelledError):
            pass  # the client hung up, or the test is over (a handler's end, not the test's)
        finally:
            self.tasks.discard(task)
            writer.transport.abort()

    async def read_request(self, reader: asyncio.StreamReader) -> bytes | None:
        """One request (head and Content-Length body), recorded; None when the client closed instead."""
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:
            return None
        length = 0
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":", 1)[1])
        request = head + (await reader.readexactly(length) if length else b"")
        self.requests.append(request)
        return request


def chunk(data: bytes) -> bytes:
    return b"%x\r\n" % len(data) + data + b"\r\n"


def client(**kw: Any) -> httpx2.AsyncClient:
    transport = http11.Http11Transport(verify=kw.pop("verify", True), limits=kw.pop("limits", None))
    return httpx2.AsyncClient(transport=transport, **kw)


async def fetch(c: httpx2.AsyncClient, url: str, **kw: Any) -> tuple[httpx2.Response, list[bytes]]:
    pieces = []
    async with c.stream(kw.pop("method", "GET"), url, **kw) as response:
        async for piece in response.aiter_raw():
            pieces.append(piece)
    return response, pieces


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


# ---------------------------------------------------------------------------------------------
# Body framings
# ---------------------------------------------------------------------------------------------
def test_chunked_decoder_gives_one_piece_for_many_chunks_and_survives_any_split():
    events = [b"data: %d\n\n" % i for i in range(100)]
    wire = b"".join(chunk(e) for e in events) + b"0\r\n\r\n"
    whole = Chunked()
    assert whole.feed(wire) == b"".join(events)  # 100 chunks, one piece
    assert whole.state == 4 and not whole.extra
    for step in (1, 2, 3, 7, 64):  # every split of sizes, CRLFs and data across reads
        d = Chunked()
        out = b"".join(d.feed(wire[i:i + step]) for i in range(0, len(wire), step))
        assert out == b"".join(events) and d.state == 4


async def test_many_tiny_chunks_come_whole_and_fewer_pieces_than_chunks():
    events = [b"e%d;" % i for i in range(500)]

    async def handler(reader, writer, index):
        await srv.read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
        for i in range(0, 500, 50):  # ten writes of fifty chunks each
            writer.write(b"".join(chunk(e) for e in events[i:i + 50]))
            await writer.drain()
            await asyncio.sleep(0.01)
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        await reader.read()

    async with RawServer(handler) as srv, client() as c:
        response, pieces = await fetch(c, srv.url + "/s")
    assert response.status_code == 200
    assert b"".join(pieces) == b"".join(events)
    assert len(pieces) <= 50  # bytes of one read come as one piece, not one a chunk


async def test_a_chunk_split_across_reads():
    parts = [b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1", b"0\r\nhello ", b"world 1234",
             b"\r", b"\n5\r\nab", b"cde\r\n0\r", b"\n\r\n"]

    async def handler(reader, writer, index):
        await srv.read_request(reader)
        for part in parts:
            writer.write(part)
            await writer.drain()
            await asyncio.sleep(0.02)
        await reader.read()

    async with RawServer(handler) as srv, client() as c:
        response, pieces = await fetch(c, srv.url)
    assert b"".join(pieces) == b"hello world 1234abcde"


async def test_content_length_and_close_delimited_bodies():
    async def handler(reader, writer, index):
        request = await srv.read_request(reader)
        if b"/length" in request:
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 11\r\nConnection: close\r\n\r\nhello")
            await writer.drain()
            await asyncio.sleep(0.02)
            writer.write(b" world")
        else:
            writer.write(b"HTTP/1.1 200 OK\r\n\r\nuntil the ")
            await writer.drain()
            await asyncio.sleep(0.02)
            writer.write(b"end")
        await writer.drain()
        writer.close()

    async with RawServer(handler) as srv, client() as c:
        response = await c.get(srv.url + "/length")
        assert response.content == b"hello world"
        response = await c.get(srv.url + "/close")
        assert response.content == b"until the end"
        assert response.http_version == "HTTP/1.1" and response.reason_phrase == "OK"


async def test_a_content_length_body_cut_short_is_a_remote_protocol_error():
    async def handler(reader, writer, index):
        await srv.read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly this")
        await writer.drain()
        writer.close()

    async with RawServer(handler) as srv, client() as c:
        with pytest.raises(httpx2.RemoteProtocolError, match="received 9 bytes, expected 100"):
            await c.get(srv.url)


async def test_gzip_body_is_inflated_by_the_bounded_reader():
    text = b"data: " + b"x" * 5000 + b"\n\n"
    packed = gzip.compress(text)

    async def handler(reader, writer, index):
        await srv.read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-encoding: gzip\r\n"
                     b"transfer-encoding: chunked\r\n\r\n")
        for i in range(0, len(packed), 10):
            writer.write(chunk(packed[i:i + 10]))
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        await reader.read()

    async with RawServer(handler) as srv, client(**http_client_options()) as c:
        async with c.stream("GET", srv.url) as response:
            body = b"".join([piece async for piece in body_chunks(response)])
    assert body == text
    assert b"accept-encoding: gzip, deflate" in srv.requests[0].lower()


async def test_informational_heads_are_skipped_and_folded_headers_joined():
    async def handler(reader, writer, index):
        await srv.read_request(reader)
        writer.write(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"
                     b"HTTP/1.1 201 Created\nX-Folded: one\r\n two\r\nContent-Length: 4\n\r\nbody")
        await writer.drain()
        await reader.read()

    async with RawServer(handler) as srv, client() as c:
        response = await c.get(srv.url)
    assert (response.status_code, response.content) == (201, b"body")
    assert response.headers["x-folded"] == "one two" and "link" not in response.headers


async def test_a_streamed_request_body_is_sent_chunked():
    received = []

    async def handler(reader, writer, index):
        head = await reader.readuntil(b"\r\n\r\n")
        received.append(head + await reader.readuntil(b"0\r\n\r\n"))
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
        await writer.drain()
        await reader.read()

    async def body():
        yield b"hello "
        yield b"world"

    async with RawServer(handler) as srv, client() as c:
        assert (await c.post(srv.url, content=body())).status_code == 200
    assert b"\r\nTransfer-Encoding: chunked\r\n" in received[0]
    assert received[0].endswith(b"\r\n\r\n6\r\nhello \r\n5\r\nworld\r\n0\r\n\r\n")


# ---------------------------------------------------------------------------------------------
# Keep-alive
# ---------------------------------------------------------------------------------------------
async def test_keep_alive_reuses_one_connection():
    async def handler(reader, writer, index):
        while await srv.read_request(reader) is not None:
            writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunk(b"hi") + b"0\r\n\r\n")
            await writer.drain()

    async with RawServer(handler) as srv, client() as c:
        for _ in range(3):
            response = await c.post(srv.url + "/p?q=1", content=b'{"a":1}')
            assert response.content == b"hi"
    assert len(srv.writers) == 1 and len(srv.requests) == 3
    assert srv.requests[0].startswith(b"POST /p?q=1 HTTP/1.1\r\nHost: 127.0.0.1:")
    assert srv.requests[0].endswith(b"\r\nContent-Length: 7\r\n\r\n{\"a\":1}")


async def test_an_idle_connection_the_server_closed_is_not_used():
    closed = asyncio.Event()

    async def handler(reader, writer, index):
        await srv.read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        await writer.drain()
        if index == 0:
            writer.close()  # after the reply, without saying so in a header
            closed.set()
        else:
            await reader.read()

    async with RawServer(handler) as srv, client() as c:
        assert (await c.get(srv.url)).content == b"ok"
        await asyncio.wait_for(closed.wait(), 10)
        await asyncio.sleep(0.05)
        idle = [conn for conns in c._transport._idle.values() for conn in conns]  # the kept connection
        assert len(idle) == 1 and not idle[0].usable()  # seen closed before any request is sent on it
        assert (await c.get(srv.url)).content == b"ok"
    assert len(srv.writers) == 2


async def _ok_then_dies_unanswered(srv: RawServer, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                                   index: int) -> None:
    """The first connection answers "ok" to one request and dies without a reply on the next; any later
    connection answers "fresh"."""
    await srv.read_request(reader)
    if index == 0:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        await writer.drain()
        await srv.read_request(reader)  # the second request: the connection dies without a reply
        writer.transport.abort()
        return
    writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfresh")
    await writer.drain()
    await reader.read()


async def test_a_kept_connection_that_dies_on_the_next_request_is_retried_once_on_a_fresh_one():
    async with RawServer(lambda r, w, i: _ok_then_dies_unanswered(srv, r, w, i)) as srv, client() as c:
        assert (await c.get(srv.url)).content == b"ok"
        assert (await c.get(srv.url)).content == b"fresh"
    assert len(srv.writers) == 2 and len(srv.requests) == 3


async def test_a_large_body_goes_after_its_head_intact_and_again_whole_on_the_retry():
    """A body larger than one write is written on its own after the head (not joined to it first); what
    arrives is the same request byte for byte, on the first connection and again on the fresh one after the
    kept connection died, and a small request still goes in a single piece."""
    body = bytes(range(256)) * (3 * LARGE // 256 + 7)  # a few times the one-write size, odd length

    # the large request goes on the kept connection, which dies unanswered, and again on a fresh one
    async with RawServer(lambda r, w, i: _ok_then_dies_unanswered(srv, r, w, i)) as srv, client() as c:
        assert len(await http11._request_bytes(c.build_request("POST", srv.url, content=b"tiny"))) == 1
        parts = await http11._request_bytes(c.build_request("POST", srv.url + "/big", content=body))
        assert len(parts) == 2 and parts[1] is body  # the body itself, not a copy joined to the head
        # a body in pieces (chunked here): each large piece as it is, what lies between joined
        pieces = direct._Pieces([b"s", body, b"t", body])
        parts = await http11._request_bytes(c.build_request("POST", srv.url, content=pieces))
        assert len(parts) == 5 and parts[1] is body and parts[3] is body
        assert b"".join(parts).partition(b"\r\n\r\n")[2] == b"".join(chunk(p) for p in pieces.parts) + b"0\r\n\r\n"
        assert (await c.post(srv.url + "/first", content=b"x")).content == b"ok"
        assert (await c.post(srv.url + "/big", content=body)).content == b"fresh"
    assert len(srv.writers) == 2 and len(srv.requests) == 3
    for request in srv.requests[1:]:  # the one that died and the one sent again
        head, _, got = request.partition(b"\r\n\r\n")
        assert head.startswith(b"POST /big HTTP/1.1\r\n") and f"Content-Length: {len(body)}".encode() in head
        assert got == body


async def test_a_fresh_connection_that_closes_without_a_reply_is_an_error_not_a_retry():
    async def handler(reader, writer, index):
        await srv.read_request(reader)
        writer.close()

    async with RawServer(handler) as srv, client() as c:
        with pytest.raises(httpx2.RemoteProtocolError, match="Server disconnected without sending a response"):
            await c.get(srv.url)
    assert len(srv.writers) == 1


# ---------------------------------------------------------------------------------------------
# Hostile servers
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("size_line", [b"zz", b"-1", b"0x10", b"1_0", b" ", b"1" * 17, b"1" * 5000])
async def test_malformed_chunk_sizes_are_remote_protocol_errors(size_line):
    async def handler(reader, writer, index):
        await srv.read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunk(b"ok") + size_line + b"\r\n")
        await writer.drain()
        await reader.read()

    async with RawServer(handler) as srv, client() as c:
        with pytest.raises(httpx2.RemoteProtocolError, match="chunk"):
            await c.get(srv.url)


@pytest.mark.parametrize("head", [b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
                                  b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
                                  b"HTTP/1.1 200 OK\r\nContent-Length: -5\r\n\r\n",
                                  b"HTTP/2 200 OK\r\n\r\n", b"SSH-2.0-OpenSSH\r\n\r\n",
                                  b"HTTP/1.1 200 OK\r\nbad header\r\n\r\n",
                                  b"HTTP/1.1 200 OK\r\n" + b"X-A: 1\r\n" * 300 + b"\r\n",
                                  b"HTTP/1.1 200 OK\r\nab\r\nc\r\n" + b"de" * 0 + b"\r\n"])
async def test_bad_heads_and_framing_are_remote_protocol_errors(head):
    async def handler(reader, writer, index):
        await srv.read_request(reader)
        writer.write(head)
        await writer.drain()
        await reader.read()

    async with RawServer(handler) as srv, client() as c:
        with pytest.raises(httpx2.RemoteProtocolError):
            await c.get(srv.url)


async def test_an_endless_header_stops_at_the_bound_in_bounded_memory():
    block = b"a" * 65536
    sent = []

    async def handler(reader, writer, index):
        await srv.read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nX-Huge: ")
        for _ in range(800):  # up to 50 MB, unless the client hangs up first
            writer.write(block)
            await writer.drain()
            sent.append(len(block))

    tracemalloc.start()
    try:
        async with RawServer(handler) as srv, client() as c:
            with pytest.raises(httpx2.RemoteProtocolError, match="longer than"):
                await c.get(srv.url)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert sum(sent) < 10 * 1024 * 1024  # the client hung up early
    assert peak < 8 * 1024 * 1024


async def test_a_stalled_server_is_a_read_timeout():
    async def handler(reader, writer, index):
        await srv.read_request(reader)
        if b"/body" in srv.requests[-1]:
            writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunk(b"first"))
            await writer.drain()
        await reader.read()  # then nothing

    async with RawServer(handler) as srv, client(timeout=httpx2.Timeout(5.0, read=0.3)) as c:
        with pytest.raises(httpx2.ReadTimeout):
            await c.get(srv.url + "/head")
        pieces = []
        with pytest.raises(httpx2.ReadTimeout):
            async with c.stream("GET", srv.url + "/body") as response:
                async for piece in response.aiter_raw():
                    pieces.append(piece)
        assert pieces == [b"first"]


async def test_the_read_timeout_is_per_wait_a_slow_server_that_keeps_sending_is_not_stalled():
    async def handler(reader, writer, index):
        await srv.read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        for i in range(9):  # 2 s in all, never more than 0.25 s without a byte
            writer.write(chunk(b"%d," % i))
            await writer.drain()
            await asyncio.sleep(0.25)
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        await reader.read()

    async with RawServer(handler) as srv, client(timeout=httpx2.Timeout(5.0, read=1.5)) as c:
        response = await c.get(srv.url)
    assert response.content == b"".join(b"%d," % i for i in range(9))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def test_a_refused_port_is_a_connect_error_and_through_direct_a_connection_failure(monkeypatch):
    port = _free_port()
    async with client() as c:
        with pytest.raises(httpx2.ConnectError):
            await c.get(f"http://127.0.0.1:{port}/")
    attempts = []
    monkeypatch.setattr(direct, "retry_delay", lambda taken, headers=None: attempts.append(taken) or 0.0)
    with pytest.raises(direct.ConnectionFailure) as caught:
        await direct.post_stream(f"http://127.0.0.1:{port}/v1/chat/completions", {}, {"a": 1}, max_retries=2,
                                 timeout=None)
    assert attempts == [0, 1]
    assert isinstance(caught.value.__cause__, httpx2.ConnectError)


async def test_pool_timeout_when_every_connection_is_busy():
    async def handler(reader, writer, index):
        await srv.read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunk(b"busy"))
        await writer.drain()
        await reader.read()

    limits = httpx2.Limits(max_connections=1, max_keepalive_connections=1)
    async with RawServer(handler) as srv, client(limits=limits, timeout=httpx2.Timeout(5.0, pool=0.2)) as c:
        async with c.stream("GET", srv.url):
            with pytest.raises(httpx2.PoolTimeout):
                await c.get(srv.url)


async def test_illegal_request_header_is_a_local_protocol_error():
    async def handler(reader, writer, index):
        await reader.read()

    async with RawServer(handler) as srv, client() as c:
        with pytest.raises(httpx2.LocalProtocolError):
            await c.get(srv.url, headers={"X-Bad": "a\x01b"})


# ---------------------------------------------------------------------------------------------
# TLS
# ---------------------------------------------------------------------------------------------
def _certificates(tmp_path) -> tuple[str, str, str]:
    """A CA, and a certificate it signs for localhost and 127.0.0.1: (ca.pem, server.pem, server.key)."""
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "pisces test CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
          .not_valid_after(now + datetime.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=False,
                                       data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                       crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
          .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1)).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                                        x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256()))
    paths = [str(tmp_path / n) for n in ("ca.pem", "server.pem", "server.key")]
    with open(paths[0], "wb") as f:
        f.write(ca.public_bytes(serialization.Encoding.PEM))
    with open(paths[1], "wb") as f:
        f.write(cert.public_bytes(serialization.Encoding.PEM))
    with open(paths[2], "wb") as f:
        f.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption()))
    return paths[0], paths[1], paths[2]


async def test_tls_with_a_ca_trusted_through_verify_sends_sni_and_alpn(tmp_path):
    ca, cert, key = _certificates(tmp_path)
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(cert, key)
    server_ctx.set_alpn_protocols(["h2", "http/1.1"])
    names: list[str | None] = []
    server_ctx.sni_callback = lambda sslobj, name, ctx: names.append(name)
    alpn = []

    async def handler(reader, writer, index):
        alpn.append(writer.get_extra_info("ssl_object").selected_alpn_protocol())
        while await srv.read_request(reader) is not None:
            writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunk(b"secure") + b"0\r\n\r\n")
            await writer.drain()

    async with RawServer(handler, server_ctx) as srv:
        url = f"https://localhost:{srv.port}/"
        async with client(verify=ssl.create_default_context(cafile=ca)) as c:
            assert (await c.get(url)).content == b"secure"
            assert (await c.get(url)).content == b"secure"
        assert names == ["localhost"] and alpn == ["http/1.1"] and len(srv.writers) == 1
        async with client() as c:  # the default trust store does not know this CA
            with pytest.raises(httpx2.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
                await c.get(url)


async def test_plain_http_never_builds_a_tls_context_and_https_builds_it_once(tmp_path):
    async def handler(reader, writer, index):
        while await srv.read_request(reader) is not None:
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            await writer.drain()

    async with RawServer(handler) as srv, client() as c:
        assert (await c.get(srv.url + "/")).content == b"ok"
        assert c._transport._tls is None  # a local model server on http: no trust store loaded
    ca, cert, key = _certificates(tmp_path)
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(cert, key)
    async with RawServer(handler, server_ctx) as srv, client(verify=ssl.create_default_context(cafile=ca)) as c:
        assert (await c.get(f"https://localhost:{srv.port}/")).content == b"ok"
        built = c._transport._tls
        assert built is not None
        assert (await c.get(f"https://localhost:{srv.port}/")).content == b"ok"
        assert c._transport._tls is built


async def test_a_tls_handshake_that_never_comes_is_a_connect_timeout():
    async def handler(reader, writer, index):
        await reader.read()  # accepts the connection, never answers the ClientHello

    async with RawServer(handler) as srv:
        async with client(timeout=httpx2.Timeout(5.0, connect=0.3)) as c:
            with pytest.raises(httpx2.ConnectTimeout):
                await c.get(f"https://127.0.0.1:{srv.port}/")


# ---------------------------------------------------------------------------------------------
# Fallbacks and closing
# ---------------------------------------------------------------------------------------------
def test_httpx2s_own_transport_for_a_proxy_the_setting_http2_or_a_unix_socket(monkeypatch):
    for key in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.delenv("PISCES_HTTP_TRANSPORT", raising=False)
    assert isinstance(http11.client_transport(), http11.Http11Transport)
    assert http11.client_transport(http2=True) is None
    assert http11.client_transport(uds="/tmp/x.sock") is None
    assert http11.client_transport(proxy="http://127.0.0.1:1") is None
    monkeypatch.setenv("PISCES_HTTP_TRANSPORT", "httpx")
    assert http11.client_transport() is None
    monkeypatch.setenv("PISCES_HTTP_TRANSPORT", "auto")
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:1")
    assert http11.client_transport() is None
    assert http11.client_transport(trust_env=False) is not None


async def test_direct_client_uses_the_transport_and_falls_back_under_a_proxy(monkeypatch):
    for key in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(key, raising=False)
    c = direct._new_client()
    assert isinstance(c._transport, http11.Http11Transport)  # which transport httpx2 holds
    await c.aclose()
    monkeypatch.setenv("ALL_PROXY", "http://127.0.0.1:1")
    c = direct._new_client()
    assert isinstance(c._transport, httpx2.AsyncHTTPTransport)
    await c.aclose()


async def test_other_schemes_and_traced_requests_go_to_httpx2s_transport():
    async def handler(reader, writer, index):
        await srv.read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
        await writer.drain()

    traced = []

    async def trace(name, info):
        traced.append(name)

    async with RawServer(handler) as srv:
        transport = http11.Http11Transport()
        async with httpx2.AsyncClient(transport=transport) as c:
            response = await c.get(srv.url, extensions={"trace": trace})
            assert response.content == b"ok"
            assert transport._fallback is not None  # httpx2's transport served it
            assert traced  # httpcore2's trace hook ran: it was httpx2's transport
            with pytest.raises(httpx2.TransportError):  # a ws:// URL: httpx2's transport and its error
                await transport.handle_async_request(httpx2.Request("GET", f"ws://127.0.0.1:{_free_port()}/"))


async def test_closing_early_drops_the_connection_and_aclose_leaks_no_socket():
    hung_up = asyncio.Event()

    async def handler(reader, writer, index):
        while (request := await srv.read_request(reader)) is not None:
            if b"/endless" in request:
                writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
                while True:
                    writer.write(chunk(b"more"))
                    await writer.drain()
                    await asyncio.sleep(0.005)
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            await writer.drain()
        hung_up.set()

    gc.collect()
    before = open_fds()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        async with RawServer(handler) as srv:
            c = client()
            async with c.stream("GET", srv.url + "/endless") as response:
                async for _ in response.aiter_raw():
                    break  # closed before its end: the connection must go
            assert (await c.get(srv.url)).content == b"ok"  # a fresh connection, kept idle
            assert len(srv.writers) == 2
            await c.aclose()
            await asyncio.wait_for(hung_up.wait(), 10)  # the idle one was closed by aclose
        await asyncio.sleep(0.05)
        del c, response
        gc.collect()
    assert open_fds() == before
    assert not [w for w in caught if issubclass(w.category, ResourceWarning)]


@pytest.mark.parametrize("transport", ["http11", "httpx2"])
async def test_a_body_in_pieces_arrives_whole_framed_by_its_length_and_again_on_a_retry(monkeypatch, transport):
    """A long session's body (a ``JsonBody`` whose kept JSON has large pieces) goes out in those pieces, not
    joined: what the server reads is the body's JSON byte for byte, framed by ``Content-Length`` (not
    chunked), through this transport and httpx2's own, and the same again when a 500 is retried."""
    messages = [{"role": "user", "content": "a" * 100_000}, {"role": "assistant", "content": "b"},
                {"role": "user", "content": "é" * 70_000}]
    body = JsonBody(model="m", messages=messages, stream=True)
    texts = [encoded(m) for m in messages]
    body.keep_texts("messages", texts)
    parts = body.to_parts()
    assert len(parts) == 5 and parts[1] is texts[0] and parts[3] is texts[2]  # the large pieces as they are
    whole = encoded(dict(body))

    async def handler(reader, writer, index):
        while await srv.read_request(reader) is not None:
            if len(srv.requests) == 1:
                writer.write(b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 4\r\n\r\nbusy")
            else:
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            await writer.drain()

    async with RawServer(handler) as srv, (client() if transport == "http11" else httpx2.AsyncClient()) as c:
        monkeypatch.setattr(direct, "_client", lambda: c)
        monkeypatch.setattr(direct, "retry_delay", lambda taken, headers=None: 0.0)
        response = await direct.post_stream(srv.url + "/v1/chat/completions", {"X-Test": "1"}, body,
                                            max_retries=2, timeout=None)
        assert await response.aread() == b"ok"
        await response.aclose()
    assert len(srv.requests) == 2
    for request in srv.requests:
        head, _, got = request.partition(b"\r\n\r\n")
        assert got == whole
        assert f"content-length: {len(whole)}\r\n".encode() in head.lower() + b"\r\n"
        assert b"transfer-encoding" not in head.lower()
