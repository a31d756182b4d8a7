"""MCP servers through the real ``pisces --mode rpc``: the faux model calls a tool of a Python SDK server over
stdio and over Streamable HTTP; hostile servers (crash at start, hang in initialize, invalid JSON) fail alone; an
untrusted project's ``.mcp.json`` starts no process; no server process outlives pisces (exit, SIGTERM)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

pytest.importorskip("mcp")

SERVERS = os.path.join(os.path.dirname(__file__), "..", "core", "mcp", "servers.py")


def server(kind: str, marker: str, **extra):
    return {"command": sys.executable, "args": [os.path.abspath(SERVERS), kind, "0", marker], **extra}


def procs_with(marker: str) -> list[int]:
    """Live processes whose command line holds ``marker`` (zombies excluded)."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd = f.read()
            with open(f"/proc/{entry}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if marker.encode() in cmd and state != b"Z":
            out.append(int(entry))
    return out


def wait_gone(marker: str, timeout: float = 20.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        left = procs_with(marker)
        if not left:
            return []
        time.sleep(0.1)
    return procs_with(marker)


def tools_ready(p, server_name: str, timeout: float = 60.0) -> dict:
    """The server's status once it is connected (polled: it may connect before the first frame)."""
    deadline = time.monotonic() + timeout
    while True:
        full = p.ok({"type": "mcp_status"})
        status = {s["name"]: s for s in full["servers"]}.get(server_name) or {"status": "absent", **full}
        if status["status"] == "connected" or time.monotonic() > deadline:
            assert status["status"] == "connected", status
            return {**status, "toolNames": status["tools"]}
        time.sleep(0.1)


def call(name, args):
    return {"toolCalls": [{"name": name, "arguments": args}]}


def test_the_model_calls_an_mcp_tool_and_hostile_servers_fail_alone(home, spawn, tmp_path):
    marker = f"mcpmark-{tmp_path.name}"
    home.write_json("mcp.json", {"mcpServers": {
        "good": server("good", marker),
        "crash": server("crash", marker),
        "hang": server("hang", marker, timeout=1500),
        "garbage": server("garbage", marker),
    }})
    p = spawn("--faux-script", home.faux_script([call("mcp__good__add", {"a": 2, "b": 40}), {"text": "done"}]),
              "--approval-mode", "yolo")
    state = p.ok({"type": "get_state"})  # answers while the servers connect
    assert "sessionId" in state
    event = tools_ready(p, "good")
    assert "mcp__good__add" in event["toolNames"]
    p.send({"id": "go", "type": "prompt", "message": "add"})
    end = p.until(lambda f: f.get("type") == "tool_execution_end", 60)[-1]
    assert end["toolName"] == "mcp__good__add" and not end["isError"]
    assert end["result"]["content"][0]["text"] == "42"
    p.until_type("agent_end", 30)
    deadline = time.monotonic() + 90
    while True:
        status = {s["name"]: s for s in p.ok({"type": "mcp_status"})["servers"]}
        if all(s["status"] not in ("pending", "connecting") for s in status.values()) \
                or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert status["good"]["status"] == "connected"
    assert status["crash"]["status"] == "failed" and status["crash"]["error"]
    assert status["hang"]["status"] == "failed" and "initialize" in status["hang"]["error"]
    assert status["garbage"]["status"] == "connected"  # bad lines noted, the good ones still served
    assert procs_with(marker)
    p.close_stdin()
    p.wait(30)
    assert wait_gone(marker) == []


def test_sigterm_stops_every_server_process(home, spawn, tmp_path):
    marker = f"mcpterm-{tmp_path.name}"
    home.write_json("mcp.json", {"mcpServers": {"a": server("good", marker), "b": server("good", marker)}})
    p = spawn("--faux-script", home.faux_script([]))
    tools_ready(p, "a")
    tools_ready(p, "b") if len(procs_with(marker)) < 2 else None
    assert len(procs_with(marker)) >= 2
    os.kill(p.p.pid, signal.SIGTERM)
    p.wait(30)
    assert wait_gone(marker) == []


def test_an_untrusted_clone_with_mcp_json_starts_no_process(home, spawn, tmp_path):
    touched = tmp_path / "touched"
    script = f"import pathlib; pathlib.Path({str(touched)!r}).write_text('ran')"
    with open(os.path.join(home.cwd, ".mcp.json"), "w") as f:
        json.dump({"mcpServers": {"evil": {"command": sys.executable, "args": ["-c", script]}}}, f)
    p = spawn("--faux-script", home.faux_script([]))
    status = p.ok({"type": "mcp_status"})
    assert status["notStarted"] == ["evil"] and status["servers"] == []
    assert "not trusted" in status["message"] and "trust_project" in status["message"]
    time.sleep(1.0)  # give a wrongly started process the time to write its file
    assert not touched.exists()
    p.close_stdin()
    p.wait(30)
    assert "evil" in p.stderr and "not trusted" in p.stderr


def test_a_trusted_project_starts_its_servers(home, spawn, tmp_path):
    marker = f"mcptrust-{tmp_path.name}"
    os.makedirs(os.path.join(home.cwd, ".pisces"))
    with open(os.path.join(home.cwd, ".pisces", "mcp.json"), "w") as f:
        json.dump({"mcpServers": {"proj": server("good", marker)}}, f)
    p = spawn("--faux-script", home.faux_script([]), "--approve")
    assert "mcp__proj__echo" in tools_ready(p, "proj")["toolNames"]
    assert p.ok({"type": "mcp_status"})["servers"][0]["scope"] == "project"
    p.close_stdin()
    p.wait(30)
    assert wait_gone(marker) == []


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_streamable_http_server_toggle_and_reconnect(home, spawn, tmp_path):
    port = free_port()
    marker = f"mcphttp-{tmp_path.name}"
    http = subprocess.Popen([sys.executable, SERVERS, "good-http", str(port), marker], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.1)
        home.write_json("mcp.json", {"mcpServers": {"web": {"type": "http", "url": "http://127.0.0.1:${MCP_PORT}/mcp",
                                                            "headers": {"X-Token": "${MCP_TOKEN}"}}}})
        p = spawn("--faux-script", home.faux_script([call("mcp__web__echo", {"text": "hi"}), {"text": "ok"}]),
                  "--approval-mode", "yolo", env=home.env(MCP_PORT=str(port), MCP_TOKEN="s3cret"))
        tools_ready(p, "web")
        p.send({"id": "go", "type": "prompt", "message": "echo"})
        end = p.until(lambda f: f.get("type") == "tool_execution_end", 60)[-1]
        assert end["result"]["content"][0]["text"] == "echo: hi"
        p.until_type("agent_end", 30)
        status = p.ok({"type": "mcp_status"})["servers"][0]
        assert status["url"] == "http://127.0.0.1:${MCP_PORT}/mcp" and "s3cret" not in json.dumps(status)
        off = p.ok({"type": "mcp_toggle", "server": "web", "enabled": False}, 30)
        assert off["status"] == "disabled" and off["tools"] == []
        assert not [t for t in p.ok({"type": "get_tools"})["activeToolNames"] if t.startswith("mcp__")]
        again = p.ok({"type": "mcp_reconnect", "server": "web"}, 60)
        assert again["status"] == "connected" and "mcp__web__echo" in again["tools"]
        changed = [f for f in p.last_events if f.get("type") == "mcp_tools_changed" and f.get("toolNames")]
        assert changed and changed[-1]["server"] == "web" and "mcp__web__echo" in changed[-1]["toolNames"]
        assert {"type": "mcp_server_status", "server": "web", "status": "connected"} in p.last_events
        bad = p.request({"type": "mcp_toggle", "server": "nope", "enabled": True})
        assert "No MCP server named 'nope'" in bad["error"]
        p.close_stdin()
        p.wait(30)
    finally:
        http.terminate()
        http.wait(10)


@pytest.mark.parametrize("configured", [False, True])
def test_rpc_start_up_imports_the_sdk_only_when_a_server_is_configured(home, tmp_path, configured):
    if configured:
        home.write_json("mcp.json", {"mcpServers": {"x": {"command": "/nonexistent/server"}}})
    r = subprocess.run([sys.executable, "-X", "importtime", "-m", "pisces", "--mode", "rpc", "--no-session",
                        "--faux-script", home.faux_script([])], input='{"type":"get_state"}\n', capture_output=True,
                       text=True, timeout=120, env=home.env(), cwd=home.cwd)
    assert '"command":"get_state","success":true' in r.stdout, r.stderr[-2000:]
    modules = {line.split("|")[-1].strip() for line in r.stderr.splitlines() if line.startswith("import time:")}
    mcp_modules = {m for m in modules if m.split(".")[0] in ("mcp", "mcp_types", "anyio")
                   or m.startswith("pisces.core.mcp")}
    if configured:
        assert "pisces.core.mcp.manager" in mcp_modules  # the SDK itself loads in a worker thread
    else:
        assert mcp_modules == set()
