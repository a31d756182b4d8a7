"""Session files across modes and processes: session/load replays tool calls, list, resume, close, and a
session begun in ACP continues in RPC mode (and the other way round)."""

from __future__ import annotations

import asyncio
import json
import os

from acp import RequestError
from acp_harness import HANG, Editor, prompt_text, running
from e2eproc import PISCES, Proc

TOOL_TURN = [
    {"text": "Checking.", "toolCalls": [{"name": "bash", "arguments": {"command": "echo replayed-output"},
                                         "id": "call_b"},
                                        {"name": "write", "arguments": {"path": "out.txt", "content": "v1\n"},
                                         "id": "call_w"}]},
    {"thinking": "Both worked.", "text": "Both done."},
]


async def _make_session(home, editor, script) -> str:
    async with running(home, editor, "--faux-script", script) as conn:
        sid = (await conn.new_session(cwd=home.cwd, mcp_servers=[])).session_id
        reply = await asyncio.wait_for(conn.prompt(session_id=sid, prompt=prompt_text("First task")), HANG)
        assert reply.stop_reason == "end_turn"
    return sid


async def test_load_replays_the_conversation_with_tool_calls_before_its_response(home):
    sid = await _make_session(home, Editor(), home.faux_script(TOOL_TURN))
    editor = Editor()
    async with running(home, editor, "--provider", "faux") as conn:
        loaded = await asyncio.wait_for(conn.load_session(cwd=home.cwd, session_id=sid, mcp_servers=[]), HANG)
        await editor.wait_for(lambda: editor.of("available_commands_update", sid))
    assert loaded is not None and loaded.modes.current_mode_id == "default"
    # where the load's response sits on the wire (notifications written after it may already have been read
    # when load_session returns, so the position is taken from the wire, not from the moment of the return)
    answered, raw = next((i, m) for i, (d, m) in enumerate(editor.wire)
                         if d == "in" and m.get("id") is not None and "result" in m and "modes" in (m["result"] or {}))
    assert isinstance(raw["result"], dict)  # ACP-LOAD-003: an object, not null
    replayed = [m for d, m in editor.wire[:answered] if d == "in" and m.get("method") == "session/update"]
    kinds = [m["params"]["update"]["sessionUpdate"] for m in replayed]
    assert kinds == ["user_message_chunk", "agent_message_chunk", "tool_call", "tool_call", "tool_call_update",
                     "tool_call_update", "agent_thought_chunk", "agent_message_chunk"]
    history = [u for _, u in editor.updates][:len(kinds)]
    assert history[0].content.text == "First task"
    bash = next(u for u in history if u.session_update == "tool_call" and u.tool_call_id == "call_b")
    assert (bash.kind, bash.title) == ("execute", "echo replayed-output")
    done = {u.tool_call_id: u for u in history if u.session_update == "tool_call_update"}
    assert done["call_b"].status == "completed" and "replayed-output" in done["call_b"].content[0].content.text
    assert done["call_w"].status == "completed"
    write = next(u for u in history if u.session_update == "tool_call" and u.tool_call_id == "call_w")
    assert write.content[0].new_text == "v1\n"
    after = [m["params"]["update"]["sessionUpdate"] for d, m in editor.wire[answered:]
             if d == "in" and m.get("method") == "session/update"]
    assert "tool_call" not in after and "user_message_chunk" not in after  # ACP-LOAD-002


async def test_load_of_an_unknown_id_is_an_error_not_a_fresh_session(home):
    editor = Editor()
    async with running(home, editor, "--provider", "faux") as conn:
        try:
            await conn.load_session(cwd=home.cwd, session_id="01900000-0000-7000-8000-000000000000", mcp_servers=[])
            raise AssertionError("an unknown session id was loaded")
        except RequestError as exc:
            assert exc.code == -32002 and "not found" in str(exc)
        listed = await conn.list_sessions()
    assert listed.sessions == []


async def test_a_session_begun_in_acp_continues_in_rpc_mode(home):
    sid = await _make_session(home, Editor(), home.faux_script(TOOL_TURN))
    script = home.faux_script([{"text": "Continued in RPC."}], "rpc.json")
    proc = Proc([PISCES[0], "--mode", "rpc", "--no-ready", "--faux-script", script, "--session", sid], home.env(),
                home.cwd)
    try:
        state = proc.request({"type": "get_state"})
        assert state["data"]["sessionId"] == sid
        messages = proc.request({"type": "get_messages"})["data"]["messages"]
        roles = [m["role"] for m in messages]
        assert roles == ["user", "assistant", "toolResult", "toolResult", "assistant"]
        assert messages[2]["toolCallId"] == "call_b" and "replayed-output" in messages[2]["content"][0]["text"]
        proc.request({"type": "prompt", "message": "And now?"})
        proc.until(lambda f: f.get("type") == "agent_settled", timeout=HANG)
        text = proc.request({"type": "get_last_assistant_text"})["data"]["text"]
        assert text == "Continued in RPC."
    finally:
        proc.close()
    (path,) = home.session_files()
    lines = [json.loads(line) for line in open(path)]
    assert lines[0]["type"] == "session" and lines[0]["id"] == sid and lines[0]["version"] == 3
    assert [m["message"]["role"] for m in lines if m["type"] == "message"][-2:] == ["user", "assistant"]


async def test_a_session_begun_in_rpc_loads_in_acp_and_its_next_turn_lands_in_the_same_file(home):
    script = home.faux_script([{"text": "From RPC."}, {"text": "From the editor."}])
    proc = Proc([PISCES[0], "--mode", "rpc", "--no-ready", "--faux-script", script], home.env(), home.cwd)
    try:
        sid = proc.request({"type": "get_state"})["data"]["sessionId"]
        proc.request({"type": "prompt", "message": "Hello from RPC"})
        proc.until(lambda f: f.get("type") == "agent_settled", timeout=HANG)
    finally:
        proc.close()
    editor = Editor()
    script2 = home.faux_script([{"text": "From the editor."}], "acp.json")
    async with running(home, editor, "--faux-script", script2) as conn:
        await conn.load_session(cwd=home.cwd, session_id=sid, mcp_servers=[])
        reply = await asyncio.wait_for(conn.prompt(session_id=sid, prompt=prompt_text("Hi again")), HANG)
    assert reply.stop_reason == "end_turn"
    assert [u.content.text for u in editor.of("user_message_chunk")] == ["Hello from RPC"]
    assert editor.text() == "From RPC.From the editor."
    (path,) = home.session_files()
    roles = [json.loads(line)["message"]["role"] for line in open(path) if '"type":"message"' in line]
    assert roles == ["user", "assistant", "user", "assistant"]


async def test_list_resume_and_close(home):
    sid = await _make_session(home, Editor(), home.faux_script(TOOL_TURN))
    editor = Editor()
    script = home.faux_script([{"text": "resumed", "chunkSize": 1, "delayMs": 100}] * 2, "more.json")
    async with running(home, editor, "--faux-script", script) as conn:
        listed = await conn.list_sessions(cwd=home.cwd)
        assert [(s.session_id, s.title, s.cwd) for s in listed.sessions] == [(sid, "First task", home.cwd)]
        assert listed.sessions[0].updated_at and listed.next_cursor is None
        assert (await conn.list_sessions(cwd=os.path.join(home.root, "home"))).sessions == []  # ACP-LIST-002
        resumed = await conn.resume_session(cwd=home.cwd, session_id=sid, mcp_servers=[])
        assert resumed.modes.current_mode_id == "default"
        history_kinds = {"user_message_chunk", "agent_message_chunk", "agent_thought_chunk", "tool_call"}
        assert not history_kinds & set(editor.kinds(sid))  # ACP-RESUME-002: no replay
        turn = asyncio.ensure_future(conn.prompt(session_id=sid, prompt=prompt_text("continue")))
        await editor.wait_for(lambda: editor.of("agent_message_chunk", sid))
        await conn.close_session(session_id=sid)  # closing cancels the turn in flight (ACP-CLOSE-002)
        reply = await asyncio.wait_for(turn, HANG)
        assert reply.stop_reason == "cancelled"
        try:
            await conn.prompt(session_id=sid, prompt=prompt_text("gone?"))
            raise AssertionError("a closed session took a prompt")
        except RequestError as exc:
            assert exc.code == -32002
        other = (await conn.new_session(cwd=home.cwd, mcp_servers=[])).session_id
        await conn.close_session(session_id=other)  # ACP-CLOSE-001: an idle session closes
