"""MCP prompts as commands and resources from a prompt, against the SDK test server over stdio: get_commands
lists ``mcp:<server>:<prompt>`` with its arguments, a prompt ``/mcp:good:review x`` is sent as the server's
rendered text, ``@mcp:good:note://hello`` attaches the resource, errors are clear, and ``list_changed`` brings
new prompts and resources."""

from __future__ import annotations

import asyncio
import json
import sys

import pytest

pytest.importorskip("mcp")

from mcpkit import SERVERS, until

from pisces.core.errors import SessionError
from pisces.core.mcp.prompts import bind_arguments, references
from pisces.core.session.build import create_agent_session_async


def test_arguments_bind_in_order_by_name_and_the_last_takes_the_rest():
    declared = [{"name": "subject", "required": True}, {"name": "tone", "required": False}]
    assert bind_arguments(declared, '"the parser" dry', "/x") == {"subject": "the parser", "tone": "dry"}
    assert bind_arguments(declared, "tone=dry parser", "/x") == {"subject": "parser", "tone": "dry"}
    assert bind_arguments(declared, "a b c", "/x") == {"subject": "a", "tone": "b c"}
    with pytest.raises(SessionError, match=r"/x needs subject: /x <subject> <tone> \(or name=value\)"):
        bind_arguments(declared, "tone=dry", "/x")


def test_references_name_configured_servers_only():
    text = "see @mcp:good:note://hello, and @mcp:other:x and me@mcp:good:no and @mcp:good:note://hello."
    assert references(text, {"good": object()}) == [("good", "note://hello")]


@pytest.fixture
async def session(tmp_path, monkeypatch):
    agent = tmp_path / "agent"
    agent.mkdir()
    (tmp_path / "work").mkdir()
    monkeypatch.setenv("PISCES_CODING_AGENT_DIR", str(agent))
    (agent / "mcp.json").write_text(json.dumps({"mcpServers": {
        "good": {"command": sys.executable, "args": [SERVERS, "good"]}}}))
    s = await create_agent_session_async(cwd=str(tmp_path / "work"), provider="faux", no_session=True)
    try:
        assert await until(lambda: s.mcp.servers["good"].state == "connected"), s.mcp.status()
        yield s
    finally:
        await s.shutdown()


def user_texts(s):
    return ["".join(getattr(c, "text", "") for c in m.content) for m in s.agent.messages if type(m).__name__ == "UserMessage"]


async def test_prompts_are_commands_and_are_sent_rendered(session):
    s = session
    cmds = {c["name"]: c for c in s.commands()}
    review = cmds["mcp:good:review"]
    assert review["description"] == "A review prompt." and review["sourceInfo"]["source"] == "mcp"
    assert review["arguments"] == [{"name": "topic", "description": "", "required": True}]
    await s.prompt("/mcp:good:review the parser module")
    assert user_texts(s)[0] == "Please review the parser module."
    with pytest.raises(SessionError, match="/mcp:good:review needs topic"):
        await s.prompt("/mcp:good:review")
    with pytest.raises(SessionError, match="has no prompt 'nope'.*mcp:good:review"):
        await s.prompt("/mcp:good:nope x")
    assert s.mcp.status()["servers"][0]["prompts"] == ["mcp:good:review"]


async def test_a_resource_named_in_a_prompt_is_attached(session):
    s = session
    await s.prompt("Summarise @mcp:good:note://hello.")
    text = user_texts(s)[0]
    assert text.startswith("Summarise @mcp:good:note://hello.")
    assert '<mcp-resource server="good" uri="note://hello">\nhello resource\n</mcp-resource>' in text
    with pytest.raises(SessionError, match="@mcp:good:note://missing could not be read"):
        await s.prompt("and @mcp:good:note://missing")


async def test_list_changed_brings_new_prompts_and_resources(session):
    s = session
    assert "mcp:good:later" not in {c["name"] for c in s.commands()}
    result = await asyncio.wait_for(s.all_tools["mcp__good__grow"].execute("1", {}, None, None), 60)
    assert result.content[0].text == "grown"
    assert await until(lambda: "mcp:good:later" in {c["name"] for c in s.commands()})
    assert await until(lambda: "note://later" in s.all_tools["mcp_read_resource"].description)
    await s.prompt("/mcp:good:later subject=tests careful")
    assert user_texts(s)[0] == "Later: tests (careful)"
