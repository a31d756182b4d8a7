"""The OS sandbox through the real ``pisces`` process and this machine's kernel (docs/security.md#the-os-sandbox):
a bash write outside the workspace fails inside the sandbox and succeeds after the person approves the
escalation (and not when they refuse); an isolated subagent cannot write the parent tree by a path it builds at
run time; with ``sandbox.network`` false a connection to a 127.0.0.1 server is refused; and the default differs
per front end as documented (on for typed clients, off for pi's untyped clients and print mode)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import threading

import pytest

from pisces.core.sandbox import landlock

pytestmark = pytest.mark.skipif(landlock.available() < 4, reason="needs Landlock ABI 4 or later in the kernel")

HANG = 60


def bash(command: str, call_id: str) -> dict:
    return {"toolCalls": [{"name": "bash", "arguments": {"command": command}, "id": call_id}]}


def typed(p) -> dict:
    return p.ok({"type": "negotiate_protocol", "protocolVersion": 2,
                 "clientCapabilities": {"typedToolApprovals": 1}})


def text_of(end: dict) -> str:
    return "".join(c.get("text", "") for c in end["result"]["content"])


def run(p, message: str, answer) -> tuple[list[dict], dict[str, dict]]:
    """Prompt, answer each approval request with ``answer(frame)``; (the requests, tool ends by call id)."""
    p.send({"type": "prompt", "message": message})
    asked = []
    while True:
        frame = p.until(lambda f: f.get("type") in ("tool_approval_request", "agent_settled"), HANG)[-1]
        if frame["type"] == "agent_settled":
            break
        asked.append(frame)
        p.send({"type": "tool_approval_response", "id": frame["id"], "toolCallId": frame["toolCallId"],
                "approved": answer(frame)})
    ends = {f["toolCallId"]: f for f in p.frames if f.get("type") == "tool_execution_end"}
    return asked, ends


def test_a_write_outside_the_workspace_is_blocked_and_runs_after_an_approved_escalation(home, spawn):
    outside = os.path.join(home.root, "outside")
    os.makedirs(outside)
    refused, allowed = os.path.join(outside, "refused.txt"), os.path.join(outside, "allowed.txt")
    p = spawn("--faux-script", home.faux_script([
        bash("echo in > inside.txt", "in"), bash(f"echo no > {refused}", "no"), {"text": "one"},
        bash(f"echo yes > {allowed}", "yes"), {"text": "two"}]))
    typed(p)
    p.ok({"type": "set_approval_mode", "mode": "yolo"})  # bash runs unasked: only the sandbox stops it
    state = p.ok({"type": "get_state"})["sandbox"]
    assert (state["mode"], state["modeSource"], state["enforced"]) == ("workspace-write", "default", True)
    asked, ends = run(p, "one", lambda f: False)
    assert [f["toolCallId"] for f in asked] == ["no"]
    assert "the sandbox blocked" in asked[0]["detail"]["reason"] and asked[0]["identity"]["command"].endswith(refused)
    assert ends["in"]["isError"] is False and open(os.path.join(home.cwd, "inside.txt")).read() == "in\n"
    assert ends["no"]["isError"] is True and "Permission denied" in text_of(ends["no"])
    assert "The sandbox blocked this command" in text_of(ends["no"])
    assert not os.path.exists(refused)
    asked, ends = run(p, "two", lambda f: True)
    assert [f["toolCallId"] for f in asked] == ["yes"]
    assert ends["yes"]["isError"] is False
    assert open(allowed).read() == "yes\n"


def test_an_isolated_subagent_cannot_write_the_parent_tree_by_a_path_built_at_run_time(home, spawn):
    from taskkit import call_task, make_repo, read, script, settings, start, submit

    repo = make_repo(home.cwd)
    settings(home, {"isolation": {"mode": "worktree"}})
    # the parent tree's path comes from git at run time: no approval check can read it in the command's text
    escape = 'p="$(cd "$(git rev-parse --git-common-dir)/.." && pwd)"; echo owned > "$p/app.txt"'
    p = start(spawn, home, "--faux-script", script(home, [
        call_task({"agent": "task", "isolated": True, "tasks": [
            {"id": "Escape", "description": "escape", "assignment": "Write the parent tree."}]}),
        {"text": "done"}], {
        "Escape": [bash(escape, "esc"), bash("echo ok > inside.txt", "ins"), submit({"done": True})]}))
    typed(p)
    p.ok({"type": "set_approval_mode", "mode": "yolo"})
    asked, _ = run(p, "go", lambda f: False)
    assert [("the sandbox blocked" in f["detail"]["reason"]) for f in asked] == [True]
    assert read(os.path.join(repo, "app.txt")) == "alpha\nbeta\ngamma\n"  # the user's tree is untouched
    assert read(os.path.join(repo, "inside.txt")) == "ok\n"  # the write in its worktree came back as a patch


def test_pi_clients_keep_pi_behaviour_while_the_subagent_is_confined_all_the_same(home, spawn):
    p = spawn("--faux-script", home.faux_script([]))
    state = p.ok({"type": "get_state"})["sandbox"]
    assert (state["mode"], state["modeSource"], state["delegatedMode"]) == ("off", "default", "workspace-write")
    typed(p)
    assert p.ok({"type": "get_state"})["sandbox"]["mode"] == "workspace-write"
    p = spawn("--faux-script", home.faux_script([]), "--sandbox", "read-only")
    state = p.ok({"type": "get_state"})["sandbox"]
    assert (state["mode"], state["modeSource"]) == ("read-only", "cli")


def _print_run(home, command: str, *flags: str) -> tuple[dict, str]:
    from e2eproc import PISCES

    script = home.faux_script([bash(command, "c"), {"text": "done"}], name="p.json")
    out = subprocess.run([*PISCES, "--faux-script", script, "--mode", "json", *flags, "go"], env=home.env(),
                         cwd=home.cwd, capture_output=True, text=True, timeout=HANG)
    assert out.returncode == 0, out.stderr
    return next(e for e in map(json.loads, out.stdout.splitlines()) if e.get("type") == "tool_execution_end"), \
        out.stderr


def test_print_mode_is_unconfined_by_default_and_reports_the_sandbox_when_asked_for(home):
    target = os.path.join(home.root, "outside.txt")
    end, _ = _print_run(home, f"echo a > {target}")
    assert end["isError"] is False and open(target).read() == "a\n"  # pi's behaviour
    os.unlink(target)
    end, stderr = _print_run(home, f"echo a > {target}", "--sandbox", "workspace-write")
    assert end["isError"] is True and not os.path.exists(target)
    assert "The sandbox blocked this command" in text_of(end) and "has no one to ask" in text_of(end)
    assert "the sandbox blocked this command" in stderr and "sandbox.writableRoots" in stderr


def test_network_off_refuses_a_connection_to_a_127_0_0_1_server(home, spawn):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    port = server.getsockname()[1]
    accepted: list[int] = []
    stop = threading.Event()

    def serve() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
                accepted.append(1)
                conn.close()
            except OSError:
                continue

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    probe = (f"python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {port}), timeout=10); "
             "print(\"connected\")'")
    try:
        p = spawn("--faux-script", home.faux_script([bash(probe, "on"), {"text": "on"}]))
        typed(p)
        p.ok({"type": "set_approval_mode", "mode": "yolo"})
        _, ends = run(p, "on", lambda f: False)
        assert ends["on"]["isError"] is False and "connected" in text_of(ends["on"])
        assert len(accepted) == 1
        home.write_json("settings.json", {"sandbox": {"network": False}})
        p = spawn("--faux-script", home.faux_script([bash(probe, "off"), {"text": "off"}], name="off.json"))
        typed(p)
        p.ok({"type": "set_approval_mode", "mode": "yolo"})
        assert p.ok({"type": "get_state"})["sandbox"]["network"] is False
        asked, ends = run(p, "off", lambda f: False)
        assert ends["off"]["isError"] is True and "PermissionError" in text_of(ends["off"])
        assert "connected" not in text_of(ends["off"]).replace("not run outside", "")
        assert [f["toolCallId"] for f in asked] == ["off"]  # the person was asked to run it outside
        assert len(accepted) == 1  # the confined command never reached the server
    finally:
        stop.set()
        thread.join(5)
        server.close()
