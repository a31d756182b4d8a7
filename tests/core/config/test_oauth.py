"""Subscription logins against a local scripted authorization server (127.0.0.1, no network): GitHub Copilot's
device flow and token exchange, ChatGPT's (OpenAI Codex) browser flow with PKCE and a localhost callback, the
entries pi writes to auth.json (mode 0600), refresh before expiry, ``pisces login``/``logout`` as processes,
and the no-key messages that name the login."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import socket
import stat
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from urllib.parse import parse_qs, urlparse

import pytest

from pisces.core.config import oauth, oauth_codex, oauth_copilot
from pisces.core.config.auth import AuthStorage, missing_key_message, no_api_key_error
from pisces.core.config.models_registry import ModelRegistry
from scripted_server import Reply

PROXY_TOKEN = "tid=abc;exp=9999999999;sku=copilot_individual;proxy-ep=proxy.individual.githubcopilot.com;"


def _form(rec) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(rec.raw.decode()).items()}


class GitHub:
    """Device code, polling (pending, slow_down, then the token) and the Copilot token exchange."""

    def __init__(self, polls=("authorization_pending", "slow_down")) -> None:
        self.polls = list(polls)
        self.exchanges = 0

    def __call__(self, rec) -> Reply:
        if rec.path == "/login/device/code":
            return Reply.json(200, {"device_code": "dev-123", "user_code": "ABCD-1234",
                                    "verification_uri": "https://github.com/login/device", "interval": 0,
                                    "expires_in": 60})
        if rec.path == "/login/oauth/access_token":
            if self.polls:
                return Reply.json(200, {"error": self.polls.pop(0), "interval": 0.01})
            return Reply.json(200, {"access_token": "gho_github_token", "token_type": "bearer"})
        if rec.path == "/copilot_internal/v2/token":
            if rec.headers.get("authorization") != "Bearer gho_github_token":
                return Reply.json(401, {"message": "Bad credentials"})
            self.exchanges += 1
            return Reply.json(200, {"token": f"{PROXY_TOKEN}n={self.exchanges}",
                                    "expires_at": int(time.time()) + 1800})
        return Reply.json(404, {"error": "not found"})


@pytest.fixture
def github(server, monkeypatch):
    monkeypatch.setenv("PISCES_GITHUB_OAUTH_URL", server.url)
    monkeypatch.setattr(oauth_copilot, "MIN_INTERVAL_S", 0.01)
    gh = GitHub()
    server.fallback = gh
    return gh


def _auth_path(tmp_path) -> str:
    return str(tmp_path / "agent" / "auth.json")


def test_copilot_device_flow_stores_pi_entry_privately(github, server, tmp_path):
    shown: list[tuple[str, str]] = []
    fields = oauth_copilot.login(oauth.LoginCallbacks(on_auth=lambda u, i: shown.append((u, i)),
                                                      on_prompt=lambda m: ""))
    assert shown == [("https://github.com/login/device", "Enter code: ABCD-1234")]
    path = _auth_path(tmp_path)
    oauth.save_credentials(path, "github-copilot", fields)
    entry = json.loads(open(path).read())["github-copilot"]
    assert entry["type"] == "oauth" and entry["refresh"] == "gho_github_token"
    assert entry["access"].startswith(PROXY_TOKEN)
    assert abs(entry["expires"] - (time.time() + 1800 - 300) * 1000) < 5000  # five minutes early, as pi
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    device, *polls, exchange = server.requests
    assert _form(device) == {"client_id": "Iv1.b507a08c87ecfe98", "scope": "read:user"}
    assert [_form(p)["grant_type"] for p in polls] == ["urn:ietf:params:oauth:grant-type:device_code"] * 3
    assert _form(polls[0])["device_code"] == "dev-123"
    assert exchange.method == "GET" and exchange.headers["editor-version"] == "vscode/1.107.0"
    assert exchange.headers["copilot-integration-id"] == "vscode-chat"


def test_copilot_device_flow_errors(github, server):
    github.polls = ["access_denied"]
    with pytest.raises(oauth.OAuthError, match="Device flow failed: access_denied"):
        oauth_copilot.login(oauth.LoginCallbacks(on_auth=lambda u, i: None))
    with pytest.raises(oauth.OAuthError, match="Invalid GitHub Enterprise"):
        oauth_copilot.login(oauth.LoginCallbacks(on_auth=lambda u, i: None, on_prompt=lambda m: "http://"))


def test_refresh_before_expiry_and_not_before(github, server, tmp_path):
    path = _auth_path(tmp_path)
    soon = oauth.now_ms() + 30_000  # within the minute's margin
    oauth.save_credentials(path, "github-copilot", {"refresh": "gho_github_token", "access": "old", "expires": soon})
    auth = AuthStorage(str(tmp_path / "agent"))
    key, source = auth.lookup("github-copilot")
    assert key.endswith("n=1") and source == "auth.json" and github.exchanges == 1
    saved = json.loads(open(path).read())["github-copilot"]
    assert saved["access"] == key and saved["expires"] > soon
    assert auth.get_api_key("github-copilot") == key and github.exchanges == 1  # fresh: not refreshed again
    # a refresh the server refuses gives no key (the request then names `pisces login`)
    oauth.save_credentials(path, "github-copilot", {"refresh": "revoked", "access": "old", "expires": 0})
    auth.reload()
    assert auth.get_api_key("github-copilot") is None


def test_copilot_login_sets_the_api_host_from_the_token(github, tmp_path, monkeypatch):
    for name in ("COPILOT_GITHUB_TOKEN", "GH_TOKEN", "GITHUB_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    agent = tmp_path / "agent"
    oauth.save_credentials(str(agent / "auth.json"), "github-copilot",
                           {"refresh": "gho_github_token", "access": PROXY_TOKEN.replace("individual", "business"),
                            "expires": oauth.now_ms() + 3_600_000})
    reg = ModelRegistry(str(agent))
    model = reg.find("github-copilot", "gpt-4o")
    assert model.baseUrl == "https://api.business.githubcopilot.com"
    assert reg.get_api_key(model) == PROXY_TOKEN.replace("individual", "business")


def _jwt(claims: dict) -> str:
    def part(obj: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()

    return f"{part({'alg': 'none'})}.{part(claims)}.sig"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class OpenAIAuth:
    """The token endpoint: checks the PKCE verifier against the challenge the browser was sent with."""

    def __init__(self) -> None:
        self.challenge = None
        self.forms: list[dict[str, str]] = []

    def __call__(self, rec) -> Reply:
        if rec.path != "/oauth/token":
            return Reply.json(404, {"error": "not found"})
        form = _form(rec)
        self.forms.append(form)
        if form["grant_type"] == "authorization_code":
            digest = hashlib.sha256(form["code_verifier"].encode()).digest()
            if base64.urlsafe_b64encode(digest).rstrip(b"=").decode() != self.challenge or form["code"] != "auth-code":
                return Reply.json(400, {"error": "invalid_grant"})
        elif form.get("refresh_token") != "rt-1":
            return Reply.json(400, {"error": "invalid_grant"})
        access = _jwt({"https://api.openai.com/auth": {"chatgpt_account_id": "acct-42"}, "n": len(self.forms)})
        return Reply.json(200, {"access_token": access, "refresh_token": "rt-1", "id_token": "x", "expires_in": 3600})


def test_codex_browser_flow_with_pkce_and_localhost_callback(server, monkeypatch, tmp_path):
    port = _free_port()
    monkeypatch.setenv("PISCES_OPENAI_OAUTH_URL", server.url)
    monkeypatch.setenv("PISCES_OAUTH_CALLBACK_PORT", str(port))
    auth_server = OpenAIAuth()
    server.fallback = auth_server
    seen: dict[str, object] = {}

    def browser(url: str, instructions: str) -> None:
        q = {k: v[0] for k, v in parse_qs(urlparse(url).query).items()}
        seen["query"] = q
        auth_server.challenge = q["code_challenge"]

        def redirect() -> None:
            base = f"http://127.0.0.1:{port}/auth/callback"
            try:
                urllib.request.urlopen(f"{base}?code=auth-code&state=forged", timeout=10)
            except urllib.error.HTTPError as exc:
                seen["forged"] = exc.code
            with urllib.request.urlopen(f"{base}?code=auth-code&state={q['state']}", timeout=10) as r:
                seen["page"] = r.read().decode()

        threading.Thread(target=redirect, daemon=True).start()

    fields = oauth_codex.login(oauth.LoginCallbacks(on_auth=browser))
    q = seen["query"]
    assert urlparse(server.url).netloc in server.url and q["client_id"] == "app_EMoamEEZ73f0CkXaXp7hrann"
    assert q["response_type"] == "code" and q["code_challenge_method"] == "S256"
    assert q["redirect_uri"] == f"http://localhost:{port}/auth/callback"
    assert q["scope"] == "openid profile email offline_access" and q["codex_cli_simplified_flow"] == "true"
    assert seen["forged"] == 400 and "completed" in seen["page"]
    assert fields["accountId"] == "acct-42" and fields["refresh"] == "rt-1"
    assert fields["expires"] > oauth.now_ms() + 3_500_000
    exchange = auth_server.forms[0]
    assert exchange["grant_type"] == "authorization_code" and exchange["redirect_uri"] == q["redirect_uri"]
    # refresh
    again = oauth_codex.refresh({"refresh": "rt-1"})
    assert again["accountId"] == "acct-42" and auth_server.forms[-1]["grant_type"] == "refresh_token"
    with pytest.raises(oauth.OAuthError, match="token refresh failed \\(400\\)"):
        oauth_codex.refresh({"refresh": "revoked"})


def test_codex_falls_back_to_a_pasted_redirect_when_the_port_is_taken(server, monkeypatch):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        monkeypatch.setenv("PISCES_OPENAI_OAUTH_URL", server.url)
        monkeypatch.setenv("PISCES_OAUTH_CALLBACK_PORT", str(taken.getsockname()[1]))
        auth_server = OpenAIAuth()
        server.fallback = auth_server
        state = {}

        def on_auth(url, instructions):
            q = {k: v[0] for k, v in parse_qs(urlparse(url).query).items()}
            auth_server.challenge, state["s"] = q["code_challenge"], q["state"]
            assert "is taken" in instructions

        fields = oauth_codex.login(oauth.LoginCallbacks(
            on_auth=on_auth, on_prompt=lambda m: f"http://localhost/auth/callback?code=auth-code&state={state['s']}"))
        assert fields["accountId"] == "acct-42"


def _pisces(args, env, stdin=""):
    return subprocess.run([sys.executable, "-m", "pisces", *args], input=stdin, capture_output=True, text=True,
                          timeout=60, env=env)


def test_login_and_logout_commands(github, server, tmp_path):
    agent = tmp_path / "agent"
    env = {**os.environ, "PISCES_CODING_AGENT_DIR": str(agent), "PISCES_GITHUB_OAUTH_URL": server.url}
    github.polls = []
    r = _pisces(["login", "github-copilot"], env, stdin="\n")
    assert r.returncode == 0, r.stderr
    assert "Enter code: ABCD-1234" in r.stdout and "Logged in to GitHub Copilot" in r.stdout
    path = agent / "auth.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert json.loads(path.read_text())["github-copilot"]["type"] == "oauth"
    listed = _pisces(["login"], env)
    assert "github-copilot" in listed.stdout and "openai-codex" in listed.stdout
    bad = _pisces(["login", "anthropic"], env)
    assert bad.returncode == 2 and "no login for 'anthropic'" in bad.stderr
    out = _pisces(["logout", "github-copilot"], env)
    assert out.returncode == 0 and "Logged out of github-copilot" in out.stdout
    assert "github-copilot" not in json.loads(path.read_text())


def test_no_key_messages_name_the_variable_and_the_login(tmp_path):
    text = missing_key_message("github-copilot", str(tmp_path))
    assert "COPILOT_GITHUB_TOKEN" in text and "pisces login github-copilot" in text
    assert "pisces login openai-codex" in missing_key_message("openai-codex", str(tmp_path))
    assert "pisces login" not in missing_key_message("groq", str(tmp_path))

    class M:
        provider, id = "github-copilot", "gpt-4o"

    class R:
        agent_dir, load_error = str(tmp_path), None

    err = no_api_key_error(M(), R(), docs="/docs")
    assert "Set COPILOT_GITHUB_TOKEN" in err and "`pisces login github-copilot`" in err
    from pisces.ai.providers._shared import missing_key_message as ai_message

    assert "pisces login openai-codex" in ai_message("openai-codex")


def test_has_auth_never_refreshes(github, tmp_path):
    path = _auth_path(tmp_path)
    oauth.save_credentials(path, "github-copilot", {"refresh": "gho_github_token", "access": "old", "expires": 0})
    auth = AuthStorage(str(tmp_path / "agent"))
    assert auth.has_auth("github-copilot") and auth.key_source("github-copilot") == "auth.json"
    assert github.exchanges == 0  # no request to the token endpoint for the question
    assert auth.get_api_key("github-copilot").endswith("n=1") and github.exchanges == 1


async def test_tui_login_and_logout_commands(github, tmp_path, monkeypatch):
    import asyncio

    from pisces.modes.tui.login import run

    agent = tmp_path / "agent"
    monkeypatch.setenv("PISCES_CODING_AGENT_DIR", str(agent))
    github.polls = []
    notes: list[str] = []

    class App:
        done = asyncio.Event()
        transcript = type("T", (), {"note": staticmethod(lambda text, *codes: notes.append(text))})()

        def schedule(self) -> None:
            pass

    auth = AuthStorage(str(agent))  # a host that read auth.json before the login
    assert auth.get_api_key("github-copilot") is None
    await run(App(), "/login", "github-copilot")
    await asyncio.sleep(0)  # the notes posted from the flow's thread
    assert "Enter code: ABCD-1234" in notes and any(n.startswith("logged in to GitHub Copilot") for n in notes)
    assert auth.get_api_key("github-copilot").startswith(PROXY_TOKEN)  # re-read once the file changed
    await run(App(), "/logout", "github-copilot")
    assert notes[-1] == "logged out of github-copilot" and auth.get_api_key("github-copilot") is None
    await run(App(), "/login", "anthropic")
    assert "no login for 'anthropic'" in notes[-1]


def test_list_models_key_column_names_the_login_and_never_refreshes(github, tmp_path, monkeypatch):
    from pisces.modes.list_models import key_status

    for name in ("COPILOT_GITHUB_TOKEN", "GH_TOKEN", "GITHUB_TOKEN", "AWS_PROFILE", "AWS_ACCESS_KEY_ID",
                 "AWS_BEARER_TOKEN_BEDROCK"):
        monkeypatch.delenv(name, raising=False)
    agent = tmp_path / "agent"
    reg = ModelRegistry(str(agent))
    assert key_status(reg, "openai-codex") == "missing: pisces login openai-codex"
    assert key_status(reg, "github-copilot") == "missing: set COPILOT_GITHUB_TOKEN or pisces login github-copilot"
    assert key_status(reg, "amazon-bedrock").startswith("missing: AWS credentials")
    oauth.save_credentials(str(agent / "auth.json"), "github-copilot",
                           {"refresh": "gho_github_token", "access": "stale", "expires": 0})
    assert key_status(reg, "github-copilot") == "auth.json" and github.exchanges == 0


def test_a_refresh_made_by_another_process_is_used_not_repeated(github, tmp_path):
    path = _auth_path(tmp_path)
    stale = {"type": "oauth", "refresh": "gho_github_token", "access": "old", "expires": 0}
    oauth.save_credentials(path, "github-copilot", {"refresh": "gho_github_token", "access": "new-by-other",
                                                    "expires": oauth.now_ms() + 3_600_000})
    calls = []
    token = oauth.access_token(path, "github-copilot", stale, refresh=lambda e: calls.append(e) or {})
    assert token == "new-by-other" and calls == []


def test_the_login_table_matches_the_flows():
    from pisces.ai.models import LOGIN_PROVIDERS

    assert tuple(oauth.providers()) == LOGIN_PROVIDERS
