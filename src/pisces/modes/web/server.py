"""The web mode's HTTP + WebSocket server (the ``websockets`` library; see docs/web.md for why).

Routes (GET only):

    /health            {"status":"ok","clients":N}                      no token needed
    /login             the login page                                   no token needed
    /pair?token=T      a pairing token (or the access token) -> a page (pair.js) that registers this browser
    /pair/register     ?ticket=&origin=&pub= (or &secret=): remember this browser -> {"id": …}
    /challenge         {"challenge": …}: one-time, for a key device's proof     no token needed
    /                  the browser UI (index.html)                      no token needed (the package's files)
    /static/<file>     the UI's files; /vendor/<file> the vendored libraries   no token needed
    /auth              {"paired": true}                                 bearer token or device secret
    /export            the current session as pisces' HTML export       bearer token or device secret
    /ws                the WebSocket: one client of the host            bearer token, or a paired browser's
                                                                         proof as a subprotocol (auth.py)

No cookie is set or read: a cookie goes to every port of a host, so it would reach other servers on 127.0.0.1.
Each WebSocket message is one JSON object, the same frames as stdio: commands in; responses, events and
requests out. ``/ws?since=N&stream=ID`` resumes after frame N of stream ID (``profile=`` sets the stream
profile from the first frame on, ``approvals=typed`` asks for typed approval frames).
"""

from __future__ import annotations

import asyncio
import errno
import json
import os
import sys
import weakref
from pathlib import Path
from typing import Any, Sequence
from urllib.parse import parse_qs, unquote, urlsplit

from websockets.asyncio.server import ServerConnection, serve
from websockets.datastructures import Headers
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response
from websockets.typing import Subprotocol

from pisces.core.export_html import ExportError, render_session
from pisces.modes.host.encoding import DELTAS, PROFILES
from pisces.modes.host.framing import parse_line
from pisces.modes.host.host import Client, Host, with_seq
from pisces.modes.web.auth import PAIRING_TTL_S, SUBPROTOCOL, WebAuth, select_subprotocol
from pisces.modes.web.devices import DeviceStore
from pisces.modes.web.info import h_web_info, lan_address

STATIC = Path(__file__).resolve().parent / "static"
EXPORT_VENDOR = Path(__file__).resolve().parent.parent.parent / "core" / "export_html" / "vendor"
VENDOR_DIRS = (STATIC / "vendor", EXPORT_VENDOR)  # our own vendored files, then the HTML export's
MAX_MESSAGE = 64 * 1024 * 1024  # a prompt with images
MAX_QUEUED = 64 * 1024 * 1024  # a client this far behind is dropped (it can reconnect and resume)
FLUSH_DELAY_S = 0.005  # frames produced within this window go out in one write (a stream of small deltas)
FLUSH_BYTES = 256 * 1024  # ... unless this much is waiting already
WATCH_S = 0.5  # how often the devices file is checked for a revocation by another process
REVOKED = 4403  # the close code of a socket whose device was revoked

CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; "
       "connect-src 'self'; font-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'self'; "
       "frame-ancestors 'none'")
TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
         ".css": "text/css; charset=utf-8", ".svg": "image/svg+xml", ".png": "image/png",
         ".json": "application/json", ".txt": "text/plain; charset=utf-8", ".md": "text/plain; charset=utf-8",
         ".webmanifest": "application/manifest+json"}


def ws_frame(frame: bytes) -> bytes:
    """One encoded frame (``{...}\n``) as a WebSocket text message from the server: FIN, opcode 1, unmasked,
    no extension (the server negotiates none), the JSON without its newline (RFC 6455 section 5.2)."""
    n = len(frame) - 1
    if n < 126:
        head = bytes((0x81, n))
    elif n < 65536:
        head = b"\x81\x7e" + n.to_bytes(2, "big")
    else:
        head = b"\x81\x7f" + n.to_bytes(8, "big")
    return head + frame[:-1]


class WebClient(Client):
    """One WebSocket. Frames are queued and written by the connection's own task, so a slow browser never
    holds up the session or the other clients; one that falls ``MAX_QUEUED`` bytes behind is disconnected
    (it reconnects and resumes from the replay buffer, or gets a snapshot).

    A broadcast frame is framed for the wire once, for every WebSocket client alike (``deliver``), and each
    client's task writes everything queued since its last write in one go, inside websockets' ``send_context``
    (which checks the connection is open, and drains). A batch is what was produced within ``FLUSH_DELAY_S``
    (5 ms) of its first frame, or ``FLUSH_BYTES``: a reply of 2000 small deltas is a handful of writes per
    client, not 2000. Ten clients cost ten appends per frame, not ten encodes."""

    kind = "websocket"
    resumable = True

    def __init__(self, host: Host, conn: ServerConnection, profile: str) -> None:
        super().__init__(host, profile, seq=True)
        self.conn = conn
        self._queue: list[bytes] = []
        self._queued = 0
        self._wake = asyncio.Event()
        self._flush_timer: asyncio.TimerHandle | None = None
        self.device_id: str | None = None  # the paired browser on this socket (None: a program's token)

    def deliver(self, frames: dict[str, bytes], seq: int, numbered: dict[str, bytes]) -> None:
        key = "ws " + self.profile
        wire = numbered.get(key)
        if wire is None:
            frame = numbered.get(self.profile)
            if frame is None:
                frame = numbered[self.profile] = with_seq(frames[self.profile], seq)
            wire = numbered[key] = ws_frame(frame)
        self._enqueue(wire)

    def send_bytes(self, frame: bytes) -> None:
        self._enqueue(ws_frame(frame))

    def _enqueue(self, wire: bytes) -> None:
        if self.closed:
            return
        self._queue.append(wire)
        self._queued += len(wire)
        if self._queued > MAX_QUEUED:
            self._queue.clear()
            self.host.detach(self)
            asyncio.ensure_future(self.conn.close(1013, "too far behind: reconnect to resume"))
            return
        if self._queued >= FLUSH_BYTES:
            self._wake.set()
        elif self._flush_timer is None:
            self._flush_timer = asyncio.get_running_loop().call_later(FLUSH_DELAY_S, self._flush_due)

    def _flush_due(self) -> None:
        self._flush_timer = None
        self._wake.set()

    async def pump(self) -> None:
        conn = self.conn
        try:
            while True:
                await self._wake.wait()
                self._wake.clear()
                if self._flush_timer is not None:
                    self._flush_timer.cancel()
                    self._flush_timer = None
                while self._queue:
                    batch, self._queue, self._queued = self._queue, [], 0
                    async with conn.send_context():
                        conn.transport.write(b"".join(batch))
        except ConnectionClosed:
            pass


class WebServer:
    def __init__(self, host: Host, *, bind: str = "127.0.0.1", port: int = 0, token: str | None = None,
                 origins: tuple[str, ...] = (), alternates: Sequence[int] = (),
                 devices: DeviceStore | None = None, cwd: str = "") -> None:
        self.host = host
        self.bind = bind
        self.port = port
        self.alternates = tuple(alternates)  # tried in order when ``port`` is taken (EADDRINUSE)
        self.moved_from: int | None = None  # the first choice, when it was taken
        self._devices = devices
        self._cwd = cwd
        self._watch: asyncio.Task | None = None
        # the device each accepted handshake presented (gone with its connection)
        self._conn_devices: weakref.WeakKeyDictionary[ServerConnection, str] = weakref.WeakKeyDictionary()
        self._token = token
        self._origins = origins
        self.auth: WebAuth | None = None  # made once the port is known
        self.server: Any = None
        self.clients: set[WebClient] = set()
        self._files: dict[Path, bytes] = {}
        self.lan: str | None = None  # this machine's LAN address, when listening on every address

    @property
    def base_url(self) -> str:
        """The address to print: the LAN's when listening on every address (a phone can open it)."""
        name = self.bind if self.bind not in ("0.0.0.0", "::") else (self.lan or "127.0.0.1")
        if ":" in name:
            name = f"[{name}]"
        return f"http://{name}:{self.port}/"

    def require_auth(self) -> WebAuth:
        """The access checks; they exist once ``start`` knows the port (no request is served before)."""
        if self.auth is None:
            raise RuntimeError("the web server is not started")
        return self.auth

    def pairing_url(self, ttl_s: float | None = None) -> str:
        return f"{self.base_url}pair?token={self.require_auth().new_pairing(ttl_s)}"

    async def start(self) -> None:
        ports = (self.port, *self.alternates)
        for i, port in enumerate(ports):
            try:
                self.server = await serve(self._handle, self.bind, port, process_request=self._process_request,
                                          compression=None, max_size=MAX_MESSAGE, server_header=None,
                                          subprotocols=[Subprotocol(SUBPROTOCOL)],
                                          select_subprotocol=select_subprotocol, ping_interval=20, ping_timeout=20)
                break
            except OSError as exc:
                if exc.errno != errno.EADDRINUSE or i == len(ports) - 1:
                    raise
                if self.moved_from is None:
                    self.moved_from = port
        self.port = self.server.sockets[0].getsockname()[1]
        origins = self._origins
        if self.bind in ("0.0.0.0", "::"):
            self.lan = lan_address()
            if self.lan:  # a phone opening the printed link sends this Origin
                origins = (*origins, f"http://{self.lan}:{self.port}")
        self.auth = WebAuth(port=self.port, host=self.bind, token=self._token, origins=origins,
                            devices=self._devices, cwd=self._cwd)
        self.host.web = self
        self.host.commands = {**self.host.commands, **WEB_COMMANDS}
        self._watch = asyncio.ensure_future(self._watch_devices())

    async def _watch_devices(self) -> None:
        """A device revoked by another process (``pisces web revoke``) loses its open sockets within
        ``WATCH_S``."""
        store = self.require_auth().devices
        while True:
            await asyncio.sleep(WATCH_S)
            try:
                if store.refresh():
                    self.drop_revoked()
            except Exception as exc:  # noqa: BLE001 - the watch goes on; the checks re-read the file anyway
                sys.stderr.write(f"pisces: web devices: {exc}\n")

    def drop_revoked(self) -> int:
        """Close every socket whose device is no longer paired; how many."""
        known = self.require_auth().devices.devices
        dropped = 0
        for client in list(self.clients):
            if client.device_id is not None and client.device_id not in known:
                dropped += 1
                self.clients.discard(client)
                self.host.detach(client)
                asyncio.ensure_future(client.conn.close(REVOKED, "this browser was unpaired"))
        return dropped

    async def close(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
        if self.server is not None:
            self.server.close()
            try:
                await asyncio.wait_for(self.server.wait_closed(), timeout=2)
            except (asyncio.TimeoutError, Exception):  # noqa: BLE001 - exiting regardless
                pass

    # -- HTTP ------------------------------------------------------------------------------------
    async def _process_request(self, conn: ServerConnection, request: Request) -> Response | None:
        headers = request.headers
        auth = self.require_auth()
        if not auth.host_ok(headers.get("Host")):
            return _text(403, "Forbidden", "Unknown Host: use the address pisces printed\n")
        url = urlsplit(request.path)
        path = url.path
        if path == "/health":
            return _json(200, {"status": "ok", "clients": len(self.clients)})
        if path == "/login":
            page = await self._file(STATIC / "login.html")
            if "failed" in parse_qs(url.query):
                page.body = page.body.replace(b'class="failed" hidden', b'class="failed"')
                del page.headers["Content-Length"]
                page.headers["Content-Length"] = str(len(page.body))
            return page
        if path == "/pair":
            token = (parse_qs(url.query).get("token") or [""])[0]
            ticket = auth.pair(token)
            if ticket is None:
                return _redirect("/login?failed=1")
            return await self._pair_page(ticket)
        if path == "/pair/register":
            q = parse_qs(url.query)
            got = auth.register(_first(q, "ticket") or "", origin=_first(q, "origin") or "",
                                public_key=_first(q, "pub") or "", secret=_first(q, "secret") or "",
                                user_agent=headers.get("User-Agent"))
            if isinstance(got, str):
                return _text(400, "Bad Request", got + "\n")
            return _json(200, {"id": got.id, "name": got.name})
        if path == "/challenge":
            return _json(200, {"challenge": auth.new_challenge()})
        bearer = headers.get("Authorization")
        if path == "/ws":
            origin = headers.get("Origin")
            if origin is not None and not auth.origin_ok(origin):
                return _text(403, "Forbidden", "Origin not allowed\n")
            device = auth.device(headers.get_all("Sec-WebSocket-Protocol"), origin)
            if device is None and not auth.program_ok(bearer):
                if auth.bearer_device(bearer) is None:
                    return _text(401, "Unauthorized", "Pair this browser first, or send Authorization: Bearer\n")
            if origin is None and not auth.program_ok(bearer):
                return _text(403, "Forbidden", "A browser connection must carry its Origin\n")
            if device is not None:
                self._conn_devices[conn] = device.id  # read by _handle: the socket closes if it is revoked
                await asyncio.to_thread(auth.devices.seen, device.id)  # a file write at most every 10 minutes
            return None  # the WebSocket handshake goes on
        # the UI's own files are the package's, the same for everyone: no credential needed (the login page's
        # stylesheet included); what holds the session (/ws, /export, /auth) needs one
        if path in ("/", "/index.html"):
            return await self._file(STATIC / "index.html")
        if path in ("/export", "/auth"):
            if not auth.bearer_ok(bearer):
                return _text(401, "Unauthorized", "Pair this browser first: open the link pisces printed\n")
            return await self._export() if path == "/export" else _json(200, {"paired": True})
        for prefix, roots in (("/static/", (STATIC,)), ("/vendor/", VENDOR_DIRS)):
            if path.startswith(prefix):
                for root in roots:
                    target = safe_join(root, path[len(prefix):])
                    if target is not None and target.is_file():
                        return await self._file(target)
                return _text(404, "Not Found", "Not found\n")
        return _text(404, "Not Found", "Not found\n")

    async def _pair_page(self, ticket: str) -> Response:
        """The page that registers this browser with ``ticket`` and goes on to the UI (pair.js)."""
        page = await self._file(STATIC / "pair.html")
        body = bytes(page.body).replace(b"{{ticket}}", ticket.encode())  # token_urlsafe: safe in an attribute
        return _response(200, "OK", "text/html; charset=utf-8", body)

    async def _file(self, path: Path) -> Response:
        body = self._files.get(path)
        if body is None:
            body = await asyncio.to_thread(path.read_bytes)
            self._files[path] = body
        return _response(200, "OK", TYPES.get(path.suffix, "application/octet-stream"), body)

    async def _export(self) -> Response:
        try:
            page = render_session(self.host.session)  # ~13 ms for 2,000 messages; entries read on the loop
        except ExportError as exc:
            return _text(409, "Conflict", f"{exc}\n")
        name = f"pisces-session-{self.host.session.store.get_session_id()}.html"
        response = _response(200, "OK", "text/html; charset=utf-8", page)
        response.headers["Content-Disposition"] = f'attachment; filename="{name}"'
        return response

    # -- WebSocket ---------------------------------------------------------------------------------
    async def _handle(self, conn: ServerConnection) -> None:
        query = parse_qs(urlsplit(conn.request.path).query if conn.request else "")
        profile = (query.get("profile") or [DELTAS])[0]
        if profile not in PROFILES:
            await conn.close(1008, f"unknown stream profile {profile[:40]!r}")
            return
        since_text = _first(query, "since")
        since = int(since_text) if since_text is not None and since_text.isdigit() else None
        stream = _first(query, "stream")
        client = WebClient(self.host, conn, profile)
        # ?approvals=typed: this client speaks the typed approval frames from its first frame on (the same as
        # negotiate_protocol {"clientCapabilities": {"typedToolApprovals": 1}}, without a round trip)
        client.typed_approvals = (query.get("approvals") or [""])[0] == "typed"
        client.device_id = self._conn_devices.pop(conn, None)
        if client.device_id is not None and client.device_id not in self.require_auth().devices.devices:
            await conn.close(REVOKED, "this browser was unpaired")  # revoked during the handshake
            return
        self.clients.add(client)
        self.host.resume(client, stream, since)  # the missed frames or a snapshot, then the live tail
        pump = asyncio.ensure_future(client.pump())
        try:
            while True:
                try:
                    raw = await conn.recv(decode=False)
                except ConnectionClosed:
                    break
                if isinstance(raw, str):
                    raw = raw.encode("utf-8", "surrogatepass")
                if self.host.dispatch(client, *parse_line(bytes(raw))):
                    await asyncio.sleep(0)  # let a quick async command reach its first wait, as on stdio
        finally:
            self.clients.discard(client)
            self.host.detach(client)
            pump.cancel()


def h_web_pair(client: Any, cmd: dict) -> Any:
    """A new one-time pairing link for another browser (valid ten minutes), its QR code, and the UI's address."""
    from pisces.modes.web.qr import matrix  # noqa: PLC0415 - only when a link is asked for

    web = client.host.web
    link = web.pairing_url(PAIRING_TTL_S)
    out: dict[str, Any] = {"url": web.base_url, "pairUrl": link}
    try:  # the same link as a QR code for a phone: rows of "1" (dark) and "0" (light), no quiet zone
        out["qr"] = ["".join("1" if v else "0" for v in row) for row in matrix(link)]
    except ValueError:
        pass  # too long for the encoder: the link alone
    return out


def h_web_devices(client: Any, cmd: dict) -> Any:
    """The browsers remembered for this server's origins (no key material), and which one this client is."""
    auth = client.host.web.require_auth()
    auth.devices.refresh()  # this server's origins only (pisces web devices lists every project's)
    devices = sorted((d for d in auth.devices.devices.values() if d.origin in auth.origins), key=lambda d: d.paired)
    return {"devices": [d.public() for d in devices], "current": getattr(client, "device_id", None)}


def h_web_revoke(client: Any, cmd: dict) -> Any:
    """Forget a browser: it is refused from now on, and its open sockets close at once."""
    device_id = cmd.get("device")
    if not isinstance(device_id, str):
        raise ValueError("web_revoke needs device (an id from web_devices)")
    web = client.host.web
    if not web.require_auth().devices.revoke(device_id):
        raise ValueError(f"No paired browser {device_id[:40]!r}: web_devices lists them")
    return {"revoked": device_id, "closed": web.drop_revoked()}


WEB_COMMANDS = {"web_pair": h_web_pair, "web_info": h_web_info, "web_devices": h_web_devices,
                "web_revoke": h_web_revoke}


def safe_join(root: Path, rel: str) -> Path | None:
    """``root/rel`` when ``rel`` (still percent-encoded) names a file inside ``root``; None for anything
    that could step outside: ``..``, absolute paths, backslashes, NUL, links out of the tree."""
    rel = unquote(rel)
    if not rel or "\x00" in rel or "\\" in rel or rel.startswith("/"):
        return None
    parts = rel.split("/")
    if any(p in ("", ".", "..") for p in parts):
        return None
    target = (root / rel).resolve()
    base = root.resolve()
    if os.path.commonpath([str(base), str(target)]) != str(base):
        return None
    return target


def _response(status: int, reason: str, ctype: str, body: bytes, extra: dict[str, str] | None = None) -> Response:
    headers = Headers()
    headers["Content-Type"] = ctype
    headers["Content-Length"] = str(len(body))
    headers["Cache-Control"] = "no-store"
    headers["X-Content-Type-Options"] = "nosniff"
    headers["Referrer-Policy"] = "no-referrer"
    headers["Content-Security-Policy"] = CSP
    headers["Connection"] = "close"
    for k, v in (extra or {}).items():
        headers[k] = v
    return Response(status, reason, headers, body)


def _first(query: dict[str, list[str]], key: str) -> str | None:
    """The first value of ``key`` in a parsed query string, or None."""
    values = query.get(key)
    return values[0] if values else None


def _text(status: int, reason: str, text: str) -> Response:
    return _response(status, reason, "text/plain; charset=utf-8", text.encode())


def _json(status: int, data: Any) -> Response:
    return _response(status, "OK", "application/json", json.dumps(data).encode())


def _redirect(location: str, cookie: str | None = None) -> Response:
    extra = {"Location": location}
    if cookie is not None:
        extra["Set-Cookie"] = cookie
    return _response(303, "See Other", "text/plain; charset=utf-8", b"", extra)
