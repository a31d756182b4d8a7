"""Compaction through a real AgentSession on the faux model: manual, threshold, overflow, abort, queued
prompts, split turns, the session file, and branch summaries."""

from __future__ import annotations

import asyncio
import json

import pytest

from pisces.ai.types import UNSET, AssistantMessage, TextContent, UserMessage
from pisces.core.errors import SessionError
from pisces.core.session.build import create_agent_session
from pisces.core.session.compactor import OVERFLOW_RETRY_FAILED
from pisces.core.store import entry_type, message_role

SUMMARY_SYSTEM = "context summarization assistant"


def _type(event) -> str:
    if isinstance(event, dict):
        return event["type"]
    return event.__struct_config__.tag


def _prompt_text(context) -> str:
    return "".join(b.text for b in context.messages[-1].content if isinstance(b, TextContent))


def summary_reply(text: str, seen: list | None = None, **extra):
    """A scripted summariser: checks the request is a summarisation request and records it."""

    def reply(context, options):
        assert SUMMARY_SYSTEM in context.systemPrompt
        assert context.tools is UNSET
        if seen is not None:
            seen.append((_prompt_text(context), options))
        return {"text": text, **extra}

    return reply


@pytest.fixture
def make_session(tmp_path, faux):
    def make(settings: dict | None = None, **kwargs):
        cwd = tmp_path / "work"
        cwd.mkdir(exist_ok=True)
        if settings:
            (cwd / ".pisces").mkdir(exist_ok=True)
            (cwd / ".pisces" / "settings.json").write_text(json.dumps(settings))
        session = create_agent_session(cwd=str(cwd), provider="faux", session_dir=str(tmp_path / "sessions"),
                                       **kwargs)
        faux.default = None  # an unexpected request fails loudly instead of getting the demo reply
        events: list = []
        session.subscribe(events.append)
        return session, events

    return make


def _file_entries(session) -> list[dict]:
    with open(session.store.get_session_file(), encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()][1:]


def _types(events) -> list[str]:
    return [_type(e) for e in events]


# ---------------------------------------------------------------------------------------------
# Manual
# ---------------------------------------------------------------------------------------------
async def test_manual_compact_with_custom_instructions(make_session, faux):
    session, events = make_session({"compaction": {"keepRecentTokens": 5}})
    seen: list = []
    faux.enqueue({"text": "answer one"}, {"text": "answer two"}, summary_reply("## Goal\nS1", seen))
    await session.prompt("first prompt")
    await session.prompt("second prompt")
    events.clear()

    data = await session.compact("Focus on the prompts")

    prompt, options = seen[0]
    assert prompt.startswith("<conversation>\n[User]: first prompt\n\n[Assistant]: answer one\n</conversation>\n\n")
    assert prompt.endswith("\n\nAdditional focus: Focus on the prompts")
    assert "## Goal" in prompt and "## Critical Context" in prompt and "<previous-summary>" not in prompt
    assert options.maxTokens == 13107 and options.reasoning is None and options.signal is not None

    assert data["summary"] == "## Goal\nS1"
    assert data["details"] == {"readFiles": [], "modifiedFiles": []}
    assert _types(events) == ["compaction_start", "compaction_end"]
    assert events[0] == {"type": "compaction_start", "reason": "manual"}
    assert events[1] == {"type": "compaction_end", "reason": "manual", "result": data, "aborted": False,
                         "willRetry": False}
    # the second turn is kept, behind the summary
    assert [message_role(m) for m in session.messages] == ["compactionSummary", "user", "assistant"]
    assert session.messages[1].content[0].text == "second prompt"
    assert session.session_stats()["contextUsage"]["tokens"] is None
    entry = _file_entries(session)[-1]
    assert entry["type"] == "compaction" and entry["fromHook"] is False
    kept = [e for e in _file_entries(session) if e["type"] == "message"][2]
    assert entry["firstKeptEntryId"] == data["firstKeptEntryId"] == kept["id"]
    assert entry["tokensBefore"] == data["tokensBefore"] > 0
    assert entry["details"] == {"readFiles": [], "modifiedFiles": []}


async def test_reasoning_follows_the_thinking_level_on_a_reasoning_model(make_session, faux):
    session, _ = make_session({"compaction": {"keepRecentTokens": 5, "reserveTokens": 1000}},
                              model="faux-reasoning", thinking="high")
    seen: list = []
    faux.enqueue({"text": "answer one"}, {"text": "answer two"}, summary_reply("S", seen))
    await session.prompt("first prompt")
    await session.prompt("second prompt")
    await session.compact()
    assert seen[0][1].reasoning == "high" and seen[0][1].maxTokens == 800
    session.set_thinking_level("off")
    faux.enqueue({"text": "answer three"}, summary_reply("S2", seen))
    await session.prompt("third prompt")
    await session.compact()
    assert seen[1][1].reasoning is None


async def test_already_compacted_and_empty_session(make_session, faux):
    session, events = make_session()
    faux.enqueue(summary_reply("## Goal\nempty"))
    data = await session.compact()  # an empty session is still compacted (pi makes the call too)
    assert data["tokensBefore"] == 0
    assert data["firstKeptEntryId"] == session.store.get_entries()[0].id  # the model_change entry
    events.clear()
    with pytest.raises(SessionError, match="^Already compacted$"):
        await session.compact()
    assert events == [{"type": "compaction_start", "reason": "manual"},
                      {"type": "compaction_end", "reason": "manual", "aborted": False, "willRetry": False,
                       "errorMessage": "Compaction failed: Already compacted"}]
    assert not session.is_compacting


async def test_summariser_error_is_reported(make_session, faux):
    session, events = make_session()
    faux.enqueue({"text": "a"}, {"error": "400 bad request"})
    await session.prompt("q")
    with pytest.raises(SessionError, match="^Summarization failed: 400 bad request$"):
        await session.compact()
    assert events[-1]["errorMessage"] == "Compaction failed: Summarization failed: 400 bad request"
    assert "result" not in events[-1]


async def test_previous_summary_is_carried_into_the_next_compaction(make_session, faux):
    session, _ = make_session({"compaction": {"keepRecentTokens": 5}})
    seen: list = []
    faux.enqueue({"text": "answer one"}, summary_reply("SUMMARY-ONE", seen), {"text": "answer two"},
                 summary_reply("SUMMARY-TWO", seen), {"text": "answer three"})
    await session.prompt("first prompt")
    await session.compact()
    await session.prompt("second prompt")
    # the next request carries the summary as a user message
    first_request = faux.requests[2]
    assert "<summary>\nSUMMARY-ONE\n</summary>" in "".join(
        b.text for b in first_request.messages[0].content if isinstance(b, TextContent))
    await session.compact("keep it short")
    prompt = seen[1][0]
    assert "<previous-summary>\nSUMMARY-ONE\n</previous-summary>\n\n" in prompt
    assert "NEW" in prompt and prompt.endswith("Additional focus: keep it short")
    compactions = [e for e in _file_entries(session) if e["type"] == "compaction"]
    assert [c["summary"] for c in compactions] == ["SUMMARY-ONE", "SUMMARY-TWO"]
    await session.prompt("third prompt")
    assert session.last_assistant_text() == "answer three"


# ---------------------------------------------------------------------------------------------
# Split turn
# ---------------------------------------------------------------------------------------------
async def test_split_turn_merges_history_and_prefix_summaries(make_session, faux, tmp_path):
    session, _ = make_session({"compaction": {"keepRecentTokens": 15}})
    (tmp_path / "work" / "notes.txt").write_text("x" * 400)
    seen: list = []
    faux.enqueue(
        {"text": "answer one"},
        {"toolCalls": [{"name": "read", "arguments": {"path": "notes.txt"}}]},
        {"toolCalls": [{"name": "write", "arguments": {"path": "out.txt", "content": "hi"}}]},
        {"text": "all done"},
        summary_reply("HISTORY", seen), summary_reply("PREFIX", seen),
    )
    await session.prompt("first prompt")
    await session.prompt("Read notes then write out.txt")
    data = await session.compact()

    (prefix_prompt, prefix_opts), = [(p, o) for p, o in seen if "BEGINNING" in p]
    (history_prompt, history_opts), = [(p, o) for p, o in seen if "BEGINNING" not in p]
    assert "[User]: first prompt" in history_prompt and "notes.txt" not in history_prompt
    assert prefix_prompt.startswith("<conversation>\n[User]: Read notes then write out.txt\n\n"
                                    '[Assistant tool calls]: read(path="notes.txt")\n\n[Tool result]: ')
    assert "## Original Request" in prefix_prompt
    assert history_opts.maxTokens == 13107 and prefix_opts.maxTokens == 8192

    assert data["summary"] == ("HISTORY\n\n---\n\n**Turn Context (split turn):**\n\nPREFIX"
                               "\n\n<read-files>\nnotes.txt\n</read-files>")
    assert data["details"] == {"readFiles": ["notes.txt"], "modifiedFiles": []}
    # the kept part starts mid-turn: the turn's user message is gone, its later messages stay
    roles = [message_role(m) for m in session.messages]
    assert roles == ["compactionSummary", "assistant", "toolResult", "assistant"]
    assert session.messages[1].content[0].name == "write"


async def test_split_turn_without_history_makes_one_call(make_session, faux):
    session, _ = make_session({"compaction": {"keepRecentTokens": 3}})
    seen: list = []
    faux.enqueue({"toolCalls": [{"name": "ls", "arguments": {}}]}, {"text": "final words here"},
                 summary_reply("PREFIX", seen))
    await session.prompt("list it")
    data = await session.compact()
    assert len(seen) == 1 and "BEGINNING" in seen[0][0]
    assert data["summary"] == "No prior history.\n\n---\n\n**Turn Context (split turn):**\n\nPREFIX"


# ---------------------------------------------------------------------------------------------
# Threshold
# ---------------------------------------------------------------------------------------------
async def test_threshold_compaction_after_the_run(make_session, faux):
    session, events = make_session({"compaction": {"keepRecentTokens": 10}})
    faux.enqueue({"text": "answer one", "usage": {"input": 1000, "output": 5}},
                 {"text": "answer two", "usage": {"input": 120000, "output": 5}},
                 summary_reply("## Goal\nauto"))
    await session.prompt("first prompt")
    assert "compaction_start" not in _types(events)
    await session.prompt("second prompt (reply reports huge usage)")
    types = _types(events)
    i = types.index("compaction_start")
    assert types[i - 1] == "agent_end"
    assert types[i:i + 4] == ["compaction_start", "auto_compaction_start", "compaction_end", "auto_compaction_end"]
    assert types[-1] == "agent_settled"
    end = events[i + 2]
    assert end["reason"] == "threshold" and end["willRetry"] is False and end["result"]["tokensBefore"] == 120005
    assert events[i + 3] == {**end, "type": "auto_compaction_end"}
    assert [message_role(m) for m in session.messages] == ["compactionSummary", "user", "assistant"]
    assert session.session_stats()["contextUsage"]["tokens"] is None


async def test_threshold_respects_compaction_enabled_false(make_session, faux):
    session, events = make_session({"compaction": {"enabled": False}})
    faux.enqueue({"text": "big", "usage": {"input": 127000}})
    await session.prompt("q")
    assert "compaction_start" not in _types(events)
    faux.enqueue(summary_reply("manual still works"))
    assert (await session.compact())["summary"] == "manual still works"


async def test_threshold_check_in_prompt_preflight(make_session, faux):
    session, events = make_session()
    session.set_auto_compaction(False)
    faux.enqueue({"text": "big", "usage": {"input": 127000}})
    await session.prompt("q")
    assert "compaction_start" not in _types(events)
    session.set_auto_compaction(True)
    events.clear()
    faux.enqueue(summary_reply("S"), {"text": "small"})
    await session.prompt("next")
    types = _types(events)
    # compacted before the prompt's run began, and only once
    assert types.index("compaction_end") < types.index("agent_start")
    assert types.count("compaction_start") == 1
    assert events[types.index("compaction_start")]["reason"] == "threshold"


async def test_aborted_reply_does_not_trigger_the_post_run_check(make_session, faux):
    session, events = make_session()
    faux.enqueue({"text": "y" * 200, "chunkSize": 1, "delayMs": 5, "usage": {"input": 127000}})
    task = asyncio.create_task(session.prompt("slow"))
    await asyncio.sleep(0.05)
    await session.abort()
    await task
    assert "compaction_start" not in _types(events)
    assert session.last_assistant_message().stopReason == "aborted"


# ---------------------------------------------------------------------------------------------
# Overflow
# ---------------------------------------------------------------------------------------------
async def test_overflow_compacts_and_retries(make_session, faux):
    session, events = make_session()
    faux.enqueue({"text": "ok", "usage": {"input": 100}},
                 {"error": "prompt is too long: 200000 tokens > 128000 maximum"},
                 summary_reply("## Goal\nrecovered"),
                 {"text": "retried answer"})
    await session.prompt("first")
    events.clear()
    await session.prompt("second")
    types = _types(events)
    start = types.index("compaction_start")
    assert events[start] == {"type": "compaction_start", "reason": "overflow"}
    end = events[types.index("compaction_end")]
    assert end["willRetry"] is True and end["aborted"] is False and "result" in end
    assert types.count("agent_start") == 2  # the failed run, then the continuation
    assert session.last_assistant_text() == "retried answer"
    assert not any(isinstance(m, AssistantMessage) and m.stopReason == "error" for m in session.messages)
    # the failed reply stays in the session file
    assert any(e["type"] == "message" and e["message"].get("stopReason") == "error" for e in _file_entries(session))


async def test_second_overflow_gives_up(make_session, faux):
    session, events = make_session()
    overflow = {"error": "maximum context length is 128000 tokens"}
    faux.enqueue({"text": "ok", "usage": {"input": 100}}, overflow, summary_reply("S"), overflow)
    await session.prompt("first")
    events.clear()
    await session.prompt("second")
    ends = [e for e in events if _type(e) == "compaction_end"]
    assert len(ends) == 2 and ends[0]["willRetry"] is True
    assert ends[1] == {"type": "compaction_end", "reason": "overflow", "aborted": False, "willRetry": False,
                       "errorMessage": OVERFLOW_RETRY_FAILED}
    assert _types(events).count("compaction_start") == 1
    assert session.last_assistant_message().stopReason == "error"
    assert _types(events)[-1] == "agent_settled"


# ---------------------------------------------------------------------------------------------
# Abort, and prompts that arrive during compaction
# ---------------------------------------------------------------------------------------------
async def test_abort_during_compaction(make_session, faux):
    session, events = make_session()
    faux.enqueue({"text": "a"}, summary_reply("z" * 500, chunkSize=1, delayMs=10))
    await session.prompt("q")
    events.clear()
    task = asyncio.create_task(session.compact())
    await asyncio.sleep(0.05)
    assert session.is_compacting and session.get_state()["isCompacting"] is True
    await session.abort()
    with pytest.raises(SessionError, match="^Compaction cancelled$"):
        await asyncio.wait_for(task, 1)
    assert events[-1] == {"type": "compaction_end", "reason": "manual", "aborted": True, "willRetry": False}
    assert not session.is_compacting
    assert not any(entry_type(e) == "compaction" for e in session.store.get_entries())


async def test_prompt_during_compaction_runs_afterwards(make_session, faux):
    session, events = make_session()
    faux.enqueue({"text": "a"}, summary_reply("SUMMARY", delayMs=20, chunkSize=2), {"text": "after"})
    await session.prompt("q")
    events.clear()
    compact_task = asyncio.create_task(session.compact())
    await asyncio.sleep(0.02)
    assert session.is_compacting
    accepted = []
    prompt_task = asyncio.create_task(session.prompt("while compacting", on_accepted=lambda: accepted.append(1)))
    await asyncio.wait_for(asyncio.gather(compact_task, prompt_task), 5)
    types = _types(events)
    assert accepted == [1]
    assert types.index("compaction_end") < types.index("agent_start")
    assert session.last_assistant_text() == "after"
    last_request = faux.requests[-1]
    first = last_request.messages[0]
    assert isinstance(first, UserMessage) and "SUMMARY" in first.content[0].text


# ---------------------------------------------------------------------------------------------
# Branch summaries (navigate_tree summarize)
# ---------------------------------------------------------------------------------------------
async def test_navigate_tree_summarize_writes_a_branch_summary(make_session, faux):
    session, _ = make_session()
    seen: list = []
    faux.enqueue({"text": "answer one"}, {"text": "answer two"}, summary_reply("BRANCH", seen),
                 {"text": "answer three"})
    await session.prompt("first prompt")
    await session.prompt("second prompt")
    entries = session.store.get_entries()
    first_answer = [e for e in entries if entry_type(e) == "message"][1]
    assert isinstance(first_answer.message, AssistantMessage)

    result = await session.navigate_tree(first_answer.id, summarize=True, custom_instructions="the why")
    assert result == {"cancelled": False}
    prompt, options = seen[0]
    assert "[User]: second prompt\n\n[Assistant]: answer two" in prompt
    assert "first prompt" not in prompt and prompt.endswith("Additional focus: the why")
    assert options.maxTokens == 2048

    leaf = session.store.get_leaf_entry()
    assert entry_type(leaf) == "branch_summary" and leaf.parentId == first_answer.id
    assert leaf.fromId == first_answer.id and leaf.summary.endswith("BRANCH")
    assert leaf.details == {"readFiles": [], "modifiedFiles": []} and leaf.fromHook is False
    assert [message_role(m) for m in session.messages] == ["user", "assistant", "branchSummary"]
    await session.prompt("third prompt")
    assert session.last_assistant_text() == "answer three"


async def test_navigate_tree_to_a_user_message_puts_the_summary_under_its_parent(make_session, faux):
    session, _ = make_session()
    faux.enqueue({"text": "answer one"}, {"text": "answer two"}, summary_reply("BRANCH"))
    await session.prompt("first prompt")
    await session.prompt("second prompt")
    second_user = [e for e in session.store.get_entries()
                   if entry_type(e) == "message" and isinstance(e.message, UserMessage)][1]
    result = await session.navigate_tree(second_user.id, summarize=True, custom_instructions="ONLY THIS",
                                         replace_instructions=True)
    assert result == {"cancelled": False, "editorText": "second prompt"}
    leaf = session.store.get_leaf_entry()
    assert entry_type(leaf) == "branch_summary" and leaf.parentId == second_user.parentId
    last_prompt = _prompt_text(faux.requests[-1])
    assert last_prompt.endswith("</conversation>\n\nONLY THIS")
