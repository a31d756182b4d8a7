"""Subscription logins: the OAuth credentials stored in ``auth.json``, refreshed before they expire.

Guarantees:
- an entry is pi's: ``{"<provider>": {"type": "oauth", "access": ..., "refresh": ..., "expires": <ms>, ...}}``
  (extra fields per provider: ``enterpriseUrl`` for GitHub Copilot, ``accountId`` for OpenAI Codex), so pi and
  pisces can read each other's file;
- the file is written atomically with mode 0600 (created so, and tightened if it was wider), under the agent
  directory's lock, keeping every other entry as it was;
- an access token within ``REFRESH_MARGIN_MS`` of its expiry is refreshed before it is handed out, and the new
  tokens are saved; a failed refresh gives no key (the request then fails with the no-key message, which names
  ``pisces login``) and leaves the entry for the user to log in again;
- the flows themselves (``oauth_copilot``, ``oauth_codex``) speak only to the URLs they are given, with a
  bounded time-out per request, through the standard library (nothing is imported at start-up).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import secrets
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import Any, Callable

from pisces.core.config.file_lock import FileLock
from pisces.core.safe_open import CONFIG_MAX_BYTES, read_text, write_atomic

REFRESH_MARGIN_MS = 60_000  # refresh a token that expires within a minute
HTTP_TIMEOUT_S = 30
MAX_RESPONSE_BYTES = 1 << 20


class OAuthError(RuntimeError):
    """A login or refresh that failed; the text says why, for the user."""


@dataclass
class LoginCallbacks:
    """How a flow talks to the user: ``on_auth(url, instructions)`` shows where to go (and may open a browser),
    ``on_prompt(message)`` asks for a line (may return "" for the default), ``on_progress(text)`` reports."""

    on_auth: Callable[[str, str], None]
    on_prompt: Callable[[str], str] = field(default=lambda message: "")
    on_progress: Callable[[str], None] = field(default=lambda text: None)
    should_stop: Callable[[], bool] = field(default=lambda: False)


# ---------------------------------------------------------------------------------------------
# HTTP (urllib: the flows are a handful of small requests)
# ---------------------------------------------------------------------------------------------
def http_json(url: str, *, method: str = "GET", form: dict[str, str] | None = None,
              headers: dict[str, str] | None = None) -> tuple[int, Any]:
    """(status, parsed JSON body or None). Never raises for an HTTP status; raises OAuthError when the
    server cannot be reached or the body is not JSON."""
    data = urllib.parse.urlencode(form).encode() if form is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers={"Accept": "application/json",
                                                                         **(headers or {})})
    if data is not None:
        req.add_header("Content-Type", "application/x-www-form-urlencoded")
    try:
        with urllib.request.urlopen(req, timeout=HTTP_TIMEOUT_S) as resp:
            status, raw = resp.status, resp.read(MAX_RESPONSE_BYTES)
    except urllib.error.HTTPError as exc:
        status, raw = exc.code, exc.read(MAX_RESPONSE_BYTES)
    except (urllib.error.URLError, OSError) as exc:
        raise OAuthError(f"could not reach {url.split('?')[0]}: {getattr(exc, 'reason', exc)}") from None
    try:
        return status, json.loads(raw) if raw.strip() else None
    except ValueError:
        text = raw.decode("utf-8", "replace").strip()[:300]
        if status >= 400:
            return status, {"error": text}
        raise OAuthError(f"{url.split('?')[0]} answered with something that is not JSON: {text}") from None


def pkce_pair() -> tuple[str, str]:
    """(verifier, S256 challenge): 32 random bytes, base64url without padding, as RFC 7636."""
    verifier = base64.urlsafe_b64encode(secrets.token_bytes(32)).rstrip(b"=").decode()
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    return verifier, challenge


def now_ms() -> int:
    return int(time.time() * 1000)


# ---------------------------------------------------------------------------------------------
# Providers
# ---------------------------------------------------------------------------------------------
@dataclass
class OAuthProvider:
    id: str
    name: str
    login: Callable[[LoginCallbacks], dict[str, Any]]  # -> the entry's fields (access, refresh, expires, ...)
    refresh: Callable[[dict[str, Any]], dict[str, Any]]
    why: str  # one line for the docs and `pisces login --list`


def providers() -> dict[str, OAuthProvider]:
    """The logins pisces offers (see docs/providers.md for those left out and why)."""
    from pisces.core.config import oauth_codex, oauth_copilot  # noqa: PLC0415 - the flows load on use only

    return {p.id: p for p in (oauth_copilot.PROVIDER, oauth_codex.PROVIDER)}




# ---------------------------------------------------------------------------------------------
# Storage in auth.json
# ---------------------------------------------------------------------------------------------
def _read(path: str) -> dict[str, Any]:
    try:
        data = json.loads(read_text(path, CONFIG_MAX_BYTES))
    except FileNotFoundError:
        return {}
    except ValueError as exc:
        raise OAuthError(f"{path} is not valid JSON ({exc}); fix or remove it first") from None
    if not isinstance(data, dict):
        raise OAuthError(f"{path}: the top level must be an object")
    return data


def _update(path: str, change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    """Read, change and write auth.json under the agent directory's lock, mode 0600."""
    os.makedirs(os.path.dirname(path) or ".", mode=0o700, exist_ok=True)
    with FileLock(path + ".lock", timeout=10):
        data = _read(path)
        change(data)
        write_atomic(path, (json.dumps(data, indent=2) + "\n").encode(), mode=0o600)
    return data


def save_credentials(path: str, provider: str, fields: dict[str, Any]) -> None:
    _update(path, lambda data: data.__setitem__(provider, {"type": "oauth", **fields}))


def remove_credentials(path: str, provider: str) -> bool:
    """Remove the provider's entry (OAuth or key); whether there was one."""
    found: list[bool] = []

    def change(data: dict[str, Any]) -> None:
        found.append(data.pop(provider, None) is not None)

    if not os.path.exists(path):
        return False
    _update(path, change)
    return bool(found and found[0])


def _fresh(entry: Any) -> str | None:
    if not isinstance(entry, dict) or entry.get("type", "oauth") != "oauth":
        return None
    access, expires = entry.get("access"), entry.get("expires")
    if isinstance(access, str) and access and isinstance(expires, (int, float)) and \
            expires - now_ms() > REFRESH_MARGIN_MS:
        return access
    return None


def access_token(path: str, provider: str, entry: dict[str, Any],
                 refresh: Callable[[dict[str, Any]], dict[str, Any]] | None = None) -> str | None:
    """The entry's access token, refreshed first when it expires within ``REFRESH_MARGIN_MS`` (the new
    tokens are saved). The refresh happens under the agent directory's lock, after reading the file again:
    when another process refreshed meanwhile its token is used, and a rotating refresh token is never spent
    twice. None when it cannot be refreshed."""
    token = _fresh(entry)
    if token is not None:
        return token
    if refresh is None:
        prov = providers().get(provider)
        if prov is None:
            return None
        refresh = prov.refresh
    try:
        with FileLock(path + ".lock", timeout=30):
            data = _read(path)
            current = data.get(provider)
            token = _fresh(current)
            if token is not None:
                return token
            fields = refresh(current if isinstance(current, dict) and current.get("type") == "oauth" else entry)
            data[provider] = {"type": "oauth", **fields}
            write_atomic(path, (json.dumps(data, indent=2) + "\n").encode(), mode=0o600)
    except (OAuthError, OSError):
        return None
    token = fields.get("access")
    return token if isinstance(token, str) and token else None
