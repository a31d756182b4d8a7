"""Through the real ``pisces --mode rpc``: a second run offers the server's cached tools before it connects (the
first request carries them and the call waits for the server); an MCP prompt is a command in ``get_commands``
and ``/mcp:<server>:<prompt>`` sends the rendered text; ``@mcp:`` attaches a resource."""

from __future__ import annotations

import os
import sys

import pytest
from test_e2e_mcp import SERVERS, call, tools_ready

pytest.importorskip("mcp")


def slow(seconds: str):
    return {"command": sys.executable, "args": [os.path.abspath(SERVERS), "slowstart", seconds]}


def test_cached_tools_before_connect_and_a_call_that_waits(home, spawn):
    home.write_json("mcp.json", {"mcpServers": {"s": slow("3")}})
    p = spawn("--faux-script", home.faux_script([]))
    tools_ready(p, "s", 120)
    p.close_stdin()
    p.wait(30)
    assert os.listdir(os.path.join(home.agent_dir, "mcp-cache"))

    p = spawn("--faux-script", home.faux_script([call("mcp__s__add", {"a": 40, "b": 2}), {"text": "done"}]),
              "--approval-mode", "yolo")
    p.ok({"type": "get_state"})
    status = p.ok({"type": "mcp_status"})["servers"][0]
    assert status["status"] == "connecting" and status["cached"] is True
    assert "mcp__s__add" in p.ok({"type": "get_tools"})["activeToolNames"]
    p.ok({"type": "prompt", "message": "add"})  # accepted before the server is up
    end = p.until(lambda f: f.get("type") == "tool_execution_end", 120)[-1]
    assert end["toolName"] == "mcp__s__add" and not end["isError"], end
    assert end["result"]["content"][0]["text"] == "42"
    p.until_type("agent_end", 30)


def test_prompts_are_commands_and_resources_are_attached(home, spawn):
    home.write_json("mcp.json", {"mcpServers": {"good": {"command": sys.executable,
                                                         "args": [os.path.abspath(SERVERS), "good"]}}})
    p = spawn("--faux-script", home.faux_script([{"text": "one"}, {"text": "two"}]))
    tools_ready(p, "good")
    names = [c["name"] for c in p.ok({"type": "get_commands"})["commands"]]
    assert "mcp:good:review" in names
    p.ok({"type": "prompt", "message": "/mcp:good:review the lexer"})
    users = p.until(lambda f: f.get("type") == "message_end" and f["message"]["role"] == "user", 30)
    assert users[-1]["message"]["content"][0]["text"] == "Please review the lexer."
    p.until_type("agent_end", 30)
    p.ok({"type": "prompt", "message": "read @mcp:good:note://hello"})
    users = p.until(lambda f: f.get("type") == "message_end" and f["message"]["role"] == "user", 30)
    assert "hello resource\n</mcp-resource>" in users[-1]["message"]["content"][0]["text"]
    p.until_type("agent_end", 30)
    bad = p.request({"type": "prompt", "message": "/mcp:good:review"})
    assert not bad["success"] and "needs topic" in bad["error"]
