"""Plan mode end to end through the real ``pisces --mode rpc`` (docs/planning.md#plan-mode): entered only by the
person (``set_plan_mode``), a write refused and the plan file allowed, ``exit_plan_mode`` asking through the
typed approval frame and pi's select fallback, approved (writes run again, the approval mode as before) or
rejected with a message (still in plan mode), ``plan.continueIn: "new"``, and a resumed session that stays in
plan mode."""

from __future__ import annotations

import json
import os

HANG = 30


def call(name: str, call_id: str, **arguments: object) -> dict:
    return {"toolCalls": [{"name": name, "arguments": arguments, "id": call_id}]}


def typed(p) -> None:
    p.ok({"type": "negotiate_protocol", "protocolVersion": 2, "clientCapabilities": {"typedToolApprovals": 1}})


def ended(p, call_id: str) -> dict:
    return p.until(lambda f: f.get("type") == "tool_execution_end" and f.get("toolCallId") == call_id, HANG)[-1]


def text_of(end: dict) -> str:
    return "".join(c.get("text", "") for c in end["result"]["content"])


def rel(home, path: str) -> str:
    return os.path.relpath(path, os.path.realpath(home.cwd))


def test_plan_mode_refuses_writes_and_exits_through_a_typed_approval(home, spawn):
    plan_text = "# Add hello.txt\n\n1. write hello.txt containing hi\n"
    with open(os.path.join(home.cwd, "notes.txt"), "w", encoding="utf-8") as f:
        f.write("notes\n")
    p = spawn("--faux-script", home.faux_script([
        call("write", "w1", path="hello.txt", content="hi"),          # refused: plan mode
        call("bash", "b1", command="echo hi > hello.txt"),            # refused: no commands in plan mode
        call("read", "l1", path="notes.txt"),                         # read-only: runs
        {"text": "placeholder: the plan file path is sent below"},
    ]))
    typed(p)
    assert p.ok({"type": "get_state"})["planMode"]["enabled"] is False
    before = p.ok({"type": "get_state"})["approval"]["mode"]
    p.send({"id": "pm", "type": "set_plan_mode", "enabled": True})
    frames = p.until(lambda f: f.get("id") == "pm", HANG)
    data = frames[-1]["data"]["planMode"]
    plan_file = data["planFile"]
    assert data["enabled"] is True and plan_file.endswith("-plan.md")
    assert os.path.dirname(plan_file) == os.path.join(os.path.realpath(home.cwd), ".pisces", "plans")
    changed = next(f for f in frames if f["type"] == "plan_mode_changed")  # before the response
    assert (changed["enabled"], changed["planFile"], changed["reason"]) == (True, plan_file, "command")
    assert "exit_plan_mode" in p.ok({"type": "get_tools"})["activeToolNames"]

    p.send({"id": "p1", "type": "prompt", "message": "add hello.txt"})
    frames = p.until_type("agent_settled", HANG)
    ends = {f["toolCallId"]: f for f in frames if f["type"] == "tool_execution_end"}
    assert ends["w1"]["isError"] and "Plan mode is on" in text_of(ends["w1"])
    assert ends["b1"]["isError"] and "not allowed" in text_of(ends["b1"])
    assert not ends["l1"]["isError"] and text_of(ends["l1"]).startswith("notes")
    assert not os.path.exists(os.path.join(home.cwd, "hello.txt"))
    assert not [f for f in frames if f["type"] == "tool_approval_request"]  # refused, never asked
    # the model was told, with the prompt, in a visible message
    told = [f["message"] for f in frames if f["type"] == "message_end" and f["message"]["role"] == "custom"]
    assert told and told[0]["customType"] == "plan_mode" and plan_file in told[0]["content"]
    p.close()

    # second process on the same session: the plan file write runs unasked, exit_plan_mode asks
    session_file = home.session_files()[0]
    q = spawn("--session", session_file, "--faux-script", home.faux_script([
        call("write", "w2", path=rel(home, plan_file), content=plan_text),
        call("exit_plan_mode", "x1", title="Add hello.txt"),
        call("write", "w3", path="hello.txt", content="hi"),
        {"text": "done"},
    ], name="faux2.json"))
    typed(q)
    state = q.ok({"type": "get_state"})["planMode"]
    assert (state["enabled"], state["planFile"]) == (True, plan_file)  # resumed: still in plan mode
    q.send({"id": "p2", "type": "prompt", "message": "now the plan"})
    assert not ended(q, "w2")["isError"]
    with open(plan_file, encoding="utf-8") as f:
        assert f.read() == plan_text
    req = q.until_type("tool_approval_request", HANG)[-1]
    assert (req["toolName"], req["toolCallId"], req["toolKind"]) == ("exit_plan_mode", "x1", "plan")
    assert req["identity"]["content"] == plan_text and req["identity"]["title"] == "Add hello.txt"
    assert req["scopes"] == ["once"]
    assert q.ok({"type": "get_state"})["approval"]["pending"][0]["toolName"] == "exit_plan_mode"
    q.send({"type": "tool_approval_response", "id": req["id"], "toolCallId": "x1", "approved": True})
    frames = q.until_type("agent_settled", HANG)
    ends = {f["toolCallId"]: f for f in frames if f["type"] == "tool_execution_end"}
    assert not ends["x1"]["isError"] and "approved the plan" in text_of(ends["x1"])
    off = next(f for f in frames if f["type"] == "plan_mode_changed")
    assert (off["enabled"], off["reason"], off["title"]) == (False, "approved", "Add hello.txt")
    assert not ends["w3"]["isError"]
    with open(os.path.join(home.cwd, "hello.txt"), encoding="utf-8") as f:
        assert f.read() == "hi"
    state = q.ok({"type": "get_state"})
    assert state["planMode"]["enabled"] is False and state["approval"]["mode"] == before
    assert "exit_plan_mode" not in q.ok({"type": "get_tools"})["activeToolNames"]
    q.close()
    with open(session_file, encoding="utf-8") as f:
        saved = [json.loads(line) for line in f]
    marks = [e["data"] for e in saved if e["type"] == "custom" and e["customType"] == "pisces.plan_mode"]
    assert [m["enabled"] for m in marks] == [True, False]
    assert marks[-1]["plan"] == plan_text and marks[-1]["title"] == "Add hello.txt"


def test_a_rejected_plan_keeps_plan_mode_and_the_model_gets_the_message(home, spawn):
    p = spawn("--no-session", "--faux-script", home.faux_script([
        call("exit_plan_mode", "x1", title="Rewrite", plan="1. rewrite everything\n"),
        call("write", "w1", path="a.txt", content="x"),
        {"text": "ok"},
    ]))
    typed(p)
    p.ok({"type": "set_plan_mode", "enabled": True})
    p.send({"id": "p1", "type": "prompt", "message": "plan it"})
    req = p.until_type("tool_approval_request", HANG)[-1]
    p.send({"type": "tool_approval_response", "id": req["id"], "toolCallId": "x1", "approved": False,
            "message": "too broad: only the parser"})
    end = ended(p, "x1")
    assert end["isError"]
    assert "rejected the plan" in text_of(end) and "too broad: only the parser" in text_of(end)
    assert "still in plan mode" in text_of(end)
    assert ended(p, "w1")["isError"]  # still refused
    p.until_type("agent_settled", HANG)
    assert p.ok({"type": "get_state"})["planMode"]["enabled"] is True
    assert not os.path.exists(os.path.join(home.cwd, "a.txt"))


def test_select_fallback_for_untyped_clients(home, spawn):
    p = spawn("--no-session", "--faux-script", home.faux_script([
        call("exit_plan_mode", "x1", title="Tiny", plan="1. one step\n"),
        {"text": "ok"},
    ]))
    p.ok({"type": "set_plan_mode", "enabled": True})
    p.send({"id": "p1", "type": "prompt", "message": "plan it"})
    req = p.until(lambda f: f.get("type") == "extension_ui_request" and f.get("method") == "select", HANG)[-1]
    assert req["title"].startswith("Allow tool: exit_plan_mode\nPlan: Tiny") and "1. one step" in req["title"]
    p.send({"type": "extension_ui_response", "id": req["id"], "value": "Approve"})
    assert not ended(p, "x1")["isError"]
    p.until_type("agent_settled", HANG)
    assert p.ok({"type": "get_state"})["planMode"]["enabled"] is False


def test_continue_in_a_new_session_seeded_with_the_plan(home, spawn):
    home.write_json("settings.json", {"plan": {"continueIn": "new"}})
    p = spawn("--faux-script", home.faux_script([
        call("exit_plan_mode", "x1", title="Seeded", plan="1. write b.txt\n"),
        call("write", "w1", path="too-early.txt", content="x"),  # refused: the plan runs in the new session
        {"text": "stopping"},
        call("write", "w2", path="b.txt", content="b"),          # the new session's first turn
        {"text": "done"},
    ]))
    typed(p)
    first = p.ok({"type": "get_state"})["sessionFile"]
    assert p.ok({"type": "get_state"})["planMode"]["continueIn"] == "new"
    p.ok({"type": "set_plan_mode", "enabled": True})
    p.send({"id": "p1", "type": "prompt", "message": "plan it"})
    req = p.until_type("tool_approval_request", HANG)[-1]
    p.send({"type": "tool_approval_response", "id": req["id"], "toolCallId": "x1", "approved": True})
    assert "new session" in text_of(ended(p, "x1"))
    assert ended(p, "w1")["isError"]
    p.until(lambda f: f.get("type") == "session_changed" and f.get("reason") == "new", HANG)
    assert not ended(p, "w2")["isError"]
    p.until_type("agent_settled", HANG)
    state = p.ok({"type": "get_state"})
    assert state["sessionFile"] != first and state["planMode"]["enabled"] is False
    user = [m for m in p.ok({"type": "get_messages"})["messages"] if m["role"] == "user"]
    assert "1. write b.txt" in json.dumps(user[0]["content"]) and "# Seeded" in json.dumps(user[0]["content"])
    assert not os.path.exists(os.path.join(home.cwd, "too-early.txt"))
    with open(os.path.join(home.cwd, "b.txt"), encoding="utf-8") as f:
        assert f.read() == "b"
    with open(state["sessionFile"], encoding="utf-8") as f:
        assert json.loads(f.readline())["parentSession"] == first  # the new session names the planning one


def test_only_the_person_enters_and_bad_input_is_refused(home, spawn):
    p = spawn("--no-session", "--faux-script", home.faux_script([
        {"toolCalls": [{"name": "exit_plan_mode", "arguments": {"title": "x"}, "id": "x1"}]},
        {"text": "ok"},
    ]))
    bad = p.request({"type": "set_plan_mode", "enabled": "yes"})
    assert not bad["success"] and "'enabled': true or false" in bad["error"]
    # outside plan mode the tool is not offered, and a call of it is refused
    assert "exit_plan_mode" not in p.ok({"type": "get_tools"})["activeToolNames"]
    p.send({"id": "p1", "type": "prompt", "message": "go"})
    assert ended(p, "x1")["isError"]
    p.until_type("agent_settled", HANG)
    assert p.ok({"type": "get_state"})["planMode"]["enabled"] is False


def test_switching_sessions_restores_plan_mode_and_a_linked_plan_dir_is_refused(home, spawn):
    # the repository ships .pisces/plans as a link out of the project: the plan file is then not writable
    outside = os.path.join(home.root, "outside")
    os.makedirs(outside)
    os.makedirs(os.path.join(home.cwd, ".pisces"))
    os.symlink(outside, os.path.join(home.cwd, ".pisces", "plans"))
    p = spawn("--faux-script", home.faux_script([{"text": "first"}, {"text": "second"}]))
    typed(p)
    plan_file = p.ok({"type": "set_plan_mode", "enabled": True})["planMode"]["planFile"]
    p.send({"id": "p1", "type": "prompt", "message": "look"})
    p.until_type("agent_settled", HANG)
    planning = p.ok({"type": "get_state"})["sessionFile"]
    p.send({"id": "n", "type": "new_session"})
    frames = p.until(lambda f: f.get("id") == "n", HANG)
    restored = [f for f in frames if f["type"] == "plan_mode_changed"]
    assert [(f["enabled"], f["reason"]) for f in restored] == [(False, "restore")]
    assert p.ok({"type": "get_state"})["planMode"]["enabled"] is False
    p.send({"id": "p2", "type": "prompt", "message": "something else"})
    p.until_type("agent_settled", HANG)
    p.send({"id": "s", "type": "switch_session", "sessionPath": planning})
    frames = p.until(lambda f: f.get("id") == "s", HANG)
    assert [(f["enabled"], f["planFile"]) for f in frames if f["type"] == "plan_mode_changed"] == [(True, plan_file)]
    assert "exit_plan_mode" in p.ok({"type": "get_tools"})["activeToolNames"]
    p.close()

    q = spawn("--session", planning, "--faux-script", home.faux_script([
        call("write", "w1", path=rel(home, plan_file), content="plan"),
        {"text": "ok"},
    ], name="faux2.json"))
    q.send({"id": "p3", "type": "prompt", "message": "write the plan"})
    end = ended(q, "w1")
    assert end["isError"] and "may change only the plan file" in text_of(end)
    assert os.listdir(outside) == []

