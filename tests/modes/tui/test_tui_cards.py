"""The transcript's richer cards through the renderer on a virtual terminal (pyte): consecutive read/grep/find/ls
calls grouped into one card, a retry counting down, the task tool's subagents live, images as placeholders,
the todo panel, MCP servers in the footer and /mcp; and themes in pi's format recolouring the rows."""

from __future__ import annotations

import asyncio
import io
import json
import os
import sys
import time

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from test_tui_app import FakeClient
from test_tui_render import Term

from pisces.modes.tui import cards, render, theme
from pisces.modes.tui.app import App
from pisces.modes.tui.render import Renderer
from pisces.modes.tui.transcript import Transcript


def tool(t: Transcript, call: str, name: str, args: dict, text: str = "", error: bool = False) -> None:
    t.on_event({"type": "tool_execution_start", "toolCallId": call, "toolName": name, "args": args})
    t.on_event({"type": "tool_execution_end", "toolCallId": call, "toolName": name, "isError": error,
                "result": {"content": [{"type": "text", "text": text}]}})


def frame(t: Transcript, r: Renderer) -> None:
    r.set_live(t.live() + ["> "], None)
    r.flush()


def test_consecutive_reads_and_searches_become_one_card_in_event_order() -> None:
    term = Term(80, 20)
    r = Renderer(term.write, 80, 20)
    t = Transcript(r.commit, 80)
    tool(t, "1", "read", {"path": "a.py"}, "1\n2\n3")
    tool(t, "2", "grep", {"pattern": "foo"}, "x:1:foo")
    frame(t, r)
    assert "● explored 2 calls: 1 read, 1 grep" in term.all_rows()  # live while it may still grow
    tool(t, "3", "ls", {"path": "src"}, "a\nb")
    tool(t, "4", "bash", {"command": "echo hi"}, "hi")  # another tool closes the group
    tool(t, "5", "read", {"path": "b.py"}, "x")
    t.on_event({"type": "agent_end"})
    frame(t, r)
    rows = term.all_rows()
    head = rows.index("● explored 3 calls: 1 read, 1 grep, 1 ls")
    assert rows[head + 1:head + 4] == ["  read a.py (3 lines)", "  grep foo (1 lines)", "  ls src (2 lines)"]
    assert rows.index("● bash echo hi") > head + 3
    assert rows.index("● read b.py") > rows.index("● bash echo hi")  # a lone call keeps its own card
    assert sum(1 for row in rows if row.startswith("● explored")) == 1  # committed once, not per frame
    # a failed read is not folded away
    tool(t, "6", "read", {"path": "gone.py"}, "ENOENT", error=True)
    frame(t, r)
    assert "✗ read gone.py" in term.all_rows()


def test_group_is_bounded() -> None:
    items = [{"name": "read", "summary": f"f{i}.py", "lines": 1} for i in range(50)]
    rows = cards.group_rows(items, 80)
    assert len(rows) == 1 + cards.GROUP_ROWS and "43 more" in render.visible(rows[-1])


def test_retry_counts_down_and_subagents_todos_images_show_live() -> None:
    term = Term(100, 30)
    r = Renderer(term.write, 100, 30)
    t = Transcript(r.commit, 100)
    t.on_event({"type": "auto_retry_start", "attempt": 1, "maxAttempts": 3, "delayMs": 9000,
                "errorMessage": "overloaded"})
    frame(t, r)
    assert "retrying in 9s (attempt 1/3): overloaded" in term.all_rows()
    assert t.retry is not None
    assert render.visible(cards.retry_row(t.retry, t.retry["until"] - 3.2)) == \
        "retrying in 4s (attempt 1/3): overloaded"
    assert render.visible(cards.retry_row(t.retry, t.retry["until"] + 1)) == "retrying (attempt 1/3): overloaded"
    t.on_event({"type": "auto_retry_start", "attempt": 2, "maxAttempts": 3, "delayMs": "soon"})  # bad: no wait
    assert t.retry["until"] <= time.monotonic() + 0.001
    t.on_event({"type": "auto_retry_end", "success": True})
    frame(t, r)
    assert not any(row.startswith("retrying") for row in term.screen.display)

    t.on_event({"type": "tool_execution_start", "toolCallId": "t", "toolName": "task", "args": {"tasks": []}})
    progress = [{"agent": "explore", "status": "running", "description": "map the code", "toolCount": 4,
                 "tokens": 1200, "durationMs": 3000, "currentTool": "grep", "currentToolArgs": "TODO"},
                {"agent": "worker", "status": "completed", "task": "fix \x1b[2Jit", "toolCount": 9, "tokens": 5,
                 "durationMs": 61000}]
    t.on_event({"type": "tool_execution_update", "toolCallId": "t", "toolName": "task",
                "partialResult": {"content": [{"type": "text", "text": "Running 2 agents..."}],
                                  "details": {"progress": progress}}})
    t.on_event({"type": "todo_update", "todoPhases": [
        {"id": "p1", "name": "Fix", "tasks": [{"id": "t1", "content": "find the bug", "status": "completed"},
                                              {"id": "t2", "content": "write the fix", "status": "in_progress"}]}]})
    frame(t, r)
    screen = [row.rstrip() for row in term.screen.display]
    assert "  ◌ explore running: map the code · 4 tools · 1200 tok · 3s · grep TODO" in screen
    assert "  ✓ worker completed: fix it · 9 tools · 5 tok · 61s" in screen  # the escape was cleaned
    assert "≡ todo 1/2 · Fix" in screen and "  ◐ write the fix" in screen and "  ● find the bug" in screen
    t.on_event({"type": "tool_execution_end", "toolCallId": "t", "toolName": "task",
                "result": {"content": [{"type": "text", "text": "done"},
                                       {"type": "image", "mimeType": "image/png", "data": "A" * 4096}]}})
    t.on_event({"type": "message_start", "message": {"role": "user", "content": [
        {"type": "text", "text": "look"}, {"type": "image", "mimeType": "image/jpeg", "data": "QUJD"}]}})
    t.on_event({"type": "todo_update", "todoPhases": [
        {"id": "p1", "name": "Fix", "tasks": [{"id": "t1", "content": "find the bug", "status": "completed"}]}]})
    frame(t, r)
    rows = term.all_rows()
    assert "  [image: image/png, 3.0 KB]" in rows and "  [image: image/jpeg, 3 B]" in rows
    assert not any("explore running" in row for row in term.screen.display)  # the live card is gone
    assert not any(row.startswith("≡ todo") for row in term.screen.display)  # a finished list leaves


def test_mcp_status_in_the_footer_and_the_mcp_command() -> None:
    class Client(FakeClient):
        async def request(self, cmd: dict) -> dict:
            self.sent.append(cmd)
            if cmd["type"] == "mcp_status":
                return {"success": True, "data": {"servers": [
                    {"name": "fs", "status": "connected", "tools": ["read", "list"]},
                    {"name": "web", "status": "failed", "error": "spawn ENOENT", "tools": []}]}}
            return {"success": True, "data": {}}

    rows: list[str] = []

    async def main() -> None:
        app = App(Client(), io.StringIO(), width=80, height=20)
        app.transcript.emit = rows.extend
        await app.refresh_state()
        assert app.statuses["mcp"] == "mcp 1/2 !"
        app.on_frame({"type": "mcp_server_status", "server": "web", "status": "connected"})
        assert app.statuses["mcp"] == "mcp 2/2"
        await app.command("/mcp")
    asyncio.run(main())
    text = "\n".join(render.visible(r) for r in rows)
    assert "fs: connected, 2 tools" in text and "web: connected (spawn ENOENT)" not in text
    assert "web: failed (spawn ENOENT)" in text  # /mcp asked the host again


@pytest.fixture
def palette_restored():
    yield
    render.PALETTE.clear()


def test_themes_in_pi_format_recolour_rows(tmp_path, palette_restored) -> None:
    name, colors, problem = theme.choose("light", None, str(tmp_path))
    assert (name, problem) == ("light", None)
    theme.apply(colors, truecolor=True)
    assert render.style("x", 31) == "\x1b[38;2;180;40;40mx\x1b[0m"  # light's error red
    # a file in pi's format: vars, hex, 256-colour indices, "" for the terminal's default
    data = {"name": "mine", "vars": {"hot": "#ff0000", "alias": "hot"}, "colors": {k: "" for k in theme.REQUIRED}}
    data["colors"].update({"error": "alias", "success": 34, "accent": "#00ff00"})
    path = tmp_path / "mine.json"
    path.write_text(json.dumps(data))
    name, colors, problem = theme.choose("dark", [str(path)], str(tmp_path))
    assert name == "mine" and problem is None
    theme.apply(colors, truecolor=False)
    assert render.style("x", 31) == "\x1b[38;5;196mx\x1b[0m"
    assert render.style("x", 32) == "\x1b[38;5;34mx\x1b[0m"
    assert render.style("x", 33) == "\x1b[33mx\x1b[0m"  # "": the plain code stays
    (tmp_path / "themes").mkdir()
    (tmp_path / "themes" / "mine.json").write_text(json.dumps(data))
    assert theme.choose("mine", None, str(tmp_path))[0] == "mine"
    # refused themes say why, and dark applies
    assert "--no-themes" in str(theme.choose("mine", None, str(tmp_path), no_themes=True)[2])
    bad = dict(data, colors={"error": "#ff0000"})
    path.write_text(json.dumps(bad))
    name, _, problem = theme.choose(None, [str(path)], str(tmp_path))
    assert name == "dark" and "missing colors: accent" in str(problem)
    loop = dict(data, vars={"a": "b", "b": "a"}, colors=dict(data["colors"], error="a"))
    path.write_text(json.dumps(loop))
    assert "loop" in str(theme.choose(None, [str(path)], str(tmp_path))[2])
    path.write_text("{not json")
    assert "could not be read" in str(theme.choose(None, [str(path)], str(tmp_path))[2])


def test_the_local_client_decodes_frames_with_a_lone_surrogate_too() -> None:
    from pisces.modes.host.encoding import encode_with_lone_surrogates
    from pisces.modes.tui.client import LocalClient

    got: list[dict] = []
    client = LocalClient.__new__(LocalClient)  # the decoding only: no host needed
    client.on_frame, client._waiting = got.append, {}
    client.send_bytes(b'{"type":"x","text":"caf\\u00e9"}\n')
    client.send_bytes(encode_with_lone_surrogates({"type": "y", "text": "a\ud800b"}) + b"\n")
    assert got == [{"type": "x", "text": "café"}, {"type": "y", "text": "a\ud800b"}]


def test_the_task_tools_own_progress_frames_make_the_live_card() -> None:
    """The details the task tool publishes (core.task.progress), encoded as the host sends them."""
    from types import SimpleNamespace

    import msgspec

    from pisces.core.task.progress import ProgressBoard, new_progress

    sent: list = []

    async def main() -> None:
        board = ProgressBoard(2, sent.append, None, time.time())
        agent = SimpleNamespace(name="explore", source="builtin")
        p = new_progress(0, "T1", agent, "map the code", "", "map the code", status="running")
        p.update(currentTool="grep", currentToolArgs="TODO", toolCount=3, tokens=900, durationMs=2000)
        board.set(0, p, flush=True)
        board.set(1, new_progress(1, "T2", agent, "fix it", "", "", status="pending"), flush=True)
        board.close()
    asyncio.run(main())
    partial = msgspec.json.decode(msgspec.json.encode(sent[-1]))  # as a client receives it
    term = Term(100, 12)
    r = Renderer(term.write, 100, 12)
    t = Transcript(r.commit, 100)
    t.on_event({"type": "tool_execution_start", "toolCallId": "t", "toolName": "task",
                "args": {"agent": "explore", "tasks": [{"task": "map the code"}, {"task": "fix it"}]}})
    t.on_event({"type": "tool_execution_update", "toolCallId": "t", "toolName": "task", "partialResult": partial})
    frame(t, r)
    screen = [row.rstrip() for row in term.screen.display]
    assert "◌ task explore · 2 tasks" in screen
    assert "  ◌ explore running: map the code · 3 tools · 900 tok · 2s · grep TODO" in screen
    assert "  ○ explore pending: fix it · 0 tools · 0 tok · 0s" in screen
