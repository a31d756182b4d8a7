"""The npm reference servers over stdio. ``@modelcontextprotocol/server-everything``: its tools load (schemas
sanitized, names within limits), ``echo`` and ``get-sum`` answer, and closing leaves no node process.
``@modelcontextprotocol/server-filesystem``: it reads and lists the project's files and refuses a path outside
the directory it was given (an error result reaches the model as ``MCP error``).

The package is installed with npm into a cache directory (``PISCES_MCP_NPM_CACHE``, default
``~/.cache/pisces-test-npm``) the first time; without node/npm or the network the test skips and says why."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

pytest.importorskip("mcp")

from mcpkit import until

from pisces.core.session.build import create_agent_session_async


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return False

PACKAGE = "@modelcontextprotocol/server-everything"


def npm_server(package: str) -> str:
    """The entry script of an npm package, installed into the cache directory on first use (else a skip)."""
    if not shutil.which("node") or not shutil.which("npm"):
        pytest.skip("node and npm are needed for the npm reference server")
    prefix = os.environ.get("PISCES_MCP_NPM_CACHE", os.path.expanduser("~/.cache/pisces-test-npm"))
    script = os.path.join(prefix, "node_modules", package, "dist", "index.js")
    if not os.path.exists(script):
        os.makedirs(prefix, exist_ok=True)
        try:
            r = subprocess.run(["npm", "install", "--prefix", prefix, package], capture_output=True, text=True,
                               timeout=300)
        except subprocess.TimeoutExpired:
            pytest.skip(f"npm install {package} took longer than 300 s")
        if r.returncode != 0 or not os.path.exists(script):
            pytest.skip(f"npm install {package} failed: {r.stderr[-500:]}")
    return script


def everything_js() -> str:
    return npm_server(PACKAGE)


async def test_the_reference_server_everything(tmp_path, monkeypatch):
    script = everything_js()
    agent = tmp_path / "agent"
    agent.mkdir()
    (tmp_path / "work").mkdir()
    monkeypatch.setenv("PISCES_CODING_AGENT_DIR", str(agent))
    (agent / "mcp.json").write_text(json.dumps({"mcpServers": {"everything": {
        "command": shutil.which("node"), "args": [script, "stdio"], "timeout": 60000}}}))
    s = await create_agent_session_async(cwd=str(tmp_path / "work"), provider="faux", no_session=True)
    try:
        assert await until(lambda: s.mcp.servers["everything"].state != "connecting", 90)
        server = s.mcp.servers["everything"]
        assert server.state == "connected", server.error
        names = {t.name for t in server.tools}
        assert {"mcp__everything__echo", "mcp__everything__get-sum"} <= names
        for tool in server.tools:
            text = json.dumps(tool.parameters)
            assert "$ref" not in text and "additionalProperties" not in text and len(tool.name) <= 64
        echo = await s.all_tools["mcp__everything__echo"].execute("1", {"message": "hi"}, None, None)
        assert "hi" in echo.content[0].text
        total = await s.all_tools["mcp__everything__get-sum"].execute("2", {"a": 2, "b": 3}, None, None)
        assert "5" in total.content[0].text
        pgid = server.pgid
        assert pgid is not None and alive(pgid)
    finally:
        await s.shutdown()
    assert await until(lambda: not alive(pgid), 20)


async def test_the_reference_server_filesystem(tmp_path, monkeypatch):
    from pisces.agent.types import ToolError

    script = npm_server("@modelcontextprotocol/server-filesystem")
    agent, work = tmp_path / "agent", tmp_path / "work"
    agent.mkdir()
    work.mkdir()
    (work / "notes.txt").write_text("filesystem server works\n")
    (tmp_path / "secret.txt").write_text("outside")
    monkeypatch.setenv("PISCES_CODING_AGENT_DIR", str(agent))
    (agent / "mcp.json").write_text(json.dumps({"mcpServers": {"fs": {
        "command": shutil.which("node"), "args": [script, str(work)], "timeout": 60000}}}))
    s = await create_agent_session_async(cwd=str(work), provider="faux", no_session=True)
    try:
        assert await until(lambda: s.mcp.servers["fs"].state != "connecting", 90)
        server = s.mcp.servers["fs"]
        assert server.state == "connected", server.error
        names = {t.name for t in server.tools}
        read = "mcp__fs__read_text_file" if "mcp__fs__read_text_file" in names else "mcp__fs__read_file"
        assert read in names and "mcp__fs__list_directory" in names, names
        text = await s.all_tools[read].execute("1", {"path": str(work / "notes.txt")}, None, None)
        assert "filesystem server works" in text.content[0].text
        listing = await s.all_tools["mcp__fs__list_directory"].execute("2", {"path": str(work)}, None, None)
        assert "notes.txt" in listing.content[0].text
        with pytest.raises(ToolError, match="MCP error"):
            await s.all_tools[read].execute("3", {"path": str(tmp_path / "secret.txt")}, None, None)
        pgid = server.pgid
    finally:
        await s.shutdown()
    assert pgid is not None and await until(lambda: not alive(pgid), 20)
