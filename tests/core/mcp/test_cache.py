"""Cached tool definitions: a server's tools from its last connection are offered at once by the next session
(before the server has connected), a call to one waits for the connection, the cache file is private and keyed
by the configuration, and a changed configuration is not offered another's list."""

from __future__ import annotations

import asyncio
import json
import stat
import sys

import pytest

pytest.importorskip("mcp")

from mcpkit import SERVERS, until

from pisces.core.mcp import cache
from pisces.core.session.build import create_agent_session_async


async def test_the_next_session_offers_the_cached_tools_and_a_call_waits_for_the_server(tmp_path, monkeypatch):
    agent = tmp_path / "agent"
    agent.mkdir()
    (tmp_path / "work").mkdir()
    monkeypatch.setenv("PISCES_CODING_AGENT_DIR", str(agent))
    servers = {"slow": {"command": sys.executable, "args": [SERVERS, "slowstart", "2"], "excludeTools": ["flood"]}}
    (agent / "mcp.json").write_text(json.dumps({"mcpServers": servers}))

    async def open_session():
        return await create_agent_session_async(cwd=str(tmp_path / "work"), provider="faux", no_session=True)

    s = await open_session()
    try:
        assert "mcp__slow__add" not in s.all_tools  # no cache yet: the tools come with the connection
        assert await until(lambda: "mcp__slow__add" in s.all_tools), s.mcp.status()
    finally:
        await s.shutdown()
    files = list((agent / "mcp-cache").iterdir())
    assert len(files) == 1 and stat.S_IMODE(files[0].stat().st_mode) == 0o600
    assert stat.S_IMODE((agent / "mcp-cache").stat().st_mode) == 0o700
    assert {t["name"] for t in json.loads(files[0].read_text())["tools"]} >= {"add", "echo", "flood"}

    s = await open_session()
    try:
        server = s.mcp.servers["slow"]
        assert server.state == "connecting" and "mcp__slow__add" in s.all_tools  # before the connection
        assert "mcp__slow__add" in [t.name for t in s.agent.tools]  # in the first request
        assert "mcp__slow__flood" not in s.all_tools  # the filters apply to cached tools too
        status = s.mcp.status()["servers"][0]
        assert status["cached"] is True and status["status"] == "connecting"
        result = await asyncio.wait_for(s.all_tools["mcp__slow__add"].execute("1", {"a": 20, "b": 22}, None, None),
                                        90)
        assert result.content[0].text == "42"  # waited for the server
        assert s.mcp.status()["servers"][0]["cached"] is False
    finally:
        await s.shutdown()

    servers["slow"]["args"] = [SERVERS, "slowstart", "3"]  # another configuration: another key
    (agent / "mcp.json").write_text(json.dumps({"mcpServers": servers}))
    s = await open_session()
    try:
        assert "mcp__slow__add" not in s.all_tools
    finally:
        await s.shutdown()


def test_a_bad_cache_file_is_no_cache(tmp_path):
    from pisces.core.mcp.config import ServerConfig

    cfg = ServerConfig(name="x", transport="stdio", source="f", scope="user", command="c")
    cache.save(str(tmp_path), cfg, [{"name": "t", "inputSchema": {"type": "object"}}])
    assert cache.load(str(tmp_path), cfg) == [{"name": "t", "inputSchema": {"type": "object"}}]
    with open(cache.path(str(tmp_path), cfg), "w") as f:
        f.write("{not json")
    assert cache.load(str(tmp_path), cfg) is None
