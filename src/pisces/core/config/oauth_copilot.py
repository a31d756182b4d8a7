"""GitHub Copilot login: GitHub's OAuth device flow, then the exchange of the GitHub token for a Copilot token.

The wire facts are pi 0.73.1's (``utils/oauth/github-copilot``): the client id of GitHub's Copilot editor
integration, ``read:user`` scope, ``POST https://<domain>/login/device/code``, polling ``POST
https://<domain>/login/oauth/access_token`` (``authorization_pending`` waits, ``slow_down`` lengthens the interval),
then ``GET https://api.<domain>/copilot_internal/v2/token`` with the GitHub token as bearer and the editor
headers. The entry keeps the GitHub token as ``refresh`` and the Copilot token as ``access``, which expires
five minutes before the server says (``expires_at``); refreshing is the same exchange. The API base URL comes
from the token's ``proxy-ep`` field. A GitHub Enterprise domain may be given at the prompt.

``PISCES_GITHUB_OAUTH_URL`` replaces both ``https://<domain>`` and ``https://api.<domain>`` (a local test
server; never needed otherwise).
"""

from __future__ import annotations

import base64
import os
import re
import time
from typing import Any
from urllib.parse import urlparse

from pisces.core.config.oauth import LoginCallbacks, OAuthError, OAuthProvider, http_json

CLIENT_ID = base64.b64decode("SXYxLmI1MDdhMDhjODdlY2ZlOTg=").decode()  # as pi stores it
HEADERS = {"User-Agent": "GitHubCopilotChat/0.35.0", "Editor-Version": "vscode/1.107.0",
           "Editor-Plugin-Version": "copilot-chat/0.35.0", "Copilot-Integration-Id": "vscode-chat"}
MIN_INTERVAL_S = 1.0
INTERVAL_FACTOR, SLOW_DOWN_FACTOR = 1.2, 1.4


def normalize_domain(text: str) -> str | None:
    text = text.strip()
    if not text:
        return None
    host = urlparse(text if "://" in text else f"https://{text}").hostname
    return host or None


def urls(domain: str) -> dict[str, str]:
    override = os.environ.get("PISCES_GITHUB_OAUTH_URL", "").rstrip("/")
    web = override or f"https://{domain}"
    api = override or f"https://api.{domain}"
    return {"device": f"{web}/login/device/code", "token": f"{web}/login/oauth/access_token",
            "copilot": f"{api}/copilot_internal/v2/token"}


def base_url_from_token(token: str, enterprise: str | None = None) -> str:
    """``proxy-ep=proxy.X`` in the token gives ``https://api.X``; else the enterprise or the public API."""
    m = re.search(r"proxy-ep=([^;]+)", token or "")
    if m:
        return "https://" + re.sub(r"^proxy\.", "api.", m.group(1))
    if enterprise:
        return f"https://copilot-api.{enterprise}"
    return "https://api.individual.githubcopilot.com"


def copilot_token(github_token: str, enterprise: str | None) -> dict[str, Any]:
    status, body = http_json(urls(enterprise or "github.com")["copilot"],
                             headers={"Authorization": f"Bearer {github_token}", **HEADERS})
    if status >= 400:
        raise OAuthError(f"GitHub Copilot token request failed ({status}): {body}")
    if not isinstance(body, dict) or not isinstance(body.get("token"), str) or \
            not isinstance(body.get("expires_at"), (int, float)):
        raise OAuthError("GitHub Copilot token response lacks token/expires_at")
    entry: dict[str, Any] = {"refresh": github_token, "access": body["token"],
                             "expires": int(body["expires_at"] * 1000 - 5 * 60 * 1000)}
    if enterprise:
        entry["enterpriseUrl"] = enterprise
    return entry


def _poll(domain: str, device: dict[str, Any], cb: LoginCallbacks) -> str:
    deadline = time.monotonic() + float(device["expires_in"])
    interval = max(MIN_INTERVAL_S, float(device["interval"]))
    factor, slow_downs = INTERVAL_FACTOR, 0
    while time.monotonic() < deadline:
        wait = min(interval * factor, max(0.0, deadline - time.monotonic()))
        end = time.monotonic() + wait
        while time.monotonic() < end:
            if cb.should_stop():
                raise OAuthError("Login cancelled")
            time.sleep(min(0.1, max(0.0, end - time.monotonic())))
        status, body = http_json(urls(domain)["token"], method="POST", headers={"User-Agent": HEADERS["User-Agent"]},
                                 form={"client_id": CLIENT_ID, "device_code": device["device_code"],
                                       "grant_type": "urn:ietf:params:oauth:grant-type:device_code"})
        if isinstance(body, dict) and isinstance(body.get("access_token"), str):
            return body["access_token"]
        error = body.get("error") if isinstance(body, dict) else None
        if error == "authorization_pending":
            continue
        if error == "slow_down":
            slow_downs += 1
            given = body.get("interval") if isinstance(body, dict) else None
            interval = float(given) if isinstance(given, (int, float)) and given > 0 else interval + 5
            factor = SLOW_DOWN_FACTOR
            continue
        detail = body.get("error_description") if isinstance(body, dict) else None
        raise OAuthError(f"Device flow failed: {error or status}" + (f": {detail}" if detail else ""))
    if slow_downs:
        raise OAuthError("Device flow timed out after slow_down responses (often a clock that drifts, as in WSL "
                         "or a VM: sync the clock and try again)")
    raise OAuthError("Device flow timed out")


def login(cb: LoginCallbacks) -> dict[str, Any]:
    answer = cb.on_prompt("GitHub Enterprise URL/domain (blank for github.com)")
    enterprise = normalize_domain(answer)
    if answer.strip() and not enterprise:
        raise OAuthError("Invalid GitHub Enterprise URL/domain")
    domain = enterprise or "github.com"
    status, body = http_json(urls(domain)["device"], method="POST", headers={"User-Agent": HEADERS["User-Agent"]},
                             form={"client_id": CLIENT_ID, "scope": "read:user"})
    if status >= 400 or not isinstance(body, dict):
        raise OAuthError(f"GitHub device code request failed ({status}): {body}")
    need: dict[str, type | tuple[type, ...]] = {"device_code": str, "user_code": str, "verification_uri": str,
                                                "interval": (int, float),
            "expires_in": (int, float)}
    if any(not isinstance(body.get(k), t) for k, t in need.items()):
        raise OAuthError("GitHub's device code response lacks a field")
    cb.on_auth(body["verification_uri"], f"Enter code: {body['user_code']}")
    github_token = _poll(domain, body, cb)
    return copilot_token(github_token, enterprise)


def refresh(entry: dict[str, Any]) -> dict[str, Any]:
    token = entry.get("refresh")
    if not isinstance(token, str) or not token:
        raise OAuthError("the GitHub Copilot login has no GitHub token; run pisces login github-copilot")
    enterprise = entry.get("enterpriseUrl")
    return copilot_token(token, enterprise if isinstance(enterprise, str) and enterprise else None)


PROVIDER = OAuthProvider(id="github-copilot", name="GitHub Copilot", login=login, refresh=refresh,
                         why="device code at github.com (or a GitHub Enterprise domain)")
