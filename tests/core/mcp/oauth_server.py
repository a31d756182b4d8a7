"""A scripted OAuth authorization server and an MCP server that wants its bearer tokens, in one process on
127.0.0.1: ``python oauth_server.py PORT [EXPIRES_IN]``.

Endpoints: protected-resource and authorization-server metadata, ``/register`` (dynamic registration),
``/authorize`` (no person: it redirects at once with a code bound to the PKCE challenge), ``/token``
(authorization_code with the S256 verifier checked, refresh_token), ``/mcp`` (401 with ``WWW-Authenticate``
unless the bearer token is current), ``/control`` (POST ``{"forget_clients": true}`` -> invalid_client,
``{"revoke_refresh": true}`` -> invalid_grant) and ``/state`` (counts of registrations, grants, refreshes).
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import sys
import time
from urllib.parse import urlencode

import uvicorn
from servers import good_server
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response

PORT = int(sys.argv[1])
EXPIRES_IN = int(sys.argv[2]) if len(sys.argv) > 2 else 3600
BASE = f"http://127.0.0.1:{PORT}"
clients: dict[str, dict] = {}
codes: dict[str, dict] = {}
access: dict[str, float] = {}
refresh: dict[str, str] = {}  # refresh token -> client id
counts = {"registrations": 0, "authorizations": 0, "codeGrants": 0, "refreshes": 0, "refused": []}
mcp_app = good_server().streamable_http_app()


def tokens(client_id: str) -> dict:
    a, r = secrets.token_urlsafe(16), secrets.token_urlsafe(16)
    access[a] = time.time() + EXPIRES_IN
    refresh[r] = client_id
    return {"access_token": a, "token_type": "Bearer", "expires_in": EXPIRES_IN, "refresh_token": r}


def error(code: str, status: int = 400) -> JSONResponse:
    counts["refused"].append(code)
    return JSONResponse({"error": code}, status_code=status)


async def handle(request: Request) -> Response:
    path = request.url.path
    if path.startswith("/.well-known/oauth-protected-resource"):
        return JSONResponse({"resource": f"{BASE}/mcp", "authorization_servers": [BASE]})
    if path.startswith("/.well-known/oauth-authorization-server") or path.startswith("/.well-known/openid"):
        return JSONResponse({"issuer": BASE, "authorization_endpoint": f"{BASE}/authorize",
                             "token_endpoint": f"{BASE}/token", "registration_endpoint": f"{BASE}/register",
                             "response_types_supported": ["code"], "code_challenge_methods_supported": ["S256"],
                             "grant_types_supported": ["authorization_code", "refresh_token"],
                             "token_endpoint_auth_methods_supported": ["none"]})
    if path == "/register":
        body = await request.json()
        client_id = secrets.token_hex(8)
        clients[client_id] = body
        counts["registrations"] += 1
        return JSONResponse({**body, "client_id": client_id, "client_id_issued_at": int(time.time())}, status_code=201)
    if path == "/authorize":
        q = request.query_params
        client = clients.get(q.get("client_id", ""))
        if client is None or q.get("redirect_uri") not in client.get("redirect_uris", []):
            return Response("unknown client or redirect", status_code=400)
        code = secrets.token_urlsafe(12)
        codes[code] = {"client": q["client_id"], "challenge": q.get("code_challenge"), "redirect": q["redirect_uri"]}
        counts["authorizations"] += 1
        return RedirectResponse(f"{q['redirect_uri']}?{urlencode({'code': code, 'state': q.get('state', '')})}", 302)
    if path == "/token":
        form = await request.form()
        if form.get("client_id") not in clients:
            return error("invalid_client", 401)
        if form.get("grant_type") == "authorization_code":
            grant = codes.pop(str(form.get("code")), None)
            verifier = str(form.get("code_verifier", ""))
            digest = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
            if grant is None or grant["challenge"] != digest or grant["client"] != form.get("client_id"):
                return error("invalid_grant")
            counts["codeGrants"] += 1
            return JSONResponse(tokens(grant["client"]))
        if form.get("grant_type") == "refresh_token":
            owner = refresh.pop(str(form.get("refresh_token")), None)
            if owner != form.get("client_id"):
                return error("invalid_grant")
            counts["refreshes"] += 1
            return JSONResponse(tokens(owner))
        return error("unsupported_grant_type")
    if path == "/control":
        body = await request.json()
        if body.get("forget_clients"):
            clients.clear()
        if body.get("revoke_refresh"):
            refresh.clear()
        return JSONResponse({"ok": True})
    if path == "/state":
        return JSONResponse({**counts, "clients": len(clients)})
    return Response("not found", status_code=404)


async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        return await mcp_app(scope, receive, send)
    if scope["type"] == "http" and scope["path"].startswith("/mcp"):
        auth = dict(scope["headers"]).get(b"authorization", b"").decode()
        token = auth[7:] if auth.startswith("Bearer ") else ""
        if access.get(token, 0) < time.time():
            meta = f'Bearer resource_metadata="{BASE}/.well-known/oauth-protected-resource/mcp"'
            response = JSONResponse({"error": "invalid_token"}, status_code=401, headers={"WWW-Authenticate": meta})
            return await response(scope, receive, send)
        return await mcp_app(scope, receive, send)
    response = await handle(Request(scope, receive))
    await response(scope, receive, send)


if __name__ == "__main__":
    print(json.dumps({"port": PORT}), flush=True)
    uvicorn.run(app, host="127.0.0.1", port=PORT, log_level="warning")
