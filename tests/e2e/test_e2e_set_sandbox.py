"""``set_sandbox`` through the real ``pisces`` process and this machine's kernel (docs/security.md): a person's
client tightens the sandbox at run time (network off: a UDP datagram and a TCP connection to 127.0.0.1 servers
never arrive; read-only: a write in the workspace fails) and loosens it again (recorded in
``get_state.sandbox.changes`` and on stderr); bad input gets a clear error and the process keeps serving; the
model cannot call it (no tool of that name); and no command run for the model inherits the web token."""

from __future__ import annotations

import os
import socket

import pytest

from pisces.core.sandbox import landlock

pytestmark = pytest.mark.skipif(landlock.available() < 4, reason="needs Landlock ABI 4 or later in the kernel")

HANG = 60


def bash(command: str, call_id: str) -> dict:
    return {"toolCalls": [{"name": "bash", "arguments": {"command": command}, "id": call_id}]}


def text_of(end: dict) -> str:
    return "".join(c.get("text", "") for c in end["result"]["content"])


def run(p, message: str) -> dict[str, dict]:
    """Prompt, refuse every escalation; the tool ends by call id."""
    p.send({"type": "prompt", "message": message})
    while True:
        frame = p.until(lambda f: f.get("type") in ("tool_approval_request", "agent_settled"), HANG)[-1]
        if frame["type"] == "agent_settled":
            break
        p.send({"type": "tool_approval_response", "id": frame["id"], "toolCallId": frame["toolCallId"],
                "approved": False})
    return {f["toolCallId"]: f for f in p.frames if f.get("type") == "tool_execution_end"}


def test_a_person_tightens_and_loosens_the_sandbox_at_run_time(home, spawn):
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    tcp = socket.socket()
    tcp.bind(("127.0.0.1", 0))
    tcp.listen(4)
    uport, tport = udp.getsockname()[1], tcp.getsockname()[1]
    probe = (f"python3 -c 'import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); "
             f"s.sendto(b\"dgram\", (\"127.0.0.1\", {uport})); "
             f"socket.create_connection((\"127.0.0.1\", {tport}), timeout=10); print(\"reached\")'")
    outside = os.path.join(home.root, "outside.txt")
    try:
        p = spawn("--faux-script", home.faux_script([
            bash(probe, "net-off"), {"text": "1"},
            bash("echo x > in-workspace.txt", "ro"), {"text": "2"},
            bash(f"{probe} && echo out > {outside}", "loose"), {"text": "3"}]))
        p.ok({"type": "negotiate_protocol", "protocolVersion": 2,
              "clientCapabilities": {"typedToolApprovals": 1}})
        p.ok({"type": "set_approval_mode", "mode": "yolo"})  # only the sandbox stops the commands
        state = p.ok({"type": "get_state"})["sandbox"]
        assert (state["mode"], state["network"], state["changes"]) == ("workspace-write", True, [])

        state = p.ok({"type": "set_sandbox", "network": False})
        assert (state["mode"], state["network"], state["networkSource"]) == ("workspace-write", False, "command")
        assert [c["loosened"] for c in state["changes"]] == [False]
        ends = run(p, "1")
        assert ends["net-off"]["isError"] is True and "PermissionError" in text_of(ends["net-off"])
        udp.settimeout(0.5)
        with pytest.raises(TimeoutError):
            udp.recvfrom(100)

        state = p.ok({"type": "set_sandbox", "mode": "read-only"})
        assert (state["mode"], state["modeSource"], state["network"]) == ("read-only", "command", False)
        ends = run(p, "2")
        assert ends["ro"]["isError"] is True and not os.path.exists(os.path.join(home.cwd, "in-workspace.txt"))

        state = p.ok({"type": "set_sandbox", "mode": "off", "network": True})
        assert (state["mode"], state["network"], state["enforced"]) == ("off", True, False)
        last = state["changes"][-1]
        assert last["loosened"] is True and last["from"] == {"mode": "read-only", "network": False}
        assert last["to"] == {"mode": "off", "network": True} and "client" in last["by"]
        assert "the sandbox was loosened by the client" in p.wait_stderr("loosened by")
        ends = run(p, "3")
        assert ends["loose"]["isError"] is False and "reached" in text_of(ends["loose"])
        assert open(outside).read() == "out\n"
        udp.settimeout(10)
        assert udp.recvfrom(100)[0] == b"dgram"

        state = p.ok({"type": "set_sandbox", "mode": None, "network": None})  # back to the default
        assert (state["mode"], state["modeSource"], state["network"]) == ("workspace-write", "default", True)
    finally:
        udp.close()
        tcp.close()


def test_bad_input_is_refused_clearly_and_the_model_cannot_call_it(home, spawn):
    p = spawn("--faux-script", home.faux_script([
        {"toolCalls": [{"name": "set_sandbox", "arguments": {"mode": "off"}, "id": "m"}]}, {"text": "done"}]))
    p.ok({"type": "negotiate_protocol", "protocolVersion": 2, "clientCapabilities": {"typedToolApprovals": 1}})
    for cmd, error in (({}, "set_sandbox needs 'mode'"), ({"mode": "strict"}, "Invalid sandbox mode 'strict'"),
                       ({"network": "no"}, "Invalid 'network': expected true, false or null, got 'no'")):
        resp = p.request({"type": "set_sandbox", **cmd})
        assert resp["success"] is False and error in resp["error"]
    p.send({"type": "prompt", "message": "loosen it"})
    p.until(lambda f: f.get("type") == "agent_settled", HANG)
    end = next(f for f in p.frames if f.get("type") == "tool_execution_end")
    assert end["isError"] is True and "not found" in text_of(end).lower()
    state = p.ok({"type": "get_state"})["sandbox"]
    assert (state["mode"], state["changes"]) == ("workspace-write", [])


def test_no_command_run_for_the_model_inherits_the_web_token(home, spawn):
    echo = "echo token=${PISCES_WEB_TOKEN:-none}"
    p = spawn("--faux-script", home.faux_script([bash(echo, "confined"), {"text": "1"}, bash(echo, "free"),
                                                 {"text": "2"}]),
              env=home.env(PISCES_WEB_TOKEN="s3cret-web-token-0123456789abcdef"))
    p.ok({"type": "negotiate_protocol", "protocolVersion": 2, "clientCapabilities": {"typedToolApprovals": 1}})
    p.ok({"type": "set_approval_mode", "mode": "yolo"})
    assert "token=none" in text_of(run(p, "1")["confined"])
    p.ok({"type": "set_sandbox", "mode": "off"})  # unconfined commands do not get it either
    assert "token=none" in text_of(run(p, "2")["free"])
