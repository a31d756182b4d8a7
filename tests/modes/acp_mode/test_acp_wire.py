"""The wire itself: JSON-RPC hygiene, bad input, stdout, and what each mode imports at start-up."""

from __future__ import annotations

import json
import os
import subprocess
import time

from e2eproc import PISCES, Proc


def _acp(home, *args: str) -> Proc:
    return Proc([PISCES[0], "--mode", "acp", *args], home.env(), home.cwd)


def _answer(proc: Proc, request_id) -> dict:
    return proc.until(lambda f: f.get("id") == request_id and "method" not in f, timeout=30)[-1]


def test_bad_lines_get_errors_ids_echo_and_the_agent_keeps_serving(home):
    proc = _acp(home, "--provider", "faux")
    try:
        proc.send("this is not json")
        assert proc.next(30) == {"jsonrpc": "2.0", "id": None,
                                 "error": {"code": -32700, "message": proc.frames[-1]["error"]["message"]}}
        assert proc.frames[-1]["error"]["message"].startswith("Parse error")
        proc.send({"foo": "bar"})
        assert proc.next(30)["error"]["code"] == -32600
        proc.send({"jsonrpc": "2.0", "id": "init-A", "method": "initialize", "params": {"protocolVersion": 1}})
        init = _answer(proc, "init-A")  # ACP-JSONRPC-001: a string id comes back as it was
        assert init["result"]["protocolVersion"] == 1 and "error" not in init
        proc.send({"jsonrpc": "2.0", "id": 7, "method": "session/unknown", "params": {}})
        assert _answer(proc, 7)["error"]["code"] == -32601  # ACP-JSONRPC-004
        proc.send({"jsonrpc": "2.0", "id": 8, "method": "_pisces/anything", "params": {}})
        assert _answer(proc, 8)["error"]["code"] == -32601  # ACP-EXT-001: a custom request gets an answer
        proc.send({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "nope"}})
        proc.send({"jsonrpc": "2.0", "id": 9, "method": "session/new", "params": {"cwd": home.cwd, "mcpServers": []}})
        new = _answer(proc, 9)  # ACP-JSONRPC-003: the notification above got no answer; this is the next frame
        assert new["result"]["sessionId"]
        proc.send({"jsonrpc": "2.0", "id": 10, "method": "session/prompt", "params": {"sessionId": "nope",
                                                                                     "prompt": []}})
        unknown = _answer(proc, 10)["error"]
        assert unknown["code"] == -32002 and "\n" not in unknown["message"]  # ACP-ERROR-001: one sentence
        proc.send({"jsonrpc": "2.0", "id": 11, "method": "session/prompt", "params": {"sessionId": 5}})
        assert _answer(proc, 11)["error"]["code"] == -32602
    finally:
        proc.close()
    answers = [f for f in proc.frames if "method" not in f]
    assert sorted(str(f["id"]) for f in answers) == sorted(["None", "None", "init-A", "7", "8", "9", "10", "11"])
    for raw in proc.raw_lines:  # ACP-TRANSPORT-001/002: UTF-8 JSON-RPC lines, nothing else
        frame = json.loads(raw.decode("utf-8"))
        assert frame["jsonrpc"] == "2.0"
        assert ("id" in frame) == ("method" not in frame or "id" in frame)
        assert sum(k in frame for k in ("result", "error", "method")) == 1  # ACP-JSONRPC-002
    assert proc.p.returncode == 0  # stdin EOF ends the process cleanly (ACP-SHUTDOWN-001)


def test_stray_output_never_reaches_stdout_and_every_frame_validates_against_the_schema(home):
    """A command's output and anything printed to fd 1 go to stderr, never into the protocol stream; every
    frame of the exchange validates against the SDK's schema models (ACP-SCHEMA-001)."""
    from acp.schema import InitializeResponse, NewSessionResponse, PromptResponse, SessionNotification

    script = os.path.join(home.root, "faux.json")
    with open(script, "w") as f:
        json.dump([{"toolCalls": [{"name": "bash", "arguments": {"command": "echo LEAK; echo LEAK >&2"}}]},
                   {"text": "ok"}], f)
    proc = _acp(home, "--faux-script", script, "--yolo")  # no permission request: this driver does not answer one
    try:
        proc.send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}})
        _answer(proc, 1)
        proc.send({"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {"cwd": home.cwd, "mcpServers": []}})
        sid = _answer(proc, 2)["result"]["sessionId"]
        proc.send({"jsonrpc": "2.0", "id": 3, "method": "session/prompt",
                   "params": {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]}})
        assert _answer(proc, 3)["result"]["stopReason"] == "end_turn"
    finally:
        proc.close()
    models = {1: InitializeResponse, 2: NewSessionResponse, 3: PromptResponse}
    updates = 0
    for raw in proc.raw_lines:
        frame = json.loads(raw)
        if frame.get("method") == "session/update":
            SessionNotification.model_validate(frame["params"])
            updates += 1
        else:
            assert b"LEAK" not in raw
            models[frame["id"]].model_validate(frame["result"])
    assert updates >= 4  # a tool call, its update, the text, the session info


def _imported_at_start(home, stdin: str, *argv: str) -> tuple[set[str], float]:
    """Modules the real process imported (PYTHONPROFILEIMPORTTIME) by the time it answered its first request."""
    env = home.env(PYTHONPROFILEIMPORTTIME="1")
    started = time.monotonic()
    out = subprocess.run([PISCES[0], *argv], input=stdin.encode(), capture_output=True, env=env, cwd=home.cwd,
                         timeout=60)
    elapsed = time.monotonic() - started
    assert out.returncode == 0, out.stderr.decode()[-2000:]
    assert out.stdout.strip(), "no answer"
    modules = {line.split("|")[-1].strip() for line in out.stderr.decode().splitlines() if line.startswith("import time:")}
    return modules, elapsed


def test_rpc_mode_does_not_import_the_acp_sdk_and_acp_mode_does(home):
    rpc, _ = _imported_at_start(home, '{"type":"get_state"}\n', "--mode", "rpc", "--no-ready")
    assert "pisces.modes.rpc.server" in rpc
    assert not {m for m in rpc if m == "acp" or m.startswith("acp.") or m.startswith("pisces.modes.acp")}
    assert "pydantic" not in rpc
    acp, _ = _imported_at_start(home, '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}\n',
                                "--mode", "acp")
    assert "acp.schema" in acp and "pisces.modes.acp.agent" in acp
