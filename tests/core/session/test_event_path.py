"""The per-event path of a session (issue 31): what was moved off it must still happen.

``message_update`` (one per streamed delta) goes only to the listeners that want it and to the stream rules;
the stream rules read ``ttsr.enabled`` once a turn; listeners (un)subscribing while an event is sent take
effect from the next event. In process with the faux provider and real rule files."""

from __future__ import annotations

import os

from pisces.core.config.paths import agent_dir
from pisces.core.session.build import create_agent_session_async

NO_VAR = """---
description: Use let or const, never var
ttsrTrigger: '\\bvar\\s+\\w+'
scope: text
---
Do not declare variables with `var`.
"""
TAIL = " and then a long explanation that nobody should ever see because the rule stopped it."


def _type(obj) -> str:
    return obj.get("type", "") if isinstance(obj, dict) else type(obj).__struct_config__.tag


def _write_rule() -> None:
    rules = os.path.join(agent_dir(), "rules")
    os.makedirs(rules, exist_ok=True)
    with open(os.path.join(rules, "no-var.md"), "w") as f:
        f.write(NO_VAR)


async def _session(tmp_path):
    cwd = tmp_path / "work"
    cwd.mkdir(exist_ok=True)
    session = await create_agent_session_async(cwd=str(cwd), provider="faux", no_session=True)
    events: list = []
    session.subscribe(events.append)
    return session, events


def _assistant_texts(session) -> list[str]:
    return ["".join(getattr(b, "text", "") for b in m.content) for m in session.messages
            if _type(m) == "assistant"]


async def test_a_stream_rule_still_interrupts_the_reply_mid_stream(tmp_path, faux):
    _write_rule()
    session, events = await _session(tmp_path)
    faux.enqueue({"text": "Sure: var x = 1;" + TAIL, "chunkSize": 4}, {"text": "Using let x = 1 instead."})
    await session.prompt("write js")
    kinds = [_type(e) for e in events]
    assert "ttsr_triggered" in kinds
    fired = next(e for e in events if _type(e) == "ttsr_triggered")
    assert [r["name"] for r in fired["rules"]] == ["no-var"]
    # the abort came at the delta that matched: the first reply's updates stop long before its tail
    first_end = kinds.index("message_end", kinds.index("ttsr_triggered"))
    streamed = "".join(e.assistantMessageEvent.delta for e in events[:first_end]
                       if _type(e) == "message_update" and _type(e.assistantMessageEvent) == "text_delta")
    assert "var x" in streamed and "nobody should ever see" not in streamed
    assert kinds.index("ttsr_triggered") < first_end
    # the run continued after the interrupt with the rule's message, and the next reply is the fixed one
    assert session.last_assistant_text() == "Using let x = 1 instead."
    assert any("system-interrupt" in str(getattr(m, "content", "")) for m in session.messages)


async def test_turning_stream_rules_off_and_on_takes_effect_at_the_next_turn(tmp_path, faux):
    _write_rule()
    session, events = await _session(tmp_path)
    session.settings.update_global("ttsr", "enabled", lambda _old: False)
    faux.enqueue({"text": "first var a = 1" + TAIL, "chunkSize": 4})
    await session.prompt("one")
    assert "ttsr_triggered" not in [_type(e) for e in events]
    assert _assistant_texts(session)[-1].endswith("nobody should ever see because the rule stopped it.")

    session.settings.update_global("ttsr", "enabled", lambda _old: True)  # between prompts, no reload
    events.clear()
    faux.enqueue({"text": "second var b = 2" + TAIL, "chunkSize": 4}, {"text": "fixed"})
    await session.prompt("two")
    assert "ttsr_triggered" in [_type(e) for e in events]
    assert session.last_assistant_text() == "fixed"


async def test_listeners_without_updates_see_every_other_event_in_order(tmp_path, faux):
    session, events = await _session(tmp_path)
    others: list = []
    session.subscribe(others.append, updates=False)
    faux.enqueue({"text": "hello there, a reply of several deltas", "chunkSize": 3})
    await session.prompt("hi")
    kinds = [_type(e) for e in events]
    assert kinds.count("message_update") >= 10
    assert "message_update" not in [_type(e) for e in others]
    assert others == [e for e in events if _type(e) != "message_update"]  # the same objects, the same order
    assert "message_end" in kinds and "agent_end" in kinds


async def test_a_listener_that_unsubscribes_while_an_event_is_sent_stops_at_the_next_one(tmp_path, faux):
    session, events = await _session(tmp_path)
    seen: list = []
    after: list = []

    def once(event) -> None:
        seen.append(event)
        if _type(event) == "message_update":
            remove()
            session.subscribe(after.append)  # subscribed during an event: sees the ones that follow

    remove = session.subscribe(once)
    faux.enqueue({"text": "several deltas in a row for this reply", "chunkSize": 3})
    await session.prompt("hi")
    updates = [e for e in seen if _type(e) == "message_update"]
    assert len(updates) == 1
    first = events.index(updates[0])
    assert after == events[first + 1:]  # every later event, the updates included
    assert any(_type(e) == "message_update" for e in after)
    remove()  # unsubscribing twice is harmless
    assert len(seen) == first + 1
