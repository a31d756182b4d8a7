"""AgentSession in process, with the faux provider: what a mode sees of a session, without spawning pisces.

A change to the session (its collaborators, its queues, its file) can be tested here in milliseconds; the e2e
tests then check the same behaviour through the real process."""

from __future__ import annotations

import asyncio
import json
import os

import pytest

from pisces.core.errors import SessionError
from pisces.core.session.build import create_agent_session_async


def _tag(obj) -> str:
    """An event's ``type`` or a message's ``role``: the tag of its msgspec struct (a dict's own field)."""
    if isinstance(obj, dict):
        return obj.get("type") or obj.get("role") or ""
    return type(obj).__struct_config__.tag


_type = _tag


def _texts(session, role: str) -> list[str]:
    return [m.content[0].text if not isinstance(m.content, str) else m.content
            for m in session.messages if _tag(m) == role]


async def _session(tmp_path, **kwargs):
    cwd = tmp_path / "work"
    cwd.mkdir(exist_ok=True)
    session = await create_agent_session_async(cwd=str(cwd), provider="faux", **kwargs)
    events: list = []
    session.subscribe(events.append)
    return session, events


async def test_a_prompt_runs_to_the_end_and_the_reply_is_the_last_text(tmp_path, faux):
    session, events = await _session(tmp_path, no_session=True)
    faux.enqueue({"text": "Hello from the scripted model"})
    await session.prompt("Say hello")
    kinds = [_type(e) for e in events]
    assert kinds[0] == "agent_start" and "agent_end" in kinds
    assert kinds.index("message_start") < kinds.index("message_end") < kinds.index("agent_end")
    assert session.last_assistant_text() == "Hello from the scripted model"
    assert [_tag(m) for m in session.messages] == ["user", "assistant"]
    state = session.get_state()
    assert state["isStreaming"] is False and state["messageCount"] == 2 and state["model"].provider == "faux"


async def test_a_tool_call_runs_against_the_real_directory(tmp_path, faux):
    session, events = await _session(tmp_path, no_session=True)
    (tmp_path / "work" / "notes.txt").write_text("remember the milk\n")
    faux.enqueue({"toolCalls": [{"name": "read", "arguments": {"path": "notes.txt"}}]}, {"text": "read it"})
    await session.prompt("what do the notes say?")
    ends = [e for e in events if _type(e) == "tool_execution_end"]
    assert len(ends) == 1 and ends[0].toolName == "read" and not ends[0].isError
    assert "remember the milk" in ends[0].result.content[0].text
    # the tool's result went back to the model in the second request
    second = faux.requests[1]
    assert any(_tag(m) == "toolResult" for m in second.messages)


async def test_the_history_is_sealed_once_a_run_and_its_handlers_are_done(tmp_path, faux):
    """What the session seals (its messages final, see ``TrackedList.seal``): every message of the runs that
    are over, none of the run going on."""
    session, events = await _session(tmp_path, no_session=True)
    during: list[tuple[int, int]] = []
    session.subscribe(lambda e: during.append((session.agent.messages.final_items(), len(session.agent.messages)))
                      if _type(e) == "message_end" else None)
    faux.enqueue({"toolCalls": [{"name": "read", "arguments": {"path": "nothing.txt"}}]}, {"text": "done"})
    await session.prompt("first")
    assert during and all(final == 0 for final, _ in during)
    assert session.agent.messages.final_items() == len(session.agent.messages) == 4
    during.clear()
    faux.enqueue({"text": "again"})
    await session.prompt("second")
    assert during and all(final == 4 for final, _ in during) and max(n for _, n in during) == 6
    assert session.agent.messages.final_items() == 6


async def test_a_steer_sent_while_streaming_reaches_the_next_turn(tmp_path, faux):
    session, events = await _session(tmp_path, no_session=True)
    faux.enqueue({"text": "slow " * 20, "delayMs": 20}, {"text": "steered answer"})
    started = asyncio.Event()
    session.subscribe(lambda e: started.set() if _type(e) == "message_update" else None)
    run = asyncio.create_task(session.prompt("first"))
    await asyncio.wait_for(started.wait(), 30)
    session.steer("change of plan")
    await asyncio.wait_for(run, 60)
    assert _texts(session, "user") == ["first", "change of plan"]
    assert session.last_assistant_text() == "steered answer"


async def test_abort_stops_the_reply_and_the_session_takes_the_next_prompt(tmp_path, faux):
    session, events = await _session(tmp_path, no_session=True)
    faux.enqueue({"text": "word " * 500, "delayMs": 20}, {"text": "after abort"})
    started = asyncio.Event()
    session.subscribe(lambda e: started.set() if _type(e) == "message_update" else None)
    run = asyncio.create_task(session.prompt("long"))
    await asyncio.wait_for(started.wait(), 30)
    await asyncio.wait_for(session.abort(), 30)
    await asyncio.wait_for(run, 30)
    assert session.messages[-1].stopReason == "aborted" and not session.is_streaming
    await session.prompt("again")
    assert session.last_assistant_text() == "after abort"


async def test_a_prompt_while_busy_without_a_behaviour_is_refused_with_pis_text(tmp_path, faux):
    session, _ = await _session(tmp_path, no_session=True)
    faux.enqueue({"text": "busy " * 100, "delayMs": 20}, {"text": "queued answer"})
    run = asyncio.create_task(session.prompt("first"))
    while not session.is_streaming:
        await asyncio.sleep(0.01)
    with pytest.raises(SessionError, match="already processing"):
        await session.prompt("second")
    await session.prompt("queued", streaming_behavior="followUp")
    await asyncio.wait_for(run, 60)
    assert _texts(session, "user") == ["first", "queued"]


async def test_the_session_file_holds_every_entry_in_pis_format(tmp_path, faux):
    session, _ = await _session(tmp_path)
    faux.enqueue({"text": "persisted"})
    await session.prompt("keep this")
    path = session.store.get_session_file()
    assert path and os.path.exists(path)
    lines = [json.loads(line) for line in open(path, encoding="utf-8")]
    assert lines[0]["type"] == "session" and lines[0]["version"] == 3
    roles = [entry["message"]["role"] for entry in lines if entry["type"] == "message"]
    assert roles == ["user", "assistant"]


async def test_no_credentials_is_a_sentence_naming_the_variable(tmp_path, faux):
    cwd = tmp_path / "work"
    cwd.mkdir()
    session = await create_agent_session_async(cwd=str(cwd), provider="anthropic", no_session=True)
    with pytest.raises(SessionError, match="ANTHROPIC_API_KEY"):
        await session.prompt("hello")
