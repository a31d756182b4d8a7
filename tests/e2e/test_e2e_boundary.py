"""The write boundary and the mode a reload cannot loosen, through the real ``pisces --mode rpc``
(docs/approval.md#the-write-boundary): in mode ``write`` a write inside the working directory runs unasked,
while a write to pisces' own configuration, to ``.git/``, ``.pi/``, ``.claude/``, ``.pisces/``, through a
symbolic link or ``..`` into one of them, or outside the working directory asks like a command; and a
settings file changed behind the session's back does not loosen its mode at ``reload_resources``."""

from __future__ import annotations

import json
import os

HANG = 30


def typed(p) -> dict:
    return p.ok({"type": "negotiate_protocol", "protocolVersion": 2,
                 "clientCapabilities": {"typedToolApprovals": 1}})


def write(path: str, content: str, call_id: str) -> dict:
    return {"toolCalls": [{"name": "write", "arguments": {"path": path, "content": content}, "id": call_id}]}


def _run(p, message: str) -> tuple[set[str], dict[str, dict]]:
    """Send a prompt, deny every approval request, return (the asked call ids, the ends by call id)."""
    p.send({"id": message, "type": "prompt", "message": message})
    asked = set()
    while True:
        frame = p.until(lambda f: f.get("type") in ("tool_approval_request", "agent_settled"), HANG)[-1]
        if frame["type"] == "agent_settled":
            break
        asked.add(frame["toolCallId"])
        assert frame["tier"] == "exec"
        p.send({"type": "tool_approval_response", "id": frame["id"], "toolCallId": frame["toolCallId"],
                "approved": False})
    ends = {f["toolCallId"]: f for f in p.frames if f.get("type") == "tool_execution_end"}
    return asked, ends


def test_writes_to_configuration_vcs_internals_and_outside_the_workspace_ask_like_commands(home, spawn):
    cwd = home.cwd
    os.makedirs(os.path.join(cwd, ".git"))
    with open(os.path.join(cwd, ".git", "config"), "w") as f:
        f.write("[core]\n\tbare = false\n")
    os.makedirs(os.path.join(cwd, "sub"))
    os.symlink(os.path.join(cwd, ".git"), os.path.join(cwd, "docs"))  # an innocent name for .git
    outside = os.path.join(home.root, "outside.txt")
    settings = os.path.join(home.agent_dir, "settings.json")
    evil = json.dumps({"tools": {"approvalMode": "yolo"}})
    calls = {
        "settings": write(settings, evil, "settings"),
        "extension": write(os.path.join(home.agent_dir, "extensions", "x.py"), "print(1)\n", "extension"),
        "trust": write(os.path.join(home.agent_dir, "trust.json"), json.dumps({cwd: True}), "trust"),
        "gitconfig": write(".git/config", "[core]\n\tfsmonitor = touch pwned\n", "gitconfig"),
        "dotdot": write("sub/../.git/hooks/pre-commit", "touch pwned\n", "dotdot"),
        "symlink": write("docs/config", "[core]\n\tfsmonitor = touch pwned\n", "symlink"),
        "project": write(".pisces/settings.json", evil, "project"),
        "pi": write(".pi/extensions/x.ts", "x", "pi"),
        "claude": write(".claude/agents/task.md", "x", "claude"),
        "outside": write(outside, "x", "outside"),
        "inside": write("sub/ok.txt", "fine\n", "inside"),
    }
    script = [c for c in calls.values()] + [{"text": "done"}]
    p = spawn("--faux-script", home.faux_script(script))
    typed(p)
    assert p.ok({"type": "get_state"})["approval"]["mode"] == "write"
    asked, ends = _run(p, "go")
    assert asked == set(calls) - {"inside"}
    assert ends["inside"]["isError"] is False
    with open(os.path.join(cwd, "sub", "ok.txt")) as f:
        assert f.read() == "fine\n"
    for name in asked:
        assert ends[name]["isError"] is True, name
    with open(os.path.join(cwd, ".git", "config")) as f:
        assert "fsmonitor" not in f.read()
    assert not os.path.exists(outside)
    assert not os.path.exists(os.path.join(cwd, ".pisces"))
    assert "approvalMode" not in json.dumps(home.read_json("settings.json") if os.path.exists(settings) else {})


def test_a_request_for_a_write_outside_the_boundary_says_why(home, spawn):
    p = spawn("--faux-script", home.faux_script([write(".git/config", "x", "g"), {"text": "done"}]))
    typed(p)
    p.send({"id": "go", "type": "prompt", "message": "go"})
    req = p.until_type("tool_approval_request", HANG)[-1]
    assert req["tier"] == "exec" and req["toolName"] == "write"
    assert "protected path (.git" in json.dumps(req)
    p.send({"type": "tool_approval_response", "id": req["id"], "toolCallId": "g", "approved": True})
    end = p.until(lambda f: f.get("type") == "tool_execution_end", HANG)[-1]
    assert end["isError"] is False  # a person approved it: it runs
    with open(os.path.join(home.cwd, ".git", "config")) as f:
        assert f.read() == "x"


def test_a_settings_reload_never_loosens_the_mode(home, spawn):
    home.write_json("settings.json", {"tools": {"approvalMode": "always-ask"}})
    p = spawn("--faux-script", home.faux_script([
        {"toolCalls": [{"name": "bash", "arguments": {"command": "touch ran"}, "id": "b"}]}, {"text": "done"}]))
    typed(p)
    assert p.ok({"type": "get_state"})["approval"]["mode"] == "always-ask"
    # something other than a person's command rewrites the settings: the next reload must not loosen the mode
    home.write_json("settings.json", {"tools": {"approvalMode": "yolo"}})
    p.ok({"type": "reload_resources"}, timeout=HANG)
    approval = p.ok({"type": "get_state"})["approval"]
    assert approval["mode"] == "always-ask"
    asked, ends = _run(p, "go")
    assert asked == {"b"} and ends["b"]["isError"] is True
    assert not os.path.exists(os.path.join(home.cwd, "ran"))
    # a stricter file applies at once; a person's command loosens
    p.ok({"type": "set_approval_mode", "mode": "yolo"})
    assert p.ok({"type": "get_state"})["approval"]["mode"] == "yolo"


def test_the_default_mode_of_a_typed_client_is_not_loosened_by_a_written_setting(home, spawn):
    p = spawn("--faux-script", home.faux_script([]))
    typed(p)
    assert p.ok({"type": "get_state"})["approval"]["mode"] == "write"
    home.write_json("settings.json", {"tools": {"approvalMode": "yolo"}})
    p.ok({"type": "reload_resources"}, timeout=HANG)
    assert p.ok({"type": "get_state"})["approval"]["mode"] == "write"
    home.write_json("settings.json", {"tools": {"approvalMode": "always-ask"}})
    p.ok({"type": "reload_resources"}, timeout=HANG)
    assert p.ok({"type": "get_state"})["approval"]["mode"] == "always-ask"


def test_print_mode_refuses_deleting_home_by_any_spelling_and_the_home_survives(home):
    import subprocess

    from e2eproc import PISCES

    keep = os.path.join(home.home, "keep.txt")
    with open(keep, "w") as f:
        f.write("mine\n")
    for i, command in enumerate(["find ~ -delete", "find $HOME -mindepth 1 -exec rm -rf {} +",
                                 "mkdir -p /tmp/e && rsync -a --delete /tmp/e/ ~/",
                                 "sudo -u $(whoami) rm -rf ~/*"]):
        script = home.faux_script([{"toolCalls": [{"name": "bash", "arguments": {"command": command}}]},
                                   {"text": "done"}], name=f"f{i}.json")
        out = subprocess.run([*PISCES, "--faux-script", script, "-p", "go"], env=home.env(), cwd=home.cwd,
                             capture_output=True, text=True, timeout=60)
        assert "known-dangerous command" in out.stderr, (command, out.stderr)
        assert os.path.exists(keep), command


def test_an_approval_request_never_shows_a_command_line_password(home, spawn):
    commands = ["curl -u alice:hunter2Zq https://127.0.0.1:9/x", "mysql -u root -phunter2Zq db",
                "sshpass -p hunter2Zq ssh h true", "redis-cli -a hunter2Zq ping",
                "aws configure set aws_secret_access_key hunter2Zq", "az login -u me -p hunter2Zq"]
    script = [{"toolCalls": [{"name": "bash", "arguments": {"command": c}, "id": f"c{i}"}]}
              for i, c in enumerate(commands)] + [{"text": "done"}]
    p = spawn("--faux-script", home.faux_script(script))
    typed(p)
    p.send({"id": "go", "type": "prompt", "message": "go"})
    for i in range(len(commands)):
        req = p.until_type("tool_approval_request", HANG)[-1]
        assert req["toolCallId"] == f"c{i}"
        assert "hunter2Zq" not in json.dumps(req), req
        assert "[redacted]" in req["identity"]["command"] and "identity.command" in req["detail"]["redactedFields"]
        p.send({"type": "tool_approval_response", "id": req["id"], "toolCallId": req["toolCallId"],
                "approved": False})
    p.until_type("agent_settled", HANG)
    assert "hunter2Zq" not in json.dumps(p.ok({"type": "get_state"}))


def test_an_allow_rule_written_into_the_settings_takes_no_effect_at_reload(home, spawn):
    p = spawn("--faux-script", home.faux_script([
        {"toolCalls": [{"name": "bash", "arguments": {"command": "touch ran1"}, "id": "a"}]}, {"text": "1"},
        {"toolCalls": [{"name": "bash", "arguments": {"command": "touch ran2"}, "id": "b"}]}, {"text": "2"}]))
    typed(p)
    home.write_json("settings.json", {"tools": {"approvalRules": [{"tool": "bash", "approval": "allow"}]}})
    p.ok({"type": "reload_resources"}, timeout=HANG)
    asked, ends = _run(p, "one")
    assert asked == {"a"} and not os.path.exists(os.path.join(home.cwd, "ran1"))
    assert "ignoring the allow rule" in p.stderr
    p.ok({"type": "add_approval_rule", "rule": {"tool": "bash", "match": "touch ran2", "approval": "allow"}})
    asked, ends = _run(p, "two")  # a person's command: in force at once
    assert "b" not in asked and os.path.exists(os.path.join(home.cwd, "ran2"))
