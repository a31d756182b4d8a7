"""pi's combination rules, event by event, through a real session (faux model): load order is handler order,
the first cancel/block wins, transforms chain, and a failing handler is reported while the others still run."""

from __future__ import annotations

from ext_helpers import bash_call, make, texts

from pisces.agent.types import ToolExecutionEndEvent, TurnStartEvent
from pisces.ai.types import UserMessage
from pisces.core.store.messages import CustomMessage


async def test_session_before_switch_first_cancel_wins_in_load_order(tmp_path, faux):
    calls = []

    def first(pi):
        pi.on("session_before_switch", lambda e, ctx: calls.append(("first", e.reason)))

    def second(pi):
        pi.on("session_before_switch", lambda e: (calls.append(("second", e.reason)), {"cancel": True})[1])

    def third(pi):
        pi.on("session_before_switch", lambda e: calls.append("third"))

    session, _ = await make(tmp_path, first, second, third)
    sid = session.store.get_session_id()
    assert await session.new_session() is True  # cancelled
    assert calls == [("first", "new"), ("second", "new")]  # the third never ran
    assert session.store.get_session_id() == sid


async def test_a_result_without_cancel_does_not_cancel_and_every_handler_runs(tmp_path, faux):
    seen = []

    def ext(pi):
        pi.on("session_before_fork", lambda e: seen.append(("fork", e.entry_id, e.position)) or {"cancel": False})
        pi.on("session_before_branch", lambda e: seen.append(("branch", e.entryId)))  # seed 003's name too

    session, _ = await make(tmp_path, ext)
    faux.enqueue({"text": "one"})
    await session.prompt("first")
    user_entry = next(e.id for e in session.store.get_entries() if isinstance(getattr(e, "message", None), UserMessage))
    result = await session.fork(user_entry)
    assert result["cancelled"] is False
    assert seen == [("fork", user_entry, "before"), ("branch", user_entry)]


async def test_tool_call_input_mutation_reaches_the_tool_and_later_handlers(tmp_path, faux):
    seen = []

    def rewrite(pi):
        @pi.on("tool_call")
        def change(event, ctx):
            event.input["command"] = "echo rewritten"

    def observe(pi):
        pi.on("tool_call", lambda e: seen.append(e.input["command"]))

    session, rec = await make(tmp_path, rewrite, observe)
    faux.enqueue(bash_call("echo original"), {"text": "done"})
    await session.prompt("run it")
    end = [e for e in rec.events if isinstance(e, ToolExecutionEndEvent)][0]
    assert seen == ["echo rewritten"]
    assert end.isError is False
    assert "rewritten" in texts(end.result)


async def test_tool_call_first_block_wins_and_becomes_the_error_result(tmp_path, faux):
    later = []

    def block(pi):
        pi.on("tool_call", lambda e: {"block": True, "reason": "Not today"})

    def never(pi):
        pi.on("tool_call", lambda e: later.append(e))

    session, rec = await make(tmp_path, block, never)
    marker = tmp_path / "work" / "ran"
    faux.enqueue(bash_call(f"touch {marker}"), {"text": "done"})
    await session.prompt("run it")
    end = [e for e in rec.events if isinstance(e, ToolExecutionEndEvent)][0]
    assert end.isError is True and texts(end.result) == "Not today"
    assert not marker.exists() and later == []


async def test_a_block_without_a_reason_uses_pis_text(tmp_path, faux):
    session, rec = await make(tmp_path, lambda pi: pi.on("tool_call", lambda e: {"block": True}))
    faux.enqueue(bash_call("echo x"), {"text": "done"})
    await session.prompt("run it")
    end = [e for e in rec.events if isinstance(e, ToolExecutionEndEvent)][0]
    assert texts(end.result) == "Tool execution was blocked"


async def test_a_raising_tool_call_handler_blocks_the_call_and_is_reported(tmp_path, faux):
    def broken(pi):
        @pi.on("tool_call")
        async def gate(event, ctx):
            raise ValueError("gate broke")

    session, rec = await make(tmp_path, broken)
    marker = tmp_path / "work" / "ran"
    faux.enqueue(bash_call(f"touch {marker}"), {"text": "done"})
    await session.prompt("run it")
    end = [e for e in rec.events if isinstance(e, ToolExecutionEndEvent)][0]
    assert end.isError is True
    assert "failed: gate broke" in texts(end.result)
    assert not marker.exists()  # fail closed
    errors = rec.of_type("extension_error")
    assert [(e["event"], e["error"]) for e in errors] == [("tool_call", "gate broke")]
    assert errors[0]["extensionPath"] == errors[0]["hookPath"]


async def test_tool_result_patches_chain(tmp_path, faux):
    seen = []

    def first(pi):
        pi.on("tool_result", lambda e: {"content": [{"type": "text", "text": "patched"}]})

    def second(pi):
        @pi.on("tool_result")
        def add_details(event):
            seen.append(texts_of(event.content))
            return {"details": {"by": "second"}, "is_error": True}

    session, rec = await make(tmp_path, first, second)
    faux.enqueue(bash_call("echo hi"), {"text": "done"})
    await session.prompt("run it")
    end = [e for e in rec.events if isinstance(e, ToolExecutionEndEvent)][0]
    assert seen == ["patched"]  # the second handler saw the first one's patch
    assert texts(end.result) == "patched" and end.result.details == {"by": "second"} and end.isError is True
    assert faux.requests[1].messages[-1].isError is True  # the model got the patched result


def texts_of(content):
    return "".join(getattr(b, "text", "") for b in content)


async def test_input_transforms_chain_and_handled_stops(tmp_path, faux):
    def upper(pi):
        pi.on("input", lambda e: {"action": "transform", "text": e.text.upper()})

    def suffix(pi):
        pi.on("input", lambda e: {"action": "transform", "text": e.text + "!"} if e.source == "rpc" else None)

    def stop(pi):
        pi.on("input", lambda e: {"action": "handled"} if e.text.startswith("PING") else None)

    session, _ = await make(tmp_path, upper, suffix, stop)
    faux.enqueue({"text": "ok"})
    await session.prompt("hello")
    assert texts(faux.requests[0].messages[0]) == "HELLO!"
    await session.prompt("ping")  # handled: no request
    assert len(faux.requests) == 1


async def test_before_agent_start_collects_messages_and_chains_the_system_prompt(tmp_path, faux):
    prompts_seen = []

    def one(pi):
        @pi.on("before_agent_start")
        def add(event, ctx):
            prompts_seen.append(ctx.get_system_prompt() == event.system_prompt)
            return {"message": {"custom_type": "note", "content": "first note", "display": True},
                    "system_prompt": event.system_prompt + "\nRULE-A"}

    def two(pi):
        pi.on("before_agent_start", lambda e: {"message": {"customType": "note", "content": "second note",
                                                            "display": False},
                                               "systemPrompt": e.systemPrompt + "\nRULE-B"})

    session, rec = await make(tmp_path, one, two)
    faux.enqueue({"text": "ok"}, {"text": "ok again"})
    await session.prompt("hi")
    req = faux.requests[0]
    assert req.systemPrompt.endswith("\nRULE-A\nRULE-B")
    assert [texts(m) for m in req.messages] == ["hi", "first note", "second note"]
    customs = [m for m in session.messages if isinstance(m, CustomMessage)]
    assert [(m.customType, m.display) for m in customs] == [("note", True), ("note", False)]
    assert prompts_seen == [True]


async def test_without_changes_the_base_system_prompt_comes_back(tmp_path, faux):
    state = {"on": True}

    def ext(pi):
        pi.on("before_agent_start", lambda e: {"systemPrompt": "REPLACED"} if state["on"] else None)

    session, _ = await make(tmp_path, ext)
    faux.enqueue({"text": "a"}, {"text": "b"})
    await session.prompt("one")
    state["on"] = False
    await session.prompt("two")
    assert faux.requests[0].systemPrompt == "REPLACED"
    assert faux.requests[1].systemPrompt.startswith("You are pisces")


async def test_context_handlers_chain_without_touching_the_session(tmp_path, faux):
    def drop_first(pi):
        pi.on("context", lambda e: {"messages": e.messages[1:]})

    def count(pi):
        pi.on("context", lambda e: {"messages": e.messages})

    session, _ = await make(tmp_path, drop_first, count)
    faux.enqueue({"text": "a"}, {"text": "b"})
    await session.prompt("one")
    await session.prompt("two")
    assert [texts(m) for m in faux.requests[1].messages] == ["a", "two"]
    assert len(session.messages) == 4


async def test_a_failing_handler_is_reported_and_the_others_still_run(tmp_path, faux):
    ran = []

    def broken(pi):
        def boom(event):
            raise RuntimeError("turn handler broke")
        pi.on("turn_start", boom)

    def fine(pi):
        pi.on("turn_start", lambda e: ran.append(e.turnIndex))

    session, rec = await make(tmp_path, broken, fine)
    faux.enqueue({"text": "still answered"})
    await session.prompt("hi")
    assert session.last_assistant_text() == "still answered"
    assert ran == [0]
    assert [(e["event"], e["error"]) for e in rec.of_type("extension_error")] == [("turn_start",
                                                                                   "turn handler broke")]


async def test_a_failing_handler_in_a_chain_is_reported_and_the_chain_goes_on(tmp_path, faux):
    def failing(event_type):
        def boom(event):
            raise RuntimeError(f"{event_type} handler broke")
        return boom

    def broken(pi):
        for event_type in ("input", "before_agent_start", "context"):
            pi.on(event_type, failing(event_type))

    def fine(pi):
        pi.on("input", lambda e: {"action": "transform", "text": e.text.upper()})
        pi.on("before_agent_start", lambda e: {"systemPrompt": e.systemPrompt + "\nRULE"})
        pi.on("context", lambda e: {"messages": e.messages + [UserMessage(content="added by context")]})

    session, rec = await make(tmp_path, broken, fine)
    faux.enqueue({"text": "ok"})
    await session.prompt("hello")
    req = faux.requests[0]
    assert [texts(m) for m in req.messages] == ["HELLO", "added by context"]
    assert req.systemPrompt.endswith("\nRULE")
    assert [(e["event"], e["error"]) for e in rec.of_type("extension_error")] == [
        ("input", "input handler broke"), ("before_agent_start", "before_agent_start handler broke"),
        ("context", "context handler broke")]


async def test_agent_event_handlers_run_before_the_session_sees_the_event(tmp_path, faux):
    order = []

    def ext(pi):
        pi.on("turn_start", lambda e: order.append("handler"))

    session, _ = await make(tmp_path, ext)
    session.subscribe(lambda e: order.append("session") if isinstance(e, TurnStartEvent) else None)
    faux.enqueue({"text": "ok"})
    await session.prompt("hi")
    assert order == ["handler", "session"]


async def test_user_bash_and_resources_discover_results(tmp_path, faux):
    skills_dir = tmp_path / "extra-skills" / "greet"
    skills_dir.mkdir(parents=True)
    (skills_dir / "SKILL.md").write_text("---\nname: greet\ndescription: Say hello nicely\n---\nSay hello.\n")

    def ext(pi):
        pi.on("resources_discover", lambda e: {"skill_paths": [str(tmp_path / "extra-skills")]})

    session, _ = await make(tmp_path, ext)
    names = [c["name"] for c in session.commands()]
    assert "skill:greet" in names
    runner = session.hooks.runner
    assert await runner.emit_user_bash({"type": "user_bash", "command": "ls"}) is None
