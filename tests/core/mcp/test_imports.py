"""Other agents' MCP configuration, behind the setting ``mcp.importConfigs``: Claude Code's ``~/.claude.json``
(user and per-project maps) and Cursor's ``mcp.json`` files; pisces' own files win; a project's Cursor file needs
trust; without the setting nothing is read."""

from __future__ import annotations

import json
import os

from pisces.core.mcp.config import load_config


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(data, f)


def test_claude_and_cursor_files_are_imported_with_trust_applied(tmp_path, monkeypatch):
    home, agent, proj = tmp_path / "home", str(tmp_path / "agent"), str(tmp_path / "proj")
    monkeypatch.setenv("HOME", str(home))
    os.makedirs(proj)
    write(f"{home}/.claude.json", {"numStartups": 3, "mcpServers": {"cl": {"type": "stdio", "command": "claude-cl"},
                                                                    "both": {"command": "from-claude"}},
                                   "projects": {os.path.realpath(proj): {"mcpServers": {
                                       "local": {"type": "http", "url": "https://l/mcp"}}}}})
    write(f"{home}/.cursor/mcp.json", {"mcpServers": {"cu": {"url": "https://cursor/sse", "type": "sse"}}})
    write(f"{proj}/.cursor/mcp.json", {"mcpServers": {"cproj": {"command": "project-code"}}})
    write(f"{agent}/mcp.json", {"mcpServers": {"both": {"command": "from-pisces"}}})

    assert set(load_config(proj, agent, trusted=True).servers) == {"both"}  # no setting: nothing imported
    cfg = load_config(proj, agent, trusted=False, imports=["claude", "cursor"])
    assert set(cfg.servers) == {"cl", "both", "local", "cu"}
    assert cfg.servers["both"].command == "from-pisces"  # pisces' own file wins
    assert cfg.servers["cl"].source.endswith(".claude.json") and cfg.servers["cl"].scope == "user"
    assert cfg.servers["local"].url == "https://l/mcp" and cfg.servers["cu"].transport == "sse"
    assert [s.name for s in cfg.untrusted] == ["cproj"]  # a project's file: code the repository chose
    assert "cproj" in load_config(proj, agent, trusted=True, imports=["cursor"]).servers
    bad = load_config(proj, agent, trusted=True, imports=["vim"])
    assert any("unknown agent 'vim'" in e for e in bad.errors)


async def test_the_setting_alone_brings_a_session_its_imported_servers(tmp_path, monkeypatch):
    import sys

    from pisces.core.session.build import create_agent_session_async

    home, agent = tmp_path / "home", tmp_path / "agent"
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("PISCES_CODING_AGENT_DIR", str(agent))
    (tmp_path / "work").mkdir()
    servers = os.path.join(os.path.dirname(os.path.abspath(__file__)), "servers.py")
    write(f"{home}/.claude.json", {"mcpServers": {"cl": {"command": sys.executable, "args": [servers, "good"]}}})
    write(f"{agent}/settings.json", {"mcp": {"importConfigs": ["claude"]}})
    s = await create_agent_session_async(cwd=str(tmp_path / "work"), provider="faux", no_session=True)
    try:
        assert s.mcp is not None and list(s.mcp.servers) == ["cl"]
        assert s.mcp.status()["servers"][0]["source"] == f"{home}/.claude.json"
    finally:
        await s.shutdown()
