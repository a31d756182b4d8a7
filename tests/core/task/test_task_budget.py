"""The session budget and the task tool, in process: subagents (nested ones too) count toward the parent's
maxSubagents before they start, their replies count toward its tokens, a repair past the budget is refused,
and a subagent spending past the parent's budget stops the parent's run with abortOnExceeded."""

from __future__ import annotations

from task_util import call_task, subagent_events, submit, task_end


async def _run(session, arguments: dict, subagents: dict, parent_usage: dict | None = None) -> dict:
    from pisces.ai.providers.faux import SCRIPT

    first = call_task(arguments)
    if parent_usage:
        first["usage"] = parent_usage
    SCRIPT.enqueue(first, {"text": "parent done", "usage": {"input": 1, "output": 1}})
    for name, responses in subagents.items():
        SCRIPT.enqueue_for(name, *responses)
    await session.prompt("go")
    return task_end(session.events).result.details


def _budget_events(events: list) -> list[tuple[str, str, str]]:
    return [(e["type"], e["scope"], e["snapshot"]["reason"]) for e in events
            if isinstance(e, dict) and e.get("type", "").startswith("budget_")]


def _with_usage(response: dict, inp: int, out: int) -> dict:
    return {**response, "usage": {"input": inp, "output": out}}


async def test_subagent_replies_count_toward_the_parents_tokens(session, task_settings):
    task_settings({"budget": {"maxTotalTokens": 100_000}})
    s = session()
    details = await _run(s, {"agent": "task", "tasks": [
        {"id": "A", "description": "", "assignment": "a"}, {"id": "B", "description": "", "assignment": "b"}]}, {
        "A": [_with_usage({"text": "looking"}, 1000, 100), _with_usage(submit("a"), 2000, 200)],
        "B": [_with_usage(submit("b"), 3000, 300)]}, parent_usage={"input": 500, "output": 50})
    state = s.get_state()["budget"]
    assert details["usage"]["totalTokens"] == 6600  # what the tool itself reports for its subagents
    assert state["inputTokens"] == 500 + 1000 + 2000 + 3000 + 1
    assert state["outputTokens"] == 50 + 100 + 200 + 300 + 1
    assert state["totalTokens"] == 550 + 6600 + 2 and state["subagents"] == 2


async def test_nested_subagents_count_toward_the_parents_max_subagents(session, task_settings):
    task_settings({"budget": {"maxSubagents": 1}})
    s = session()
    details = await _run(s, {"agent": "task", "tasks": [{"id": "Outer", "description": "", "assignment": "o"}]}, {
        "Outer": [call_task({"agent": "explore", "tasks": [{"id": "Inner", "description": "", "assignment": "i"}]}),
                  _with_usage(submit("outer done"), 10, 10)],
        "Inner": [submit({"summary": "s", "files": [], "architecture": "a"})]})
    assert [e["id"] for e in subagent_events(s.events) if e["type"] == "subagent_start"] == ["0-Outer"]
    from pisces.ai.providers.faux import SCRIPT

    outer_second = [c for c, who in zip(SCRIPT.requests, SCRIPT.requesters, strict=False) if "Outer" in who][1]
    inner_result = outer_second.messages[-1]  # what the Outer subagent's own task call returned
    assert inner_result.details["results"][0]["error"] == "Budget exceeded (subagents)"
    assert details["results"][0]["exitCode"] == 0
    assert _budget_events(s.events) == [("budget_warning", "session", "subagents"),
                                        ("budget_exceeded", "task", "subagents")]
    assert s.get_state()["budget"]["subagents"] == 1 and s.get_state()["budget"]["status"] == "warning"


async def test_a_repair_past_the_budget_is_refused(session, task_settings):
    task_settings({"isolation": {"mode": "worktree"}, "budget": {"maxSubagents": 1}})
    s = session()
    details = await _run(s, {"agent": "task", "isolated": True,
                             "tasks": [{"id": "Fix", "description": "", "assignment": "f"}],
                             "verify": {"commands": [{"name": "no", "command": "exit 1"}], "onFailure": "retry_once"}},
                         {"Fix": [submit("done")]})
    r = details["results"][0]
    assert (r["exitCode"], r["error"]) == (1, "Budget exceeded (subagents); repair skipped")
    assert [e["id"] for e in subagent_events(s.events) if e["type"] == "subagent_start"] == ["0-Fix"]
    assert ("budget_exceeded", "task", "subagents") in _budget_events(s.events)


async def test_a_subagent_spending_past_the_budget_stops_the_parents_run(session, task_settings):
    from pisces.ai.providers.faux import SCRIPT

    task_settings({"budget": {"maxOutputTokens": 400, "abortOnExceeded": True}})
    s = session()
    SCRIPT.enqueue(call_task({"agent": "task", "tasks": [
        {"id": "Big", "description": "", "assignment": "b"}]}), {"text": "parent never asked again"})
    SCRIPT.enqueue_for("Big", _with_usage({"text": "a lot"}, 10, 500), submit("never reached"))
    await s.prompt("go")
    assert _budget_events(s.events)[-1] == ("budget_exceeded", "session", "output_tokens")
    assert s.last_assistant_message().stopReason == "aborted"
    assert len(SCRIPT.queue) == 1  # the parent was not asked again
    result = task_end(s.events).result.details["results"][0]
    assert result["aborted"] is True and result["exitCode"] != 0  # the subagent was stopped with its parent
