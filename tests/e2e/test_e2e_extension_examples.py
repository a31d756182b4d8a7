"""Each example in examples/extensions/ against the real process (rpc_demo.py: test_e2e_extensions.py and the
conformance scenario 17)."""

from __future__ import annotations

import os

from test_e2e_extensions import EXAMPLES, answer, ui_frames, ui_request


def example(name):
    return os.path.join(EXAMPLES, name)


def bash(command):
    return {"toolCalls": [{"name": "bash", "arguments": {"command": command}}]}


def tool_end(frames):
    return [f for f in frames if f.get("type") == "tool_execution_end"][-1]


def test_permission_gate_asks_and_obeys(home, spawn):
    marker = os.path.join(home.cwd, "target")
    os.makedirs(marker)
    script = home.faux_script([bash(f"rm -rf {marker}"), {"text": "refused"}, bash(f"rm -r {marker}"),
                               {"text": "removed"}, bash("echo harmless"), {"text": "fine"}])
    p = spawn("--faux-script", script, "-e", example("permission_gate.py"))
    p.send({"id": "1", "type": "prompt", "message": "delete it"})
    req = ui_request(p, "select")
    assert req["options"] == ["Yes", "No"] and f"rm -rf {marker}" in req["title"]
    answer(p, req, value="No")
    end = tool_end(p.until_type("agent_settled", 30))
    assert end["isError"] and end["result"]["content"][0]["text"] == "Blocked by user"
    assert os.path.isdir(marker)
    p.send({"id": "2", "type": "prompt", "message": "delete it, really"})
    answer(p, ui_request(p, "select"), value="Yes")
    end = tool_end(p.until_type("agent_settled", 30))
    assert end["isError"] is False and not os.path.exists(marker)
    p.send({"id": "3", "type": "prompt", "message": "something harmless"})
    got = p.until_type("agent_settled", 30)
    assert ui_frames(got, "select") == [] and tool_end(got)["isError"] is False


def test_protected_paths_blocks_writes_to_env_files(home, spawn):
    script = home.faux_script([{"toolCalls": [{"name": "write", "arguments": {"path": ".env", "content": "X=1"}},
                                              {"name": "write", "arguments": {"path": "notes.txt", "content": "ok"}}]},
                               {"text": "done"}])
    p = spawn("--faux-script", script, "-e", example("protected_paths.py"))
    p.send({"id": "1", "type": "prompt", "message": "write both"})
    got = p.until_type("agent_settled", 30)
    ends = {f["toolCallId"]: f for f in got if f.get("type") == "tool_execution_end"}
    blocked = [e for e in ends.values() if e["isError"]]
    assert [e["result"]["content"][0]["text"] for e in blocked] == ['Path ".env" is protected']
    assert [f["message"] for f in ui_frames(got, "notify")] == ["Blocked write to protected path: .env"]
    assert not os.path.exists(os.path.join(home.cwd, ".env"))
    with open(os.path.join(home.cwd, "notes.txt")) as f:
        assert f.read() == "ok"


def test_word_count_tool(home, spawn):
    with open(os.path.join(home.cwd, "poem.txt"), "w") as f:
        f.write("one two three\nfour five\n")
    script = home.faux_script([{"toolCalls": [{"name": "word_count", "arguments": {"path": "poem.txt"}}]},
                               {"toolCalls": [{"name": "word_count", "arguments": {"path": "missing.txt"}}]},
                               {"text": "counted"}])
    p = spawn("--faux-script", script, "-e", example("word_count_tool.py"))
    tools = p.ok({"type": "get_tools"})
    assert "word_count" in tools["activeToolNames"]
    p.send({"id": "1", "type": "prompt", "message": "count"})
    got = p.until_type("agent_settled", 30)
    ends = [f for f in got if f.get("type") == "tool_execution_end"]
    assert ends[0]["result"] == {"content": [{"type": "text", "text": "2 lines, 5 words, 24 characters"}],
                                 "details": {"lines": 2, "words": 5, "characters": 24}}
    assert ends[1]["isError"] and "No such file" in ends[1]["result"]["content"][0]["text"]
    updates = [f for f in got if f.get("type") == "tool_execution_update"]
    assert updates[0]["partialResult"]["content"][0]["text"] == "Reading poem.txt..."


def test_session_name_command_asks_with_an_input_dialog(home, spawn):
    p = spawn("--faux-script", home.faux_script([]), "-e", example("session_name_command.py"))
    p.send({"id": "n", "type": "prompt", "message": "/name"})
    req = ui_request(p, "input")
    assert req["title"] == "Session name"
    answer(p, req, value="  Refactor auth ")
    got = p.until(lambda f: f.get("id") == "n")
    assert [f for f in got if f.get("type") == "session_info_changed"] == [{"type": "session_info_changed",
                                                                           "name": "Refactor auth"}]
    assert p.ok({"type": "get_state"})["sessionName"] == "Refactor auth"
    p.request({"id": "m", "type": "prompt", "message": "/name Second name"})
    assert p.ok({"type": "get_state"})["sessionName"] == "Second name"


def test_status_line(home, spawn):
    p = spawn("--faux-script", home.faux_script([bash("echo hi"), {"text": "done"}]), "-e", example("status_line.py"))
    p.send({"id": "1", "type": "prompt", "message": "go"})
    p.until_type("agent_settled", 30)
    statuses = [f["statusText"] for f in ui_frames(p.frames, "setStatus")]
    assert statuses == ["Ready | tools: 0", "Turn 1... | tools: 0", "Turn 1 complete | tools: 1",
                        "Turn 2... | tools: 1", "Turn 2 complete | tools: 1"]
