"""Hostile and unusual servers against the manager in process: a 100 MB answer costs a bounded amount of
memory and leaves the server usable, an abort ends a call at once (the server keeps serving), and the legacy SSE
transport works against an SDK-built SSE server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import time

import pytest

pytest.importorskip("mcp")

from mcpkit import SERVERS, until

from pisces.agent.types import ToolError
from pisces.ai.abort import AbortSignal
from pisces.core.session.build import create_agent_session_async


def peak_rss_kb() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))


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


async def test_a_100_mb_answer_is_refused_with_bounded_memory_and_the_server_still_serves(agent_dir):
    s = await open_session(agent_dir, {"huge": {"command": sys.executable, "args": [SERVERS, "huge", "100"]}})
    try:
        assert await until(lambda: "mcp__huge__huge" in s.all_tools), s.mcp.status()
        before = peak_rss_kb()
        with pytest.raises(ToolError, match="message over .* bytes refused"):
            await asyncio.wait_for(s.all_tools["mcp__huge__huge"].execute("1", {}, None, None), 300)
        grown_mb = (peak_rss_kb() - before) / 1024
        assert grown_mb < 64, f"peak memory grew by {grown_mb:.0f} MB for a 100 MB answer"
        result = await asyncio.wait_for(s.all_tools["mcp__huge__small"].execute("2", {}, None, None), 60)
        assert result.content[0].text == "small"  # the same connection, still in step
        assert s.mcp.servers["huge"].state == "connected"
    finally:
        await s.shutdown()


async def test_an_abort_ends_a_call_at_once_and_the_server_keeps_serving(agent_dir):
    s = await open_session(agent_dir, {"good": {"command": sys.executable, "args": [SERVERS, "good"]}})
    try:
        assert await until(lambda: "mcp__good__slow" in s.all_tools), s.mcp.status()
        signal = AbortSignal()
        call = asyncio.ensure_future(s.all_tools["mcp__good__slow"].execute("1", {"seconds": 600}, signal, None))
        await asyncio.sleep(0.5)
        assert not call.done()
        signal.abort()
        with pytest.raises(ToolError, match="aborted"):
            await asyncio.wait_for(call, 30)  # not the 600 s of the tool
        result = await asyncio.wait_for(s.all_tools["mcp__good__add"].execute("2", {"a": 1, "b": 1}, None, None), 60)
        assert result.content[0].text == "2"
    finally:
        await s.shutdown()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_http(kind: str) -> tuple[subprocess.Popen, int]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, SERVERS, kind, str(port)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return proc, port
        time.sleep(0.1)
    proc.kill()
    raise AssertionError(f"{kind} server did not listen")


async def test_the_legacy_sse_transport(agent_dir):
    proc, port = start_http("good-sse")
    try:
        s = await open_session(agent_dir, {"old": {"type": "sse", "url": f"http://127.0.0.1:{port}/sse"}})
        try:
            assert await until(lambda: s.mcp.servers["old"].state in ("connected", "failed")), s.mcp.status()
            assert s.mcp.servers["old"].state == "connected", s.mcp.status()
            result = await asyncio.wait_for(s.all_tools["mcp__old__echo"].execute("1", {"text": "sse"}, None, None),
                                            60)
            assert result.content[0].text == "echo: sse"
        finally:
            await s.shutdown()
    finally:
        proc.terminate()
        proc.wait(10)
