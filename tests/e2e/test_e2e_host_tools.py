"""Host tools through the real process: set_host_tools, a round trip with progress, an error result, and a host
that never answers (timeout, abort, stdin closing)."""

from __future__ import annotations

import time

ECHO = {"name": "host_echo", "label": "Echo", "description": "Echo text back from the host",
        "parameters": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}}


def call(text, name="host_echo"):
    return {"toolCalls": [{"name": name, "arguments": {"text": text}}]}


def test_set_host_tools_validates_and_activates(home, spawn):
    p = spawn("--faux-script", home.faux_script([]))
    hidden = {**ECHO, "name": "host_hidden", "hidden": True}
    assert p.ok({"type": "set_host_tools", "tools": [ECHO, hidden]}) == {"toolNames": ["host_echo", "host_hidden"]}
    tools = p.ok({"type": "get_tools"})
    assert tools["activeToolNames"] == ["read", "bash", "edit", "write", "host_echo"]
    assert {"host_echo", "host_hidden"} <= {t["name"] for t in tools["allTools"]}
    bad = p.request({"type": "set_host_tools", "tools": [{"name": "x", "description": "", "parameters": {}}]})
    assert bad["error"] == 'Host tool "x" must provide a non-empty description'
    clash = p.request({"type": "set_host_tools", "tools": [{**ECHO, "name": "bash"}]})
    assert clash["error"] == 'host tool "bash" conflicts with an existing tool'
    assert p.ok({"type": "set_host_tools", "tools": []}) == {"toolNames": []}
    assert p.ok({"type": "get_tools"})["activeToolNames"] == ["read", "bash", "edit", "write"]


def test_a_host_tool_round_trip_with_progress_and_an_error(home, spawn):
    p = spawn("--faux-script", home.faux_script([call("ping"), call("fail"), {"text": "done"}]))
    p.ok({"type": "set_host_tools", "tools": [ECHO]})
    p.send({"id": "go", "type": "prompt", "message": "use the host"})
    req = p.until_type("host_tool_call", 30)[-1]
    assert (req["toolName"], req["arguments"]) == ("host_echo", {"text": "ping"}) and req["toolCallId"]
    p.send({"type": "host_tool_update", "id": req["id"], "partialResult": {"content": [{"type": "text",
                                                                                        "text": "halfway"}]}})
    upd = p.until_type("tool_execution_update")[-1]
    assert upd["partialResult"]["content"][0]["text"] == "halfway"
    p.send({"type": "host_tool_result", "id": req["id"],
            "result": {"content": [{"type": "text", "text": "pong"}], "details": {"from": "host"}}})
    end = p.until_type("tool_execution_end")[-1]
    assert end["isError"] is False and end["result"] == {"content": [{"type": "text", "text": "pong"}],
                                                         "details": {"from": "host"}}
    req = p.until_type("host_tool_call", 30)[-1]
    p.send({"type": "host_tool_result", "id": req["id"], "isError": True,
            "result": {"content": [{"type": "text", "text": "host says no"}]}})
    p.send({"type": "host_tool_result", "id": req["id"], "result": {"content": []}})  # second answer: ignored
    end = p.until_type("tool_execution_end")[-1]
    assert end["isError"] is True and end["result"]["content"][0]["text"] == "host says no"
    p.until_type("agent_settled", 30)
    assert not [f for f in p.frames if f.get("type") == "response" and f.get("command") is None]


def test_a_host_that_never_answers_times_out(home, spawn):
    p = spawn("--faux-script", home.faux_script([call("hello"), {"text": "gave up"}]))
    p.ok({"type": "set_host_tools", "tools": [{**ECHO, "timeoutMs": 300}]})
    p.send({"id": "go", "type": "prompt", "message": "use the host"})
    req = p.until_type("host_tool_call", 30)[-1]
    got = p.until_type("agent_settled", 30)
    cancel = [f for f in got if f.get("type") == "host_tool_cancel"]
    assert [c["targetId"] for c in cancel] == [req["id"]] and cancel[0]["id"] != req["id"]
    end = [f for f in got if f.get("type") == "tool_execution_end"][0]
    assert end["isError"] and end["result"]["content"][0]["text"] == 'Host tool "host_echo" did not answer within 0.3 s'


def test_abort_and_stdin_eof_end_a_pending_host_call(home, spawn):
    p = spawn("--faux-script", home.faux_script([call("one"), call("two")]))
    p.ok({"type": "set_host_tools", "tools": [ECHO]})
    p.send({"id": "go", "type": "prompt", "message": "first"})
    req = p.until_type("host_tool_call", 30)[-1]
    p.send({"id": "ab", "type": "abort"})
    got = p.until(lambda f: f.get("id") == "ab", 30)
    assert [f["targetId"] for f in got if f.get("type") == "host_tool_cancel"] == [req["id"]]
    end = [f for f in got if f.get("type") == "tool_execution_end"][0]
    assert end["isError"] and end["result"]["content"][0]["text"] == 'Host tool "host_echo" was aborted'
    p.send({"id": "go2", "type": "prompt", "message": "second"})
    p.until_type("host_tool_call", 30)
    t0 = time.monotonic()
    p.close_stdin()
    assert p.wait(timeout=15) == 0  # the pending call does not keep the process alive
    assert time.monotonic() - t0 < 15
