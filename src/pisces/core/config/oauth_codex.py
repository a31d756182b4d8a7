"""ChatGPT (OpenAI Codex) login: OAuth authorization code with PKCE, a browser and a localhost callback.

The wire facts are pi 0.73.1's (``utils/oauth/openai-codex``), which follow OpenAI's Codex CLI: the Codex
public client id, ``https://auth.openai.com/oauth/authorize`` with ``response_type=code``, the S256 challenge,
a random ``state``, scope ``openid profile email offline_access``, ``id_token_add_organizations=true``,
``codex_cli_simplified_flow=true`` and ``originator``; the redirect ``http://localhost:1455/auth/callback``
answered by a server on 127.0.0.1:1455 that checks the state; then ``POST https://auth.openai.com/oauth/token``
(``authorization_code`` with the verifier; later ``refresh_token``). The account id is the
``chatgpt_account_id`` claim under ``https://api.openai.com/auth`` in the access token (a JWT).

When port 1455 is taken (or no browser is at hand) the user pastes the address the browser was sent to (or
the code), as with pi. ``PISCES_OPENAI_OAUTH_URL`` replaces ``https://auth.openai.com`` and
``PISCES_OAUTH_CALLBACK_PORT`` the port (a local test server; never needed otherwise).
"""

from __future__ import annotations

import os
import secrets
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlencode, urlparse

from pisces.ai.providers.openai_codex import account_id  # the one reading of the token's account claim
from pisces.core.config.oauth import LoginCallbacks, OAuthError, OAuthProvider, http_json, now_ms, pkce_pair

CLIENT_ID = "app_EMoamEEZ73f0CkXaXp7hrann"
SCOPE = "openid profile email offline_access"
CALLBACK_HOST = "127.0.0.1"
LOGIN_TIMEOUT_S = 300.0


def _base() -> str:
    return os.environ.get("PISCES_OPENAI_OAUTH_URL", "").rstrip("/") or "https://auth.openai.com"


def _port() -> int:
    return int(os.environ.get("PISCES_OAUTH_CALLBACK_PORT") or 1455)


def redirect_uri() -> str:
    return f"http://localhost:{_port()}/auth/callback"


def authorize_url(challenge: str, state: str, originator: str = "pi") -> str:
    query = {"response_type": "code", "client_id": CLIENT_ID, "redirect_uri": redirect_uri(), "scope": SCOPE,
             "code_challenge": challenge, "code_challenge_method": "S256", "state": state,
             "id_token_add_organizations": "true", "codex_cli_simplified_flow": "true", "originator": originator}
    return f"{_base()}/oauth/authorize?{urlencode(query)}"



def _tokens(form: dict[str, str], what: str) -> dict[str, Any]:
    status, body = http_json(f"{_base()}/oauth/token", method="POST", form=form)
    if status >= 400:
        raise OAuthError(f"OpenAI Codex token {what} failed ({status}): {body}")
    if not isinstance(body, dict) or not body.get("access_token") or not body.get("refresh_token") or \
            not isinstance(body.get("expires_in"), (int, float)):
        raise OAuthError(f"OpenAI Codex token {what} response lacks access_token/refresh_token/expires_in")
    access = body["access_token"]
    account = account_id(access)
    if account is None:
        raise OAuthError("Failed to extract accountId from token")
    return {"access": access, "refresh": body["refresh_token"], "expires": now_ms() + int(body["expires_in"] * 1000),
            "accountId": account}


class _Callback:
    """The one-shot server behind the redirect: answers /auth/callback, checks the state, keeps the code."""

    def __init__(self, state: str) -> None:
        self.state, self.code, self.done = state, None, threading.Event()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a: Any) -> None:
                pass

            def do_GET(self) -> None:
                url = urlparse(self.path)
                query = parse_qs(url.query)
                if url.path != "/auth/callback":
                    return self._page(404, "Callback route not found.")
                if query.get("state", [""])[0] != outer.state:
                    return self._page(400, "State mismatch.")
                code = query.get("code", [""])[0]
                if not code:
                    return self._page(400, "Missing authorization code.")
                outer.code = code
                self._page(200, "OpenAI authentication completed. You can close this window.")
                outer.done.set()

            def _page(self, status: int, text: str) -> None:
                body = f"<!doctype html><title>pisces login</title><p>{text}</p>".encode()
                self.send_response(status)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer((CALLBACK_HOST, _port()), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _parse_pasted(text: str) -> tuple[str | None, str | None]:
    text = text.strip()
    if not text:
        return None, None
    if "://" in text:
        q = parse_qs(urlparse(text).query)
        return q.get("code", [None])[0], q.get("state", [None])[0]
    if "code=" in text:
        q = parse_qs(text)
        return q.get("code", [None])[0], q.get("state", [None])[0]
    if "#" in text:
        code, state = text.split("#", 1)
        return code, state
    return text, None


def login(cb: LoginCallbacks) -> dict[str, Any]:
    verifier, challenge = pkce_pair()
    state = secrets.token_hex(16)
    url = authorize_url(challenge, state)
    try:
        server: _Callback | None = _Callback(state)
    except OSError:
        server = None  # the port is taken: the user pastes the address instead
    try:
        cb.on_auth(url, "A browser window should open; complete the login there." if server else
                   f"Port {_port()} is taken: open the address, then paste the address your browser ends on.")
        code = None
        if server is not None:
            waited = 0.0
            while not server.done.wait(0.1):
                waited += 0.1
                if cb.should_stop():
                    raise OAuthError("Login cancelled")
                if waited >= LOGIN_TIMEOUT_S:
                    break
            code = server.code
        if code is None:
            code, pasted_state = _parse_pasted(cb.on_prompt("Paste the authorization code (or the full redirect URL)"))
            if pasted_state is not None and pasted_state != state:
                raise OAuthError("State mismatch")
        if not code:
            raise OAuthError("Missing authorization code")
    finally:
        if server is not None:
            server.close()
    return _tokens({"grant_type": "authorization_code", "client_id": CLIENT_ID, "code": code,
                    "code_verifier": verifier, "redirect_uri": redirect_uri()}, "exchange")


def refresh(entry: dict[str, Any]) -> dict[str, Any]:
    token = entry.get("refresh")
    if not isinstance(token, str) or not token:
        raise OAuthError("the OpenAI Codex login has no refresh token; run pisces login openai-codex")
    return _tokens({"grant_type": "refresh_token", "refresh_token": token, "client_id": CLIENT_ID}, "refresh")


PROVIDER = OAuthProvider(id="openai-codex", name="ChatGPT Plus/Pro (Codex subscription)", login=login,
                         refresh=refresh, why="browser login at auth.openai.com with a localhost callback (PKCE)")
