"""The MCP manager in process against the SDK test server over stdio: list_changed floods refresh the tool set
once at a time, a call waits for a reconnecting server, tiers and approval rules apply to MCP tools, and closing
the session leaves no server process."""

from __future__ import annotations

import asyncio
import json
import sys

import pytest

pytest.importorskip("mcp")

from mcpkit import SERVERS, until

from pisces.core.approval.policy import tier_of
from pisces.core.approval.rules import glob_match
from pisces.core.session.build import create_agent_session_async


@pytest.fixture
def agent_dir(tmp_path, monkeypatch):
    path = tmp_path / "agent"
    path.mkdir()
    monkeypatch.setenv("PISCES_CODING_AGENT_DIR", str(path))
    (tmp_path / "work").mkdir()
    return path


async def open_session(agent_dir, servers):
    (agent_dir / "mcp.json").write_text(json.dumps({"mcpServers": servers}))
    return await create_agent_session_async(cwd=str(agent_dir.parent / "work"), provider="faux", no_session=True)


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return False


async def test_a_list_changed_flood_refreshes_the_tools_and_close_stops_the_process(agent_dir):
    s = await open_session(agent_dir, {"good": {"command": sys.executable, "args": [SERVERS, "good"],
                                                "approvalTier": "write"}})
    events = []
    s.subscribe(events.append)
    try:
        assert await until(lambda: "mcp__good__echo" in s.all_tools)
        tool = s.all_tools["mcp__good__echo"]
        assert tier_of(tool.name, tool, {}) == "write"  # the server's approvalTier
        assert glob_match("mcp__good__*", tool.name) and not glob_match("mcp__other__*", tool.name)
        pid = int((await s.all_tools["mcp__good__pid"].execute("1", {}, None, None)).content[0].text)
        assert alive(pid)
        result = await asyncio.wait_for(s.all_tools["mcp__good__flood"].execute("2", {}, None, None), 60)
        assert result.content[0].text == "flooded"
        assert await until(lambda: "mcp__good__late" in s.all_tools)
        assert "mcp__good__late" in [t.name for t in s.agent.tools]  # switched on, in the next request
        changes = [e for e in events if e.get("type") == "mcp_tools_changed"]
        assert changes and len(changes) < 200  # 2000 notifications, a handful of refreshes
        assert s.mcp.status()["servers"][0]["status"] == "connected"
    finally:
        await s.shutdown()
    assert await until(lambda: not alive(pid), 20)
    assert s.mcp.status()["servers"][0]["status"] == "stopped"


async def test_a_call_waits_for_a_reconnecting_server_and_tiers_default_to_exec(agent_dir):
    s = await open_session(agent_dir, {"good": {"command": sys.executable, "args": [SERVERS, "good"]}})
    try:
        assert await until(lambda: "mcp__good__add" in s.all_tools)
        tool = s.all_tools["mcp__good__add"]
        assert tier_of(tool.name, tool, {}) == "exec"
        server = s.mcp.servers["good"]
        await server.stop()
        assert "mcp__good__add" not in s.all_tools
        server.start()  # connecting again; the old tool object waits for it
        assert server.state == "connecting"
        result = await asyncio.wait_for(tool.execute("1", {"a": 1, "b": 2}, None, None), 60)
        assert result.content[0].text == "3"
    finally:
        await s.shutdown()


async def test_a_failed_server_gives_the_model_a_clear_error(agent_dir):
    s = await open_session(agent_dir, {"bad": {"command": sys.executable, "args": [SERVERS, "crash"]},
                                       "nothere": {"command": "/nonexistent/mcp-server"},
                                       "novar": {"url": "http://127.0.0.1:1/${UNSET_MCP_VAR_X}"}})
    try:
        assert await until(lambda: all(v.state == "failed" for v in s.mcp.servers.values()))
        status = {x["name"]: x for x in s.mcp.status()["servers"]}
        assert "UNSET_MCP_VAR_X is not set" in status["novar"]["error"]
        assert status["nothere"]["error"] and status["bad"]["error"]
        from pisces.agent.types import ToolError

        with pytest.raises(ToolError, match="not connected"):
            await s.mcp.servers["bad"].call("x", {}, None)
    finally:
        await s.shutdown()


async def test_above_the_threshold_tools_are_deferred_behind_one_search_tool(agent_dir):
    (agent_dir / "mcp.json").write_text(json.dumps({"toolSearch": {"thresholdTokens": 0}, "mcpServers": {
        "good": {"command": sys.executable, "args": [SERVERS, "good"]},
        "pinned": {"command": sys.executable, "args": [SERVERS, "good"], "alwaysLoad": True}}}))
    s = await create_agent_session_async(cwd=str(agent_dir.parent / "work"), provider="faux", no_session=True)
    try:
        assert await until(lambda: all(v.state == "connected" for v in s.mcp.servers.values())), s.mcp.status()
        active = [t.name for t in s.agent.tools]
        assert "mcp_tool_search" in active and "mcp__good__add" not in active
        assert "mcp__pinned__add" in active  # alwaysLoad
        search = s.all_tools["mcp_tool_search"]
        assert "mcp__good__add: Add two integers." in search.description
        assert '"properties"' not in search.description  # names and short descriptions only
        result = await search.execute("1", {"query": "add integers"}, None, None)
        assert "mcp__good__add" in result.details["loaded"] and '"a"' in result.content[0].text
        assert "mcp__good__add" in [t.name for t in s.agent.tools]
        assert "mcp__good__add" not in s.mcp.status()["deferredTools"]
    finally:
        await s.shutdown()


async def test_below_the_threshold_nothing_is_deferred(agent_dir):
    s = await open_session(agent_dir, {"good": {"command": sys.executable, "args": [SERVERS, "good"]}})
    try:
        assert await until(lambda: "mcp__good__add" in s.all_tools)
        assert "mcp_tool_search" not in s.all_tools and "mcp__good__add" in [t.name for t in s.agent.tools]
    finally:
        await s.shutdown()


async def test_the_model_reads_a_resource(agent_dir):
    s = await open_session(agent_dir, {"good": {"command": sys.executable, "args": [SERVERS, "good"]}})
    try:
        assert await until(lambda: "mcp_read_resource" in s.all_tools)
        tool = s.all_tools["mcp_read_resource"]
        assert "note://hello" in tool.description
        result = await tool.execute("1", {"server": "good", "uri": "note://hello"}, None, None)
        assert result.content[0].text == "hello resource"
        from pisces.agent.types import ToolError

        with pytest.raises(ToolError, match="No MCP server named 'nope'"):
            await tool.execute("2", {"server": "nope", "uri": "x"}, None, None)
    finally:
        await s.shutdown()
