"""SessionBudget (the controller wired to a session) with a fake clock and a fake timer, then a real
AgentSession on the faux model: refusals of prompts, steering and follow-ups, abortOnExceeded, the wall-time
timer on the real event loop, the task tool's hooks, get_state / get_session_stats."""

from __future__ import annotations

import asyncio
import json
import os

import pytest

from pisces.agent.types import AgentEndEvent, AgentStartEvent
from pisces.core.budget import BudgetExceededError, BudgetPolicy, SessionBudget
from pisces.core.task.hooks import SpawnRequest, SubagentHooks, UsageReport


class Clock:
    def __init__(self) -> None:
        self.now = 50.0

    def __call__(self) -> float:
        return self.now


class Timers:
    """A fake ``call_later``: records (delay, fn); ``fire()`` runs the pending one."""

    def __init__(self) -> None:
        self.pending: list[list] = []

    def __call__(self, delay: float, fn):
        entry = [delay, fn, False]
        self.pending.append(entry)

        class Handle:
            def cancel(self_inner) -> None:
                entry[2] = True

        return Handle()

    def live(self) -> list[list]:
        return [e for e in self.pending if not e[2]]

    def fire(self, clock: Clock) -> None:
        (entry,) = self.live()
        entry[2] = True
        clock.now += entry[0]
        entry[1]()


def make(limits: dict, abort_on: bool = False, hooks=None):
    events, aborted = [], []
    clock, timers = Clock(), Timers()
    budget = SessionBudget(BudgetPolicy(limits, 0.8, abort_on), emit=events.append,
                           abort=lambda: aborted.append(True), hooks=hooks, clock=clock, call_later=timers)
    return budget, events, aborted, clock, timers


def test_the_wall_clock_timer_fires_the_warning_then_the_limit_and_aborts():
    budget, events, aborted, clock, timers = make({"wall_time": 10_000}, abort_on=True)
    budget.on_event(AgentStartEvent())
    assert [round(e[0], 3) for e in timers.live()] == [8.0]
    timers.fire(clock)
    assert [e["type"] for e in events] == ["budget_warning"] and events[0]["spent"] == 8_000
    assert [round(e[0], 3) for e in timers.live()] == [2.001]
    assert aborted == []
    timers.fire(clock)
    assert [e["type"] for e in events] == ["budget_warning", "budget_exceeded"]
    assert events[1]["snapshot"]["reason"] == "wall_time" and aborted == [True]  # stopped at once
    assert timers.live() == []
    budget.on_event(AgentEndEvent(messages=[]))
    with pytest.raises(BudgetExceededError, match=r"^Session budget exceeded \(wall_time\)$"):
        budget.admit()
    budget.on_event(AgentStartEvent())  # a retry or a queued message starting past the budget
    assert aborted == [True, True]


def test_idle_time_is_not_counted_and_agent_end_stops_the_timer():
    budget, events, _, clock, timers = make({"wall_time": 10_000})
    budget.on_event(AgentStartEvent())
    clock.now += 5
    budget.on_event(AgentEndEvent(messages=[]))
    assert timers.live() == []
    clock.now += 10_000  # idle for hours
    budget.admit()
    assert budget.state()["wallTimeMs"] == 5_000 and events == []
    budget.on_event(AgentStartEvent())
    assert [round(e[0], 3) for e in timers.live()] == [3.0]  # 8 s of warning point, 5 s already spent


def test_without_abort_on_exceeded_the_run_is_left_alone():
    budget, events, aborted, clock, timers = make({"tool_calls": 0})
    budget.on_event(AgentStartEvent())
    budget.on_event({"type": "tool_execution_start", "toolCallId": "c", "toolName": "bash", "args": {}})
    assert events[-1]["type"] == "budget_exceeded" and aborted == []
    budget.on_event(AgentStartEvent())
    assert aborted == []


def test_budget_events_fed_back_are_ignored():
    budget, events, _, _, _ = make({"tool_calls": 1})
    budget.on_event({"type": "tool_execution_start"})
    budget.on_event(events[0])  # the session feeds its own emitted events back
    assert len(events) == 1 and budget.state()["toolCalls"] == 1


def test_task_hooks_count_before_spawning_refuse_and_add_subagent_usage():
    hooks = SubagentHooks()
    budget, events, aborted, _, _ = make({"subagents": 2, "total_tokens": 1000}, abort_on=True, hooks=hooks)
    req = lambda i: SpawnRequest(id=f"{i}-T", agent="task", kind="subagent", isolated=True, depth=1)  # noqa: E731
    assert hooks.ask_spawn(req(0)) is None and hooks.ask_spawn(req(1)) is None
    assert hooks.ask_spawn(req(2)) == "Budget exceeded (subagents)"
    hooks.cancel_spawn(req(1))  # its worktree failed: the slot comes back
    assert hooks.ask_spawn(req(3)) is None
    assert budget.state()["subagents"] == 2 and aborted == []  # a refused spawn aborts nothing
    usage = {"input": 600, "output": 500, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 1100,
             "cost": {"total": 0.02}}
    hooks.report_usage(UsageReport(id="0-T", agent="task", usage=usage, total=usage, depth=1))
    state = budget.state()
    assert state["totalTokens"] == 1100 and state["inputTokens"] == 600 and state["costUsd"] == 0.02
    assert state["status"] == "exceeded" and state["reason"] == "total_tokens"
    assert aborted == [True]  # subagent spending past the limit stops the parent's run (and so its subagents)
    assert [(e["type"], e["scope"]) for e in events] == [
        ("budget_warning", "session"), ("budget_exceeded", "task"), ("budget_exceeded", "session")]
    assert hooks.ask_spawn(req(4)) == "Budget exceeded (total_tokens)"


def test_state_and_set_policy():
    budget, events, _, _, _ = make({"cost": 1.5})
    assert budget.state() == {"status": "ok", "wallTimeMs": 0, "inputTokens": 0, "outputTokens": 0, "totalTokens": 0,
                              "costUsd": 0, "toolCalls": 0, "subagents": 0,
                              "limits": {"maxCostUsd": 1.5, "warnAtRatio": 0.8, "abortOnExceeded": False}}
    budget.on_event({"type": "tool_execution_start"})
    state = budget.set_policy(BudgetPolicy({"tool_calls": 0}))
    assert state["status"] == "exceeded" and state["limits"] == {"maxToolCalls": 0, "warnAtRatio": 0.8,
                                                                  "abortOnExceeded": False}
    assert events[-1]["type"] == "budget_exceeded"


# ---------------------------------------------------------------------------------------------------------
# A real session
# ---------------------------------------------------------------------------------------------------------
@pytest.fixture
def budget_session(faux, tmp_path):
    agent_dir = os.environ["PISCES_CODING_AGENT_DIR"]
    os.makedirs(agent_dir, exist_ok=True)
    work = tmp_path / "work"
    work.mkdir()
    made = []

    def make_session(budget: dict | None, tools: list[str] | None = None):
        from pisces.core.session.build import create_agent_session

        with open(os.path.join(agent_dir, "settings.json"), "w") as f:
            json.dump({"task": {"budget": budget}} if budget is not None else {}, f)
        s = create_agent_session(cwd=str(work), provider="faux", no_session=True, tools=tools or ["bash"])
        s.events = []
        s.subscribe(s.events.append)
        made.append(s)
        return s

    yield make_session
    for s in made:
        if s.budget is not None:
            s.budget.close()


def kinds(session) -> list[str]:
    from pisces.core.budget.controller import event_type

    return [event_type(e) for e in session.events]


async def test_a_spent_budget_refuses_prompts_steering_and_follow_ups(budget_session, faux):
    s = budget_session({"maxOutputTokens": 50})
    faux.enqueue({"text": "long answer", "usage": {"input": 10, "output": 60}})
    await s.prompt("first")
    assert kinds(s)[-3:] == ["turn_end", "agent_end", "agent_settled"]
    exceeded = [e for e in s.events if isinstance(e, dict) and e["type"] == "budget_exceeded"]
    assert len(exceeded) == 1 and exceeded[0]["spent"] == 60 and exceeded[0]["budget"] == 50
    count = len(s.messages)
    for attempt in (lambda: s.prompt("second"), lambda: s.prompt("x", streaming_behavior="followUp")):
        with pytest.raises(BudgetExceededError, match=r"^Session budget exceeded \(output_tokens\)$"):
            await attempt()
    for call in (s.steer, s.follow_up):
        with pytest.raises(BudgetExceededError, match=r"^Session budget exceeded \(output_tokens\)$"):
            call("more")
    assert len(s.messages) == count and s.pending_count == 0 and s.agent.steering_queue == []
    assert s.get_state()["budget"]["status"] == "exceeded" and s.session_stats()["budget"]["outputTokens"] == 60
    from pisces.core.budget import set_session_budget

    set_session_budget(s, {"maxOutputTokens": 500})  # raised at run time: prompts run again
    faux.enqueue({"text": "ok", "usage": {"input": 1, "output": 1}})
    await s.prompt("third")
    assert s.last_assistant_text() == "ok"


async def test_abort_on_exceeded_stops_the_turn_before_its_tool_calls_run(budget_session, faux, tmp_path):
    marker = tmp_path / "work" / "ran.txt"
    s = budget_session({"maxTotalTokens": 1000, "abortOnExceeded": True})
    faux.enqueue({"toolCalls": [{"name": "bash", "arguments": {"command": f"echo ran > {marker}"}}],
                  "usage": {"input": 1500, "output": 20}},
                 {"text": "never requested"})
    await asyncio.wait_for(s.prompt("go"), 30)
    last = s.last_assistant_message()
    assert last.stopReason == "aborted"  # the run stopped: the model was not asked again
    assert len(faux.queue) == 1  # the second reply is still queued
    assert not marker.exists()  # the tool call of the reply that went over never ran its command
    seq = kinds(s)
    assert seq.index("budget_exceeded") < seq.index("tool_execution_start") < seq.index("agent_end")


async def test_a_wall_time_limit_stops_a_hanging_reply_on_the_real_loop(budget_session, faux):
    s = budget_session({"maxWallTimeMs": 300, "abortOnExceeded": True})
    faux.enqueue({"text": "x" * 400, "chunkSize": 1, "delayMs": 100})  # would take 40 s
    await asyncio.wait_for(s.prompt("go"), 30)
    assert s.last_assistant_message().stopReason == "aborted"
    events = [e for e in s.events if isinstance(e, dict) and e["type"].startswith("budget_")]
    assert [(e["type"], e["snapshot"]["reason"]) for e in events] == [("budget_warning", "wall_time"),
                                                                       ("budget_exceeded", "wall_time")]
    assert events[1]["spent"] > 300 and events[0]["spent"] >= 240
    with pytest.raises(BudgetExceededError):
        await s.prompt("again")


async def test_no_budget_no_controller_and_no_field(budget_session, faux):
    s = budget_session(None)
    assert s.budget is None and s.subagents.spawn_gate is None
    faux.enqueue({"text": "hi", "usage": {"input": 10 ** 6, "output": 10 ** 6}})
    await s.prompt("go")
    assert "budget" not in s.get_state() and "budget" not in s.session_stats()
    assert not any(isinstance(e, dict) and e["type"].startswith("budget_") for e in s.events)
