"""Budgets end to end: the real ``pisces --mode rpc``, the faux model reporting usage per reply (and a priced
faux model from models.json for costs). The event order, the refused prompt (ack, then the error with the same
id), steering and follow-ups refused, set_budget, the aborted turn, a parallel isolated batch that stops at
maxSubagents, and subagent tokens and cost counted in the parent."""

from __future__ import annotations

from e2eproc import compact
from taskkit import call_task, lifecycle, make_repo, run_prompt, script, start, submit, task_result, worktrees

PRICED = {"providers": {"pricey": {
    "baseUrl": "http://127.0.0.1:9", "api": "faux", "apiKey": "not-used",
    "models": [{"id": "m", "name": "Priced faux", "reasoning": False, "input": ["text"], "contextWindow": 100000,
                "maxTokens": 4000, "cost": {"input": 1000, "output": 2000, "cacheRead": 0, "cacheWrite": 0}}]}}}
PRICED_ARGS = ("--provider", "pricey", "--model", "m")  # $0.001 per input token, $0.002 per output token


def budget_settings(home, budget: dict, **task: dict) -> None:
    home.write_json("settings.json", {"task": {"budget": budget, **task}})


def bash(command: str, inp: int, out: int) -> dict:
    return {"toolCalls": [{"name": "bash", "arguments": {"command": command}}], "usage": {"input": inp, "output": out}}


def text(answer: str, inp: int, out: int) -> dict:
    return {"text": answer, "usage": {"input": inp, "output": out}}


def labelled(frames: list[dict]) -> list[str]:
    """compact(), with budget events as ``budget_warning(tool_calls)`` and no streaming updates."""
    out = []
    for f, name in zip(frames, compact_each(frames), strict=False):
        if name in ("message_update*", "tool_execution_update:bash"):
            continue
        if name.startswith("budget_"):
            name = f"{name}({f['snapshot']['reason']})" + ("" if f["scope"] == "session" else f"@{f['scope']}")
        out.append(name)
    return out


def compact_each(frames: list[dict]) -> list[str]:
    return [compact([f])[0] for f in frames]


def budget_events(frames: list[dict]) -> list[dict]:
    return [f for f in frames if f.get("type", "").startswith("budget_")]


def test_event_order_and_the_refused_prompt(home, spawn):
    budget_settings(home, {"maxToolCalls": 1, "maxTotalTokens": 1000})
    p = spawn("--no-session", "--faux-script", home.faux_script([
        bash("echo one", 300, 10), bash("echo two", 500, 10), text("done", 600, 10)]))
    p.send({"id": "p1", "type": "prompt", "message": "go"})
    frames = p.until_type("agent_settled", 30)
    assert labelled(frames) == [
        "response:prompt", "agent_start", "turn_start", "message_start:user", "message_end:user",
        "message_start:assistant", "message_end:assistant",
        "tool_execution_start:bash", "budget_warning(tool_calls)",  # 1 of 1 tool call: all used
        "tool_execution_end:bash", "message_start:toolResult", "message_end:toolResult", "turn_end",
        "turn_start", "message_start:assistant", "message_end:assistant", "budget_warning(total_tokens)",  # 820
        "tool_execution_start:bash", "budget_exceeded(tool_calls)",  # the 2nd call: past the limit
        "tool_execution_end:bash", "message_start:toolResult", "message_end:toolResult", "turn_end",
        "turn_start", "message_start:assistant", "message_end:assistant", "turn_end",  # no 2nd exceeded
        "agent_end", "agent_settled"]
    warning, _, exceeded = budget_events(frames)
    assert (warning["budget"], warning["spent"], warning["scope"]) == (1, 1, "session")
    assert exceeded["budget"] == 1 and exceeded["spent"] == 2
    snap = exceeded["snapshot"]
    assert {k: snap[k] for k in ("status", "inputTokens", "outputTokens", "totalTokens", "costUsd", "toolCalls",
                                 "subagents", "reason")} == {
        "status": "exceeded", "inputTokens": 800, "outputTokens": 20, "totalTokens": 820, "costUsd": 0,
        "toolCalls": 2, "subagents": 0, "reason": "tool_calls"}
    assert isinstance(snap["wallTimeMs"], int) and snap["wallTimeMs"] >= 0

    # the next prompt: acknowledged, then refused with the same id, and nothing runs
    p.send({"id": "p2", "type": "prompt", "message": "more"})
    ack = p.until(lambda f: f.get("id") == "p2")
    refusal = p.next(10)
    assert ack[-1] == {"id": "p2", "type": "response", "command": "prompt", "success": True}
    assert refusal == {"id": "p2", "type": "response", "command": "prompt", "success": False,
                       "error": "Session budget exceeded (tool_calls)"}
    for kind in ("steer", "follow_up"):
        assert p.request({"id": kind, "type": kind, "message": "more"}) == {
            "id": kind, "type": "response", "command": kind, "success": False,
            "error": "Session budget exceeded (tool_calls)"}
    state = p.ok({"type": "get_state"})
    assert state["pendingMessageCount"] == 0 and state["messageCount"] == 6
    assert state["budget"]["status"] == "exceeded" and state["budget"]["totalTokens"] == 1430
    assert state["budget"]["limits"] == {"maxTotalTokens": 1000, "maxToolCalls": 1, "warnAtRatio": 0.8,
                                         "abortOnExceeded": False}
    stats = p.ok({"type": "get_session_stats"})
    assert stats["budget"]["toolCalls"] == stats["toolCalls"] == 2
    assert not any(f.get("type") == "agent_start" for f in p.drain(0.3))


def test_costs_of_a_priced_model_and_set_budget_at_run_time(home, spawn):
    home.write_json("models.json", PRICED)
    budget_settings(home, {"maxCostUsd": 0.25})
    p = spawn("--no-session", *PRICED_ARGS, "--faux-script", home.faux_script(
        [text("a", 100, 10), text("b", 100, 10), text("c", 100, 10), text("d", 100, 10)]))
    costs, seen = [], []
    for i in range(3):  # $0.12 each
        frames = run_prompt(p, f"q{i}")
        seen += budget_events(frames)
        costs.append(p.ok({"type": "get_state"})["budget"]["costUsd"])
    assert costs == [0.12, 0.24, 0.36]
    assert [(e["type"], e["snapshot"]["reason"], e["spent"], e["budget"]) for e in seen] == [
        ("budget_warning", "cost", 0.24, 0.25), ("budget_exceeded", "cost", 0.36, 0.25)]
    assert p.request({"id": "q", "type": "prompt", "message": "again"})["success"] is True
    assert p.next(10)["error"] == "Session budget exceeded (cost)"

    bad = p.request({"id": "b", "type": "set_budget", "budget": {"maxCostUsd": "one dollar"}})
    assert bad == {"id": "b", "type": "response", "command": "set_budget", "success": False,
                   "error": "Invalid budget: maxCostUsd must be a number of at least 0, not a string"}
    raised = p.ok({"type": "set_budget", "budget": {"maxCostUsd": 1, "warnAtRatio": 0.4}})
    assert raised["status"] == "ok" and raised["costUsd"] == 0.36
    assert raised["limits"] == {"maxCostUsd": 1, "warnAtRatio": 0.4, "abortOnExceeded": False}
    frames = run_prompt(p, "runs again")
    assert [(e["type"], e["spent"]) for e in budget_events(frames)] == [("budget_warning", 0.48)]  # warned anew
    cleared = p.ok({"type": "set_budget", "budget": None})
    assert cleared["limits"] == {"warnAtRatio": 0.8, "abortOnExceeded": False} and cleared["status"] == "ok"
    assert cleared["costUsd"] == 0.48
    assert abs(p.ok({"type": "get_session_stats"})["cost"] - 0.48) < 1e-9  # stats sum the same messages


def test_set_budget_on_a_session_started_without_one(home, spawn):
    p = spawn("--no-session", "--faux-script", home.faux_script([text("a", 10, 10), text("b", 10, 10)]))
    assert "budget" not in p.ok({"type": "get_state"})
    run_prompt(p, "before")  # not counted: there was no budget yet
    state = p.ok({"type": "set_budget", "budget": {"maxOutputTokens": 5}})
    assert state["status"] == "ok" and state["outputTokens"] == 0
    frames = run_prompt(p, "after")
    assert [e["type"] for e in budget_events(frames)] == ["budget_exceeded"]
    assert p.ok({"type": "get_state"})["budget"]["outputTokens"] == 10


def test_abort_on_exceeded_stops_the_running_turn(home, spawn):
    budget_settings(home, {"maxWallTimeMs": 1500, "abortOnExceeded": True})
    p = spawn("--no-session", "--faux-script", home.faux_script([
        bash("sleep 60", 10, 10), text("never asked", 10, 10)]))
    p.send({"id": "p1", "type": "prompt", "message": "go"})
    frames = p.until_type("agent_settled", 40)  # sleep 60 did not run to its end
    names = labelled(frames)
    assert "budget_exceeded(wall_time)" in names
    exceeded = budget_events(frames)[-1]
    assert exceeded["spent"] > 1500 and exceeded["snapshot"]["status"] == "exceeded"
    tail = names[names.index("budget_exceeded(wall_time)"):]
    if "tool_execution_start:bash" in names[:names.index("budget_exceeded(wall_time)")]:
        end = next(f for f in frames if f.get("type") == "tool_execution_end")
        assert end["isError"] is True and "Command aborted" in end["result"]["content"][0]["text"]
    assert tail[-2:] == ["agent_end", "agent_settled"]
    last = [f for f in frames if f.get("type") == "message_end" and f["message"]["role"] == "assistant"][-1]
    assert last["message"]["stopReason"] == "aborted"
    assert "never asked" not in str(p.ok({"type": "get_messages"}))
    assert p.request({"id": "p2", "type": "prompt", "message": "x"})["success"] is True
    assert p.next(10)["error"] == "Session budget exceeded (wall_time)"


def test_parallel_isolated_batch_stops_at_max_subagents(home, spawn):
    repo = make_repo(home.cwd)
    budget_settings(home, {"maxSubagents": 2}, isolation={"mode": "worktree"})
    names = ["A", "B", "C", "D"]
    p = start(spawn, home, "--no-session", "--faux-script", script(home, [
        call_task({"agent": "task", "isolated": True, "tasks": [
            {"id": n, "description": n, "assignment": f"Report {n}."} for n in names]}),
        {"text": "batch done"}, {"text": "next prompt ran"}],
        {n: [submit(n)] for n in names}))
    frames = run_prompt(p)
    seq = lifecycle(frames)
    starts = sorted(s for s in seq if s.startswith("start "))
    assert starts == ["start 0-A isolated", "start 1-B isolated"], seq  # each asked before its worktree was made
    results = {r["id"]: r for r in task_result(frames)["details"]["results"]}
    assert [results[i]["exitCode"] for i in ("0-A", "1-B")] == [0, 0]
    for refused in ("2-C", "3-D"):
        assert (results[refused]["exitCode"], results[refused]["error"], results[refused]["aborted"]) == (
            1, "Budget exceeded (subagents)", True)
    events = budget_events(frames)
    assert [(e["type"], e["scope"], e["snapshot"]["reason"]) for e in events] == [
        ("budget_warning", "session", "subagents"), ("budget_exceeded", "task", "subagents")]  # once per scope
    assert (events[1]["budget"], events[1]["spent"]) == (2, 2)
    assert worktrees(repo) == [repo]
    state = p.ok({"type": "get_state"})["budget"]
    assert state["subagents"] == 2 and state["status"] == "warning"
    frames = run_prompt(p, "something else")  # refusing subagents does not spend the session's budget
    assert p.ok({"type": "get_last_assistant_text"}) == {"text": "next prompt ran"}


def test_subagent_tokens_and_cost_count_in_the_parent(home, spawn):
    home.write_json("models.json", PRICED)
    budget_settings(home, {"maxTotalTokens": 2000})
    p = start(spawn, home, "--no-session", *PRICED_ARGS, "--faux-script", script(home, [
        {**call_task({"agent": "task", "tasks": [{"id": "Sub", "description": "s", "assignment": "work"}]}),
         "usage": {"input": 400, "output": 100}},
        text("parent done", 500, 50)], {
        "Sub": [text("thinking it over", 1000, 200), {**submit("result"), "usage": {"input": 1200, "output": 100}}]}))
    frames = run_prompt(p)
    names = labelled(frames)
    # the parent's own reply is 500 tokens; the subagent's replies take the session to 1700 (past the 80%
    # warning at 1600) and to 3000 (past the 2000 limit), while the task tool runs
    inside = names[names.index("tool_execution_start:task"):names.index("tool_execution_end:task")]
    assert [n for n in inside if n.startswith("budget_")] == ["budget_warning(total_tokens)",
                                                              "budget_exceeded(total_tokens)"], names
    state = p.ok({"type": "get_state"})["budget"]
    assert (state["inputTokens"], state["outputTokens"], state["totalTokens"]) == (3100, 450, 3550)
    assert state["costUsd"] == 4 and state["subagents"] == 1  # $3.10 input + $0.90 output
    sub_usage = task_result(frames)["details"]["usage"]
    assert sub_usage["totalTokens"] == 2500 and abs(sub_usage["cost"]["total"] - 2.8) < 1e-9
    stats = p.ok({"type": "get_session_stats"})
    assert stats["tokens"]["total"] == 1050  # the session's own messages; the budget adds its subagents
    assert p.request({"id": "x", "type": "prompt", "message": "x"})["success"] is True
    assert p.next(10)["error"] == "Session budget exceeded (total_tokens)"
