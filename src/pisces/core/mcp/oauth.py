"""OAuth for remote MCP servers, through the SDK's ``mcp.client.auth`` (authorization code with PKCE, discovery,
dynamic client registration, refresh), with what pisces adds:

- **private persistence**: the registered client and the tokens of each server in
  ``<agentDir>/mcp-auth/<key>.json`` (directory 0700, file 0600, written whole then renamed), keyed by the
  server's name and URL as written; the expiry is kept as a time, so a restarted pisces knows a token is stale;
- **refresh before expiry**: a token is refreshed :data:`REFRESH_MARGIN_S` seconds (at most half its lifetime)
  before it expires (the SDK
  alone refreshes only once it has expired, and not at all after a restart, for want of the time);
- **re-registration on invalid_client**: a refresh refused with ``invalid_client`` drops the stored client, so
  the next authorization registers a new one (instead of reusing a client the server forgot);
- **one clear request on invalid_grant** (or no authorization yet): a session never opens a browser; the server
  fails with :class:`LoginRequired`, whose text names the command to run (``pisces mcp login NAME``), and the
  session tells the person once (pisces.core.mcp.manager);
- **login**: :func:`login` runs the interactive flow: a one-shot callback listener on 127.0.0.1, the
  authorization URL opened with :mod:`webbrowser` (which runs ``$BROWSER`` when it is set) and printed.

Imported only for a remote server (it needs the SDK).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import socket
import sys
import time
from typing import Any, Callable
from urllib.parse import parse_qs, urlparse

from mcp.client.auth import OAuthClientProvider
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

from pisces.core.safe_open import read_bytes

REFRESH_MARGIN_S = 60
DIR = "mcp-auth"
LOGIN_TIMEOUT_S = 300.0


class LoginRequired(Exception):
    """The server needs the person to authorize pisces (no tokens, or the saved ones were refused)."""

    def __init__(self, server: str, reason: str) -> None:
        self.server, self.reason = server, reason
        super().__init__(f"MCP server {server} needs authorization ({reason}): run 'pisces mcp login {server}' "
                         "in a terminal, then reconnect it (mcp_reconnect)")


def margin(lifetime: Any) -> float:
    """Seconds before expiry at which a token is refreshed: a minute, or half the token's lifetime if shorter
    (so that a fresh token is never already stale)."""
    if not isinstance(lifetime, (int, float)) or lifetime <= 0:
        return float(REFRESH_MARGIN_S)
    return min(float(REFRESH_MARGIN_S), lifetime / 2)


def _key(cfg: Any) -> str:
    return hashlib.sha256(json.dumps([cfg.name, cfg.url]).encode()).hexdigest()[:32]


class FileStorage:
    """The SDK's ``TokenStorage``, in one private file per server."""

    def __init__(self, agent_dir: str, cfg: Any) -> None:
        self.path = os.path.join(agent_dir, DIR, f"{_key(cfg)}.json")
        self.name, self.url = cfg.name, cfg.url

    def read(self) -> dict[str, Any]:
        try:
            data = json.loads(read_bytes(self.path, 1 << 20))
        except (OSError, ValueError, RecursionError):
            return {}
        return data if isinstance(data, dict) else {}

    def write(self, data: dict[str, Any]) -> None:
        os.makedirs(os.path.dirname(self.path), mode=0o700, exist_ok=True)
        tmp = f"{self.path}.{os.getpid()}.tmp"
        with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
            json.dump({**data, "server": self.name, "url": self.url}, f)
        os.replace(tmp, self.path)

    def update(self, **fields: Any) -> None:
        data = self.read()
        for k, v in fields.items():
            if v is None:
                data.pop(k, None)
            else:
                data[k] = v
        self.write(data)

    async def get_tokens(self) -> OAuthToken | None:
        raw = self.read().get("tokens")
        if not isinstance(raw, dict):
            return None
        with contextlib.suppress(ValueError):
            token = OAuthToken.model_validate(raw)
            expires_at = self.read().get("expiresAt")
            token.expires_in = max(0, int(expires_at - time.time())) if isinstance(expires_at, (int, float)) else None
            return token
        return None

    async def set_tokens(self, tokens: OAuthToken) -> None:
        lifetime = int(tokens.expires_in) if tokens.expires_in is not None else None
        self.update(tokens=tokens.model_dump(mode="json", exclude_none=True), lifetime=lifetime,
                    expiresAt=time.time() + lifetime if lifetime is not None else None)

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        raw = self.read().get("client")
        if not isinstance(raw, dict):
            return None
        with contextlib.suppress(ValueError):
            return OAuthClientInformationFull.model_validate(raw)
        return None

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.update(client=client_info.model_dump(mode="json", exclude_none=True))

    def status(self) -> dict[str, Any]:
        data = self.read()
        return {"authorized": isinstance(data.get("tokens"), dict), "registered": isinstance(data.get("client"), dict),
                **({"expiresAt": data["expiresAt"]} if isinstance(data.get("expiresAt"), (int, float)) else {})}


def client_metadata(redirect_uri: str) -> OAuthClientMetadata:
    return OAuthClientMetadata.model_validate({
        "client_name": "pisces", "redirect_uris": [redirect_uri],
        "grant_types": ["authorization_code", "refresh_token"], "response_types": ["code"],
        "token_endpoint_auth_method": "none"})


class Provider(OAuthClientProvider):
    """The SDK's provider with the refresh margin, and the handling of a refused refresh."""

    def __init__(self, cfg: Any, storage: FileStorage, redirect_uri: str, *,
                 redirect_handler: Callable[[str], Any] | None = None,
                 callback_handler: Callable[[], Any] | None = None) -> None:
        self.cfg, self.store = cfg, storage
        self.refused: str | None = None  # "invalid_grant", "invalid_client": why the saved authorization failed
        super().__init__(cfg.url, client_metadata(redirect_uri), storage,
                         redirect_handler=redirect_handler or self._no_browser,
                         callback_handler=callback_handler or self._no_callback)

    def _margin(self) -> None:
        """Count a token as stale :func:`margin` seconds before its expiry."""
        if self.context.token_expiry_time is not None:
            self.context.token_expiry_time -= margin(self.store.read().get("lifetime"))

    async def _initialize(self) -> None:
        await super()._initialize()
        tokens = self.context.current_tokens
        if tokens is not None and tokens.expires_in is not None:
            self.context.update_token_expiry(tokens)  # the SDK leaves stored tokens without an expiry
            self._margin()

    async def _handle_token_response(self, response: Any) -> None:
        await super()._handle_token_response(response)
        self.refused = None
        self.store.update(refused=None)
        self._margin()

    async def _handle_refresh_response(self, response: Any) -> bool:
        if response.status_code != 200:
            error = ""
            with contextlib.suppress(Exception):
                error = str(json.loads(await response.aread()).get("error", ""))
            if response.status_code in (400, 401):
                self.refused = error or f"HTTP {response.status_code}"
                self.store.update(tokens=None, expiresAt=None, lifetime=None,  # refused: never tried again
                                  refused=self.refused)
                if error == "invalid_client":  # the server forgot the client: register a new one
                    self.store.update(client=None)
                    self.context.client_info = None
        ok = await super()._handle_refresh_response(response)
        if ok:
            self._margin()
        return ok

    async def _no_browser(self, url: str) -> None:
        why = self.refused or self.store.read().get("refused", "")
        reason = {"invalid_grant": "the saved authorization was refused (invalid_grant)",
                  "invalid_client": "the server no longer knows pisces' registered client (invalid_client); "
                                    "a new one was registered"}.get(why, "not authorized yet")
        raise LoginRequired(self.cfg.name, reason)

    async def _no_callback(self) -> AuthorizationCodeResult:
        raise LoginRequired(self.cfg.name, "not authorized yet")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def session_provider(agent_dir: str, cfg: Any) -> Provider:
    """The provider a session's connection uses: tokens and refresh, never a browser."""
    storage = FileStorage(agent_dir, cfg)
    client = storage.read().get("client")
    uris = client.get("redirect_uris") if isinstance(client, dict) else None
    redirect = uris[0] if isinstance(uris, list) and uris else f"http://127.0.0.1:{_free_port()}/callback"
    return Provider(cfg, storage, redirect)


async def _callback_listener(port: int) -> tuple[asyncio.AbstractServer, asyncio.Future[AuthorizationCodeResult]]:
    """A one-shot HTTP listener on 127.0.0.1 for the authorization server's redirect."""
    done: asyncio.Future[AuthorizationCodeResult] = asyncio.get_running_loop().create_future()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            line = (await asyncio.wait_for(reader.readline(), 10)).decode("latin-1")[:8192]
            query = parse_qs(urlparse(line.split(" ")[1] if " " in line else "").query)
            one = {k: v[0] for k, v in query.items()}
            if "code" in one:
                text = "pisces is authorized; you can close this window."
                if not done.done():
                    done.set_result(AuthorizationCodeResult(code=one["code"], state=one.get("state"),
                                                            iss=one.get("iss")))
            else:
                text = f"authorization failed: {one.get('error', 'no code')} {one.get('error_description', '')}"
                if not done.done():
                    done.set_exception(RuntimeError(text))
            body = text.encode()
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n"
                         b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
            await writer.drain()
        except (OSError, asyncio.TimeoutError, IndexError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", port)
    return server, done


def _open(url: str) -> None:
    import webbrowser  # noqa: PLC0415 - only for a login

    sys.stderr.write(f"Open this address to authorize pisces:\n{url}\n")
    sys.stderr.flush()
    webbrowser.open(url)


async def login(agent_dir: str, cfg: Any, *, open_url: Callable[[str], None] = _open,
                timeout_s: float = LOGIN_TIMEOUT_S) -> dict[str, Any]:
    """The interactive authorization of one remote server; the tokens are saved. Returns its auth status."""
    from pisces.core.mcp.config import resolved  # noqa: PLC0415 - same package

    real = resolved(cfg)
    storage = FileStorage(agent_dir, cfg)
    client = storage.read().get("client")
    uris = client.get("redirect_uris") if isinstance(client, dict) else None
    port = urlparse(uris[0]).port if isinstance(uris, list) and uris else None
    listener: Any
    try:
        listener, done = await _callback_listener(port or 0)
    except OSError:  # the registered port is taken: a new port, so a new client
        storage.update(client=None)
        listener, done = await _callback_listener(0)
    bound = listener.sockets[0].getsockname()[1]
    if port != bound:
        storage.update(client=None)
    storage.update(tokens=None, expiresAt=None, lifetime=None)

    async def redirect(url: str) -> None:
        await asyncio.to_thread(open_url, url)

    async def callback() -> AuthorizationCodeResult:
        return await asyncio.wait_for(done, timeout_s)

    provider = Provider(real, storage, f"http://127.0.0.1:{bound}/callback", redirect_handler=redirect,
                        callback_handler=callback)
    try:
        await connect_once(real, provider)
    finally:
        listener.close()
    return storage.status()


async def connect_once(real: Any, auth: Any) -> None:
    """Connect, initialize and leave (what triggers and then proves the authorization)."""
    import httpx2  # noqa: PLC0415 - remote servers only
    from mcp.client.session import ClientSession  # noqa: PLC0415 - idem

    if real.transport == "sse":
        from mcp.client.sse import sse_client  # noqa: PLC0415 - per transport

        transport: Any = sse_client(real.url, headers=real.headers, auth=auth)
        async with transport as streams, ClientSession(streams[0], streams[1]) as session:
            await session.initialize()
        return
    from mcp.client.streamable_http import streamable_http_client  # noqa: PLC0415 - per transport

    async with httpx2.AsyncClient(headers=real.headers, auth=auth, timeout=30.0) as client, \
            streamable_http_client(real.url, http_client=client) as streams, \
            ClientSession(streams[0], streams[1]) as session:
        await session.initialize()


def wants_oauth(cfg: Any) -> bool:
    """A remote server gets OAuth unless it says ``"oauth": false`` or sends its own Authorization header."""
    if cfg.transport == "stdio" or cfg.oauth is False:
        return False
    return not any(k.lower() == "authorization" for k in cfg.headers)
