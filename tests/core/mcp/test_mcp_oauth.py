"""OAuth for a remote MCP server against a scripted authorization server and a Streamable HTTP MCP server that
wants its bearer tokens (tests/core/mcp/oauth_server.py, 127.0.0.1). The browser is a hook that follows the
authorization redirect to pisces' callback listener.

It proves: a session without authorization fails that server with one clear request (the command to run), and
opens no browser; ``login`` registers a client dynamically, goes through PKCE and saves client and tokens
privately; the next session connects with the saved token; a token close to its expiry is refreshed before it
expires; ``invalid_client`` on refresh makes pisces register a new client; ``invalid_grant`` asks the person once.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import stat
import subprocess
import sys
import time

import httpx2 as httpx
import pytest

pytest.importorskip("mcp")

from mcpkit import until

from pisces.core.mcp.config import parse_server
from pisces.core.mcp.oauth import FileStorage, login
from pisces.core.session.build import create_agent_session_async

HERE = os.path.dirname(os.path.abspath(__file__))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def auth_server():
    def start(expires_in: int):
        port = free_port()
        proc = subprocess.Popen([sys.executable, os.path.join(HERE, "oauth_server.py"), str(port), str(expires_in)],
                                cwd=HERE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
        procs.append(proc)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    return f"http://127.0.0.1:{port}"
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
            time.sleep(0.1)
        raise AssertionError("the authorization server did not listen")

    procs: list[subprocess.Popen] = []
    yield start
    for proc in procs:
        proc.terminate()
        proc.wait(10)


def follow(url: str) -> None:
    """The browser: GET the authorization URL and follow the redirect to pisces' callback."""
    r = httpx.get(url, follow_redirects=True, timeout=30)
    assert r.status_code == 200 and "authorized" in r.text, r.text


class Notes:
    def __init__(self):
        self.seen = []

    def notify(self, message, notify_type=None):
        self.seen.append((message, notify_type))


async def connect(tmp_path, base):
    (tmp_path / "agent" / "mcp.json").write_text(json.dumps({"mcpServers": {"remote": {"url": f"{base}/mcp"}}}))
    s = await create_agent_session_async(cwd=str(tmp_path / "work"), provider="faux", no_session=True)
    notes = Notes()
    s.ui = notes
    await until(lambda: s.mcp.servers["remote"].state in ("connected", "failed"))
    return s, notes


def state(base):
    return httpx.get(f"{base}/state", timeout=10).json()


def expire_soon(agent, cfg):
    """Make the saved token look about to expire, so that the next connection refreshes it."""
    stored = FileStorage(agent, cfg)
    stored.write({**stored.read(), "expiresAt": time.time() + 5})


@pytest.fixture
def dirs(tmp_path, monkeypatch):
    (tmp_path / "agent").mkdir()
    (tmp_path / "work").mkdir()
    monkeypatch.setenv("PISCES_CODING_AGENT_DIR", str(tmp_path / "agent"))
    return tmp_path


async def test_login_then_sessions_use_and_refresh_the_saved_tokens(dirs, auth_server):
    base = auth_server(3600)
    agent = str(dirs / "agent")
    cfg = parse_server("remote", {"url": f"{base}/mcp"}, "test", "user")
    opened = []

    s, notes = await connect(dirs, base)
    try:
        status = s.mcp.status()["servers"][0]
        assert status["status"] == "failed" and status["needsLogin"] is True
        assert "pisces mcp login remote" in status["error"] and "not authorized yet" in status["error"]
        assert [m for m, _ in notes.seen] == [status["error"]]  # told once
    finally:
        await s.shutdown()

    result = await login(agent, cfg, open_url=lambda url: (opened.append(url), follow(url)))
    assert result["authorized"] and result["registered"]
    assert "code_challenge_method=S256" in opened[0] and "code_challenge=" in opened[0]
    stored = FileStorage(agent, cfg)
    assert stat.S_IMODE(os.stat(stored.path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(os.path.dirname(stored.path)).st_mode) == 0o700
    first = state(base)
    assert first["codeGrants"] == 1 and first["registrations"] <= 2  # the failed session may have registered

    data = stored.read()
    stored.write({**data, "expiresAt": time.time() + 40})  # as if an hour had passed: 40 s left, inside the margin
    s, notes = await connect(dirs, base)
    try:
        assert s.mcp.servers["remote"].state == "connected", s.mcp.status()
        result = await asyncio.wait_for(s.all_tools["mcp__remote__echo"].execute("1", {"text": "t"}, None, None), 60)
        assert result.content[0].text == "echo: t"
        assert state(base)["refreshes"] == 1  # the token had 40 s left: refreshed before it expired
        assert stored.read()["expiresAt"] > time.time() + 3000  # the new one, saved
        assert s.mcp.status()["servers"][0]["auth"]["authorized"] is True
        assert not notes.seen
    finally:
        await s.shutdown()


async def test_invalid_client_registers_again_and_invalid_grant_asks_once(dirs, auth_server):
    base = auth_server(3600)
    agent = str(dirs / "agent")
    cfg = parse_server("remote", {"url": f"{base}/mcp"}, "test", "user")
    await login(agent, cfg, open_url=follow)
    old_client = FileStorage(agent, cfg).read()["client"]["client_id"]
    registrations = state(base)["registrations"]

    httpx.post(f"{base}/control", json={"forget_clients": True}, timeout=10)
    expire_soon(agent, cfg)
    s, notes = await connect(dirs, base)
    try:
        status = s.mcp.status()["servers"][0]
        assert status["status"] == "failed" and "invalid_client" in status["error"], status
        assert "pisces mcp login remote" in status["error"]
    finally:
        await s.shutdown()
    assert "invalid_client" in state(base)["refused"]
    assert state(base)["registrations"] == registrations + 1  # a new client, saved
    assert FileStorage(agent, cfg).read()["client"]["client_id"] != old_client
    await login(agent, cfg, open_url=follow)  # with the new client
    assert state(base)["registrations"] == registrations + 1

    httpx.post(f"{base}/control", json={"revoke_refresh": True}, timeout=10)
    expire_soon(agent, cfg)
    s, notes = await connect(dirs, base)
    try:
        server = s.mcp.servers["remote"]
        assert server.state == "failed" and "invalid_grant" in server.error, server.error
        await s.mcp.reconnect("remote")  # still refused: the person is not asked a second time
        assert server.state == "failed"
        assert len(notes.seen) == 1 and "pisces mcp login remote" in notes.seen[0][0]
    finally:
        await s.shutdown()
    assert FileStorage(agent, cfg).read().get("tokens") is None  # the refused tokens are not tried again


def test_pisces_mcp_login_with_the_browser_hook_then_rpc_calls_the_tool(dirs, auth_server, tmp_path):
    """The real commands: ``pisces mcp login`` (``$BROWSER`` is a script that follows the redirect), then
    ``pisces --mode rpc`` whose model calls the server's tool with the saved token."""
    base = auth_server(3600)
    agent = dirs / "agent"
    (agent / "mcp.json").write_text(json.dumps({"mcpServers": {"remote": {"url": f"{base}/mcp"}}}))
    browser = tmp_path / "browser.py"
    browser.write_text("import sys, urllib.request\nprint(urllib.request.urlopen(sys.argv[1]).read().decode())\n")
    env = {**os.environ, "PISCES_CODING_AGENT_DIR": str(agent), "BROWSER": f"{sys.executable} {browser} %s"}
    env.pop("DISPLAY", None)
    r = subprocess.run([sys.executable, "-m", "pisces", "mcp", "login", "remote"], env=env, cwd=str(dirs / "work"),
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "remote is authorized" in r.stdout and "Open this address" in r.stderr
    faux = tmp_path / "faux.json"
    faux.write_text(json.dumps([{"toolCalls": [{"name": "mcp__remote__echo", "arguments": {"text": "oauth"}}]},
                                {"text": "done"}]))
    rpc = subprocess.Popen([sys.executable, "-m", "pisces", "--mode", "rpc", "--no-session", "--faux-script",
                            str(faux), "--approval-mode", "yolo"], env=env, cwd=str(dirs / "work"),
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert rpc.stdin is not None and rpc.stdout is not None
        for _ in range(600):
            rpc.stdin.write(json.dumps({"type": "mcp_status"}) + "\n")
            rpc.stdin.flush()
            line = rpc.stdout.readline()
            while '"command":"mcp_status"' not in line:
                line = rpc.stdout.readline()
            if json.loads(line)["data"]["servers"][0]["status"] in ("connected", "failed"):
                break
            time.sleep(0.1)
        assert json.loads(line)["data"]["servers"][0]["status"] == "connected", line
        rpc.stdin.write(json.dumps({"type": "prompt", "message": "go"}) + "\n")
        rpc.stdin.flush()
        while True:
            frame = json.loads(rpc.stdout.readline())
            if frame.get("type") == "tool_execution_end":
                break
        assert frame["result"]["content"][0]["text"] == "echo: oauth" and not frame["isError"]
    finally:
        rpc.kill()
        rpc.wait(10)


def test_rpc_mode_tells_the_person_once_with_an_extension_ui_notify(dirs, auth_server, tmp_path):
    base = auth_server(3600)
    agent = dirs / "agent"
    (agent / "mcp.json").write_text(json.dumps({"mcpServers": {"remote": {"url": f"{base}/mcp"}}}))
    env = {**os.environ, "PISCES_CODING_AGENT_DIR": str(agent)}
    faux = tmp_path / "faux.json"
    faux.write_text("[]")
    rpc = subprocess.Popen([sys.executable, "-m", "pisces", "--mode", "rpc", "--no-session", "--faux-script",
                            str(faux)], env=env, cwd=str(dirs / "work"), stdin=subprocess.PIPE,
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert rpc.stdin is not None and rpc.stdout is not None
        frames = []
        while True:
            frame = json.loads(rpc.stdout.readline())
            frames.append(frame)
            if frame.get("type") == "mcp_server_status" and frame.get("status") == "failed":
                break
        assert frame.get("needsLogin") is True and "pisces mcp login remote" in frame["error"]
        notes = [f for f in frames if f.get("type") == "extension_ui_request" and f.get("method") == "notify"]
        assert len(notes) == 1 and "pisces mcp login remote" in notes[0]["message"], frames
    finally:
        rpc.kill()
        rpc.wait(10)
