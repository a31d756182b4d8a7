"""End to end, the real ``pisces --mode rpc``: the ready frame, get_state's shape, and every command of the
handlers table (plus each alias) once, each with the shape of its response data."""

from __future__ import annotations

import json
import os

from e2eproc import Proc, compact

MODEL_KEYS = {"id", "name", "api", "provider", "baseUrl", "reasoning", "input", "cost", "contextWindow", "maxTokens"}
STATE_KEYS = {"model", "thinkingLevel", "isStreaming", "isCompacting", "steeringMode", "followUpMode", "interruptMode",
              "queueMode", "sessionFile", "sessionId", "autoCompactionEnabled", "autoRetryEnabled", "messageCount",
              "pendingMessageCount", "queuedMessageCount", "projectTrusted", "approval", "todoPhases", "sandbox", "planMode"}


def response(rid, command, data=None, *, has_data=True):
    r = {"id": rid, "type": "response", "command": command, "success": True}
    if has_data:
        r["data"] = data
    return r


def test_ready_comes_first_and_get_state_has_every_field(home, spawn):
    p = spawn("--faux-script", home.faux_script([{"text": "x"}]), ready=False)
    p.send({"id": "s1", "type": "get_state"})  # written before anything was read
    assert p.next(15) == {"type": "ready"}
    r = p.next()
    assert r["id"] == "s1" and r["type"] == "response" and r["command"] == "get_state" and r["success"] is True
    state = r["data"]
    assert set(state) == STATE_KEYS
    assert set(state["model"]) == MODEL_KEYS and state["model"]["provider"] == "faux"
    assert state["thinkingLevel"] == "off" and state["isStreaming"] is False and state["isCompacting"] is False
    assert state["steeringMode"] == state["followUpMode"] == state["queueMode"] == "one-at-a-time"
    assert state["interruptMode"] == "immediate"
    assert state["pendingMessageCount"] == 0 and state["queuedMessageCount"] == 0 and state["messageCount"] == 0
    assert state["autoCompactionEnabled"] is True
    assert state["sessionFile"].startswith(os.path.join(home.agent_dir, "sessions") + os.sep)
    assert state["sessionFile"].endswith(f"_{state['sessionId']}.jsonl")
    assert not os.path.exists(state["sessionFile"])  # written lazily, at the first reply
    assert p.close() == 0


def _run_prompt(p: Proc, rid: str, message: str, ctype: str = "prompt") -> list[dict]:
    p.send({"id": rid, "type": ctype, "message": message})
    frames = p.until_type("agent_settled")
    assert frames[0] == response(rid, ctype, has_data=False)
    return frames


def test_every_command_once(home, spawn):
    prompts = os.path.join(home.agent_dir, "prompts")
    os.makedirs(prompts)
    with open(os.path.join(prompts, "review.md"), "w") as f:
        f.write("---\ndescription: Review code\n---\nReview $1 please\n")
    p = spawn("--faux-script", home.faux_script([{"text": "first answer"}, {"text": "second answer"},
                                                  {"text": "the summary"}, {"text": "x"}]))
    ok = p.ok

    # prompting ---------------------------------------------------------------------------------
    frames = _run_prompt(p, "p1", "hello")
    assert compact(frames)[-2:] == ["agent_end", "agent_settled"]
    assert p.request({"id": "ab", "type": "abort"}) == response("ab", "abort", has_data=False)  # idle: at once
    frames = _run_prompt(p, "ap", "second", "abort_and_prompt")
    assert frames[-2]["messages"][-1]["content"] == [{"type": "text", "text": "second answer"}]
    msgs = ok({"type": "get_messages"})["messages"]
    assert [m["role"] for m in msgs] == ["user", "assistant", "user", "assistant"]

    r = p.request({"id": "st", "type": "steer", "message": "later steer"})  # idle: kept for the next run
    assert r == response("st", "steer", has_data=False)
    assert p.last_events == [{"type": "queue_update", "steering": ["later steer"], "followUp": []},
                             {"type": "queue_changed", "pendingMessageCount": 1, "queuedMessageCount": 1}]
    assert p.request({"id": "fu", "type": "follow_up", "message": "later fu"}) == response("fu", "follow_up",
                                                                                            has_data=False)
    state = ok({"type": "get_state"})
    assert state["pendingMessageCount"] == state["queuedMessageCount"] == 2
    assert p.request({"id": "cq", "type": "clear_queue"}) == response(
        "cq", "clear_queue", {"steering": ["later steer"], "followUp": ["later fu"]})
    assert p.last_events[0] == {"type": "queue_update", "steering": [], "followUp": []}

    # models and thinking -------------------------------------------------------------------------
    models = ok({"type": "get_available_models"})["models"]
    assert [(m["provider"], m["id"]) for m in models] == [("faux", "faux"), ("faux", "faux-reasoning")]
    assert all(set(m) == MODEL_KEYS for m in models)
    r = p.request({"id": "sm", "type": "set_model", "provider": "faux", "modelId": "faux-reasoning"})
    assert r == response("sm", "set_model", models[1])
    assert p.last_events == [{"type": "thinking_level_changed", "level": "medium"}]
    r = p.request({"id": "sm2", "type": "set_model", "provider": "faux", "modelId": "nope"})
    assert r == {"id": "sm2", "type": "response", "command": "set_model", "success": False,
                 "error": "Model not found: faux/nope"}
    r = p.request({"id": "tl", "type": "set_thinking_level", "level": "high"})
    assert r == response("tl", "set_thinking_level", has_data=False)
    assert p.last_events == [{"type": "thinking_level_changed", "level": "high"}]
    assert p.request({"id": "ct", "type": "cycle_thinking_level"}) == response("ct", "cycle_thinking_level",
                                                                                {"level": "off"})
    r = p.request({"id": "cm", "type": "cycle_model"})
    assert r["success"] is True and set(r["data"]) == {"model", "thinkingLevel", "isScoped"}
    assert r["data"]["model"] == models[0] and r["data"]["thinkingLevel"] == "off" and r["data"]["isScoped"] is False
    assert p.request({"id": "ct2", "type": "cycle_thinking_level"}) == response("ct2", "cycle_thinking_level", None)
    settings = home.read_json("settings.json")
    assert settings["defaultProvider"] == "faux" and settings["defaultModel"] == "faux"

    # modes and switches ------------------------------------------------------------------------------
    for rid, ctype, field, value in [("m1", "set_steering_mode", "mode", "all"),
                                     ("m2", "set_follow_up_mode", "mode", "all"),
                                     ("m3", "set_interrupt_mode", "mode", "wait"),
                                     ("m4", "set_auto_compaction", "enabled", False),
                                     ("m5", "set_auto_retry", "enabled", False),
                                     ("m6", "abort_retry", None, None),
                                     ("m7", "abort_bash", None, None)]:
        cmd = {"id": rid, "type": ctype}
        if field:
            cmd[field] = value
        assert p.request(cmd) == response(rid, ctype, has_data=False)
        assert p.last_events == []
    state = ok({"type": "get_state"})
    assert (state["steeringMode"], state["followUpMode"], state["interruptMode"], state["queueMode"]) == \
        ("all", "all", "wait", "all")
    assert state["autoCompactionEnabled"] is False
    settings = home.read_json("settings.json")
    assert settings["steeringMode"] == "all" and settings["followUpMode"] == "all"
    assert settings["compaction"]["enabled"] is False and settings["retry"]["enabled"] is False
    r = p.request({"id": "bad", "type": "set_steering_mode", "mode": "sometimes"})
    assert r["success"] is False and r["error"] == "Invalid mode 'sometimes': use 'all' or 'one-at-a-time'"

    # bash ---------------------------------------------------------------------------------------------
    r = p.request({"id": "b1", "type": "bash", "command": "echo out; echo err >&2; exit 3"})
    assert r == response("b1", "bash", {"output": "out\nerr\n", "exitCode": 3, "cancelled": False,
                                        "truncated": False})
    msgs = ok({"type": "get_messages"})["messages"]
    assert msgs[-1]["role"] == "bashExecution" and msgs[-1]["command"] == "echo out; echo err >&2; exit 3"

    # stats, usage, text, export --------------------------------------------------------------------------
    stats = ok({"type": "get_session_stats"})
    assert set(stats) == {"sessionFile", "sessionId", "userMessages", "assistantMessages", "toolCalls",
                          "toolResults", "totalMessages", "tokens", "cost", "contextUsage"}
    assert (stats["userMessages"], stats["assistantMessages"], stats["totalMessages"]) == (2, 2, 5)
    assert set(stats["tokens"]) == {"input", "output", "cacheRead", "cacheWrite", "total"}
    assert set(stats["contextUsage"]) == {"tokens", "contextWindow", "percent"}
    usage = ok({"type": "get_context_usage"})
    assert set(usage) == {"usage"} and usage["usage"]["contextWindow"] == 128000
    assert ok({"type": "get_last_assistant_text"}) == {"text": "second answer"}
    out = os.path.join(home.root, "export.html")
    assert ok({"type": "export_html", "outputPath": out}) == {"path": out}
    with open(out, encoding="utf-8") as f:
        assert "second answer" in f.read()

    # naming, labels, commands, tools -----------------------------------------------------------------------
    r = p.request({"id": "nm", "type": "set_session_name", "name": "  my session  "})
    assert r == response("nm", "set_session_name", has_data=False)
    assert p.last_events == [{"type": "session_info_changed", "name": "my session"}]
    assert ok({"type": "get_state"})["sessionName"] == "my session"
    assert ok({"type": "get_commands"}) == {"commands": [
        {"name": "review", "description": "Review code", "source": "prompt",
         "sourceInfo": {"path": os.path.join(prompts, "review.md"), "source": "local", "scope": "user",
                        "origin": "top-level"},
         "location": "user", "path": os.path.join(prompts, "review.md")}]}  # seed 002's fields beside sourceInfo
    tools = ok({"type": "get_tools"})
    assert tools["activeToolNames"] == ["read", "bash", "edit", "write"]
    assert {t["name"] for t in tools["allTools"]} >= {"read", "bash", "edit", "write", "grep", "find", "ls"}
    assert all(set(t) == {"name", "description", "parameters"} for t in tools["allTools"])
    assert ok({"type": "set_active_tools", "toolNames": ["read", "ls"]}) == {"activeToolNames": ["read", "ls"]}
    assert ok({"type": "get_tools"})["activeToolNames"] == ["read", "ls"]

    # tree, labels, fork, navigate ---------------------------------------------------------------------------
    forks = ok({"type": "get_fork_messages"})["messages"]
    assert [m["text"] for m in forks] == ["hello", "second"]
    assert all(set(m) == {"entryId", "text", "timestamp"} for m in forks)  # later pi added the timestamp
    tree = ok({"type": "get_session_tree"})
    assert set(tree) == {"leafId", "nodes"}
    assert ok({"type": "set_entry_label", "targetId": forks[0]["entryId"], "label": "start"}) is None
    assert '"start"' in json.dumps(ok({"type": "get_session_tree"}))
    sessions = ok({"type": "list_sessions"})["sessions"]
    first_file = ok({"type": "get_state"})["sessionFile"]
    assert [s["path"] for s in sessions] == [first_file]
    assert {"path", "id", "cwd", "created", "modified", "messageCount", "firstMessage"} <= set(sessions[0])

    leaf_before = tree["leafId"]
    r = p.request({"id": "nv", "type": "navigate_tree", "targetId": forks[1]["entryId"]})
    assert r == response("nv", "navigate_tree", {"cancelled": False, "editorText": "second"})
    assert [e["type"] for e in p.last_events] == ["session_changed"]
    assert [m["role"] for m in ok({"type": "get_messages"})["messages"]] == ["user", "assistant"]
    assert ok({"type": "navigate_tree", "targetId": leaf_before}) == {"cancelled": False}
    assert len(ok({"type": "get_messages"})["messages"]) == 5

    # compaction ------------------------------------------------------------------------------------------------
    r = p.request({"id": "cp", "type": "compact"})
    assert compact(p.last_events) == ["compaction_start", "compaction_end"]
    assert r["success"] is True and set(r["data"]) == {"summary", "firstKeptEntryId", "tokensBefore", "details"}
    assert r["data"]["summary"] == "the summary"
    assert p.last_events[1]["result"] == r["data"]

    r = p.request({"id": "fk", "type": "fork", "entryId": forks[1]["entryId"]})
    assert r == response("fk", "fork", {"text": "second", "cancelled": False})
    assert [e["type"] for e in p.last_events] == ["session_changed"]
    fork_state = ok({"type": "get_state"})
    assert fork_state["sessionFile"] != first_file
    assert [m["role"] for m in ok({"type": "get_messages"})["messages"]] == ["user", "assistant"]
    assert p.request({"id": "bad", "type": "fork", "entryId": "nope"})["error"] == "Invalid entry ID for forking"

    assert p.request({"id": "cl", "type": "clone"}) == response("cl", "clone", {"cancelled": False})
    assert ok({"type": "get_state"})["sessionFile"] not in (first_file, fork_state["sessionFile"])

    assert p.request({"id": "ns", "type": "new_session"}) == response("ns", "new_session", {"cancelled": False})
    assert p.last_events[0]["type"] == "session_changed" and p.last_events[0]["reason"] == "new"
    assert ok({"type": "get_messages"}) == {"messages": []}
    r = p.request({"id": "sw", "type": "switch_session", "sessionPath": first_file})
    assert r == response("sw", "switch_session", {"cancelled": False})
    state = ok({"type": "get_state"})
    assert state["sessionFile"] == first_file and state["sessionName"] == "my session"
    assert ok({"type": "get_last_assistant_text"}) == {"text": "second answer"}
    assert ok({"type": "get_messages"})["messages"][0]["role"] == "compactionSummary"
    assert p.close() == 0


ALIASES = [
    ({"type": "queue_message", "message": "queued"}, None),
    ({"type": "set_queue_mode", "mode": "all"}, None),
    ({"type": "get_branch_messages"}, {"messages": [{"text": "hi"}]}),
    ({"type": "get_tree"}, "pi-tree"),  # later pi's own shape, not seed 002's (test_e2e_newer_pi.py)
    ({"type": "set_label", "label": "lbl"}, None),
    ({"type": "get_sessions"}, "sessions"),
    ({"type": "get_available_sessions"}, "sessions"),
    ({"type": "get_available_commands"}, {"commands": []}),
    ({"type": "branch"}, {"text": "hi", "cancelled": False}),
    ({"type": "reset"}, {"cancelled": False}),
]


def test_aliases_echo_the_name_the_client_used(home, spawn):
    p = spawn("--faux-script", home.faux_script([{"text": "answer"}]))
    _run_prompt(p, "p", "hi")
    user_entry = p.ok({"type": "get_fork_messages"})["messages"][0]["entryId"]
    for i, (cmd, expect) in enumerate(ALIASES):
        cmd = {"id": f"a{i}", **cmd}
        if cmd["type"] in ("set_label", "branch"):
            cmd["entryId"] = user_entry
        r = p.request(cmd)
        assert r["id"] == cmd["id"] and r["type"] == "response" and r["command"] == cmd["type"], r
        assert r["success"] is True, r
        if expect is None:
            assert "data" not in r
        elif expect == "pi-tree":
            assert set(r["data"]) == {"leafId", "tree"}
        elif expect == "sessions":
            assert len(r["data"]["sessions"]) == 1
        elif cmd["type"] == "get_branch_messages":
            assert [m["text"] for m in r["data"]["messages"]] == ["hi"]
        else:
            assert r["data"] == expect
        if cmd["type"] == "queue_message":  # it is steer: the queue says so
            assert p.last_events[0] == {"type": "queue_update", "steering": ["queued"], "followUp": []}
        if cmd["type"] == "set_queue_mode":
            assert p.ok({"type": "get_state"})["steeringMode"] == "all"
    assert p.close() == 0


def test_commands_pi_does_not_know_are_still_unknown(home, spawn):
    p = spawn("--faux-script", home.faux_script([{"text": "x"}]))
    r = p.request({"id": "u", "type": "get_queue"})
    assert r == {"id": "u", "type": "response", "command": "get_queue", "success": False,
                 "error": "Unknown command: get_queue"}
    assert p.close() == 0
