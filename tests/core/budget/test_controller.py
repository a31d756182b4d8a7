"""BudgetController with a fake clock: every dimension and threshold, warnings once per dimension and each
dimension on its own, budget_exceeded once per scope, wall time counted only while running, subagent slots."""

from __future__ import annotations

import pytest

from pisces.agent.types import AgentEndEvent, AgentStartEvent, MessageEndEvent, ToolExecutionStartEvent
from pisces.ai.types import AssistantMessage, Cost, Usage, UserMessage
from pisces.core.budget.controller import BudgetController
from pisces.core.budget.policy import DIMENSIONS, BudgetPolicy


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0  # seconds, like time.monotonic

    def __call__(self) -> float:
        return self.now

    def advance_ms(self, ms: float) -> None:
        self.now += ms / 1000


def make(limits: dict, ratio: float = 0.8) -> tuple[BudgetController, list[dict], Clock]:
    events: list[dict] = []
    clock = Clock()
    return BudgetController(BudgetPolicy(limits, ratio), events.append, clock=clock), events, clock


def spend(c: BudgetController, clock: Clock, reason: str, amount: float) -> None:
    """Spend ``amount`` of one dimension the way the session would."""
    if reason == "wall_time":
        c.run_started()
        clock.advance_ms(amount)
        c.run_ended()
    elif reason == "input_tokens":
        c.add_usage({"input": amount, "output": 0, "totalTokens": amount, "cost": {"total": 0}})
    elif reason == "output_tokens":
        c.add_usage({"input": 0, "output": amount, "totalTokens": amount, "cost": {"total": 0}})
    elif reason == "total_tokens":
        c.add_usage({"input": amount / 2, "output": amount / 2, "totalTokens": amount, "cost": {"total": 0}})
    elif reason == "cost":
        c.add_usage({"input": 0, "output": 0, "totalTokens": 0, "cost": {"total": amount}})
    elif reason == "tool_calls":
        for _ in range(int(amount)):
            c.add_tool_call()
    elif reason == "subagents":
        for _ in range(int(amount)):
            assert c.reserve_subagent() is None


LIMITS = {"wall_time": 10_000, "input_tokens": 1000, "output_tokens": 500, "total_tokens": 2000, "cost": 2.5,
          "tool_calls": 10, "subagents": 5}
FIELDS = {reason: field for reason, _, field in DIMENSIONS}


@pytest.mark.parametrize("reason", [r for r, _, _ in DIMENSIONS if r != "subagents"])
def test_each_dimension_warns_at_the_ratio_once_and_is_exceeded_only_past_its_limit(reason):
    limit = LIMITS[reason]
    c, events, clock = make({reason: limit})
    spend(c, clock, reason, limit * 0.7)
    assert events == [] and c.snapshot()["status"] == "ok" and "reason" not in c.snapshot()
    spend(c, clock, reason, limit * 0.1)  # 80%: the warning, exactly at the ratio
    assert [e["type"] for e in events] == ["budget_warning"]
    warning = events[0]
    assert warning["scope"] == "session" and warning["budget"] == limit
    assert warning["spent"] == pytest.approx(limit * 0.8)
    snap = warning["snapshot"]
    assert snap["status"] == "warning" and snap["reason"] == reason
    assert snap[FIELDS[reason]] == pytest.approx(limit * 0.8, abs=1)
    assert set(snap) == {"status", "wallTimeMs", "inputTokens", "outputTokens", "totalTokens", "costUsd", "toolCalls",
                         "subagents", "reason"}
    spend(c, clock, reason, limit * 0.2)  # exactly the limit: still within budget, no second warning
    assert len(events) == 1 and c.snapshot()["status"] == "warning" and c.refusal() is None
    spend(c, clock, reason, limit * 0.1)  # past it
    assert [e["type"] for e in events] == ["budget_warning", "budget_exceeded"]
    exceeded = events[1]
    assert exceeded["scope"] == "session" and exceeded["budget"] == limit and exceeded["spent"] > limit
    assert exceeded["snapshot"]["status"] == "exceeded" and exceeded["snapshot"]["reason"] == reason
    assert c.refusal() == f"Session budget exceeded ({reason})"
    spend(c, clock, reason, limit)  # further spending: nothing more
    assert len(events) == 2 and c.snapshot()["status"] == "exceeded"


def test_subagents_dimension_counts_slots_and_refuses_past_the_limit():
    c, events, _ = make({"subagents": 5})
    for _ in range(3):
        assert c.reserve_subagent() is None
    assert events == []
    assert c.reserve_subagent() is None  # 4 of 5: the warning
    assert [e["type"] for e in events] == ["budget_warning"] and events[0]["snapshot"]["reason"] == "subagents"
    assert c.reserve_subagent() is None  # 5 of 5: allowed, the budget is used up but not exceeded
    assert c.subagents == 5 and c.refusal() is None
    assert c.reserve_subagent() == "Budget exceeded (subagents)"  # the 6th is refused and not counted
    assert c.reserve_subagent() == "Budget exceeded (subagents)"
    assert c.subagents == 5
    task_events = [e for e in events if e["type"] == "budget_exceeded"]
    assert len(task_events) == 1 and task_events[0]["scope"] == "task"  # once per scope
    assert task_events[0]["budget"] == 5 and task_events[0]["spent"] == 5
    assert task_events[0]["snapshot"]["reason"] == "subagents"
    assert c.refusal() is None  # refusing subagents does not make the session's budget exceeded
    c.release_subagent()  # a spawn that could not start gives its slot back
    assert c.reserve_subagent() is None and c.subagents == 5


def test_a_spent_session_budget_refuses_subagents_with_its_reason():
    c, events, _ = make({"cost": 1.0, "subagents": 10})
    c.add_usage({"input": 1, "output": 1, "totalTokens": 2, "cost": {"total": 1.5}})
    assert c.reserve_subagent() == "Budget exceeded (cost)"
    assert [(e["type"], e["scope"]) for e in events] == [("budget_exceeded", "session"), ("budget_exceeded", "task")]
    assert c.subagents == 0


def test_limit_zero_allows_nothing_of_that_dimension_and_never_warns():
    c, events, _ = make({"subagents": 0, "tool_calls": 0, "cost": 0})
    assert c.snapshot()["status"] == "ok" and c.refusal() is None  # a zero limit is not spent before anything ran
    assert c.reserve_subagent() == "Budget exceeded (subagents)"
    assert [e["scope"] for e in events] == ["task"]
    c.add_usage({"input": 5, "output": 5, "totalTokens": 10, "cost": {"total": 0}})  # a free model costs nothing
    assert c.refusal() is None
    c.add_tool_call()
    assert events[-1]["type"] == "budget_exceeded" and events[-1]["snapshot"]["reason"] == "tool_calls"
    assert not any(e["type"] == "budget_warning" for e in events)


def test_every_dimension_is_checked_on_its_own():
    """The TS controller reported only the first dimension in warning; a later one entering warning while an
    earlier one sat there was never reported."""
    c, events, clock = make({"input_tokens": 1000, "output_tokens": 100, "tool_calls": 10})
    c.add_usage({"input": 850, "output": 0, "totalTokens": 850, "cost": {"total": 0}})
    c.add_usage({"input": 0, "output": 90, "totalTokens": 90, "cost": {"total": 0}})
    spend(c, clock, "tool_calls", 8)
    assert [(e["type"], e["snapshot"]["reason"]) for e in events] == [
        ("budget_warning", "input_tokens"), ("budget_warning", "output_tokens"), ("budget_warning", "tool_calls")]


def test_several_warnings_from_one_reply_come_in_dimension_order_before_the_exceeded():
    c, events, _ = make({"input_tokens": 100, "output_tokens": 100, "total_tokens": 150})
    c.add_usage({"input": 90, "output": 85, "totalTokens": 175, "cost": {"total": 0}})
    assert [(e["type"], e["snapshot"]["reason"]) for e in events] == [
        ("budget_warning", "input_tokens"), ("budget_warning", "output_tokens"), ("budget_exceeded", "total_tokens")]


def test_a_dimension_that_jumps_past_its_limit_gets_no_warning_and_none_come_after_exceeded():
    c, events, _ = make({"total_tokens": 100, "output_tokens": 1000})
    c.add_usage({"input": 200, "output": 0, "totalTokens": 200, "cost": {"total": 0}})
    assert [e["type"] for e in events] == ["budget_exceeded"]
    c.add_usage({"input": 0, "output": 900, "totalTokens": 900, "cost": {"total": 0}})  # output now at 90%
    assert len(events) == 1  # the budget is spent: no warning after budget_exceeded


@pytest.mark.parametrize("ratio, warn_at", [(0.5, 50), (0.95, 95), (1.0, 100)])
def test_warn_at_ratio(ratio, warn_at):
    c, events, _ = make({"tool_calls": 100}, ratio)
    for _ in range(warn_at - 1):
        c.add_tool_call()
    assert events == []
    c.add_tool_call()
    assert [e["type"] for e in events] == ["budget_warning"] and events[0]["spent"] == warn_at


def test_wall_time_counts_only_while_running():
    c, events, clock = make({"wall_time": 10_000})
    clock.advance_ms(60_000)  # idle before the first run
    assert c.wall_time_ms() == 0
    c.run_started()
    clock.advance_ms(3_000)
    assert c.wall_time_ms() == 3_000 and c.snapshot()["wallTimeMs"] == 3_000  # a running span counts as it runs
    c.run_ended()
    clock.advance_ms(3_600_000)  # an hour idle between prompts
    assert c.wall_time_ms() == 3_000 and c.refusal() is None and events == []
    c.run_started()
    c.run_started()  # a second start while running does not restart the span
    clock.advance_ms(5_000)
    c.check()
    assert [e["type"] for e in events] == ["budget_warning"] and events[0]["spent"] == 8_000
    clock.advance_ms(2_001)
    c.check()
    assert events[-1]["type"] == "budget_exceeded" and events[-1]["spent"] == 10_001
    c.run_ended()
    assert c.wall_time_ms() == pytest.approx(10_001)


def test_next_wall_check_points_at_the_next_threshold_while_running():
    c, events, clock = make({"wall_time": 10_000, "tool_calls": 5})
    assert c.next_wall_check_s() is None  # not running
    c.run_started()
    assert c.next_wall_check_s() == pytest.approx(8.0)  # the warning at 80%
    clock.advance_ms(8_000)
    assert c.next_wall_check_s() == 0  # due now
    c.check()
    assert c.next_wall_check_s() == pytest.approx(2.001)  # then the first instant past the limit
    clock.advance_ms(2_001)
    c.check()
    assert c.next_wall_check_s() is None and events[-1]["type"] == "budget_exceeded"
    c2, _, _ = make({"tool_calls": 5})
    c2.run_started()
    assert c2.next_wall_check_s() is None  # no wall-time limit: nothing to watch


def test_on_event_counts_the_sessions_agent_events_and_dicts_alike():
    c, _, clock = make({"tool_calls": 100})
    usage = Usage(input=120, output=30, cacheRead=50, cacheWrite=0, totalTokens=200, cost=Cost(total=0.25))
    c.on_event(AgentStartEvent())
    clock.advance_ms(40)
    c.on_event(MessageEndEvent(message=UserMessage(content="hi", timestamp=1)))  # not an assistant: no usage
    c.on_event(MessageEndEvent(message=AssistantMessage(content=[], api="faux", provider="faux", model="m",
                                                        usage=usage, stopReason="stop", timestamp=1)))
    c.on_event(ToolExecutionStartEvent(toolCallId="c1", toolName="bash", args={}))
    c.on_event({"type": "tool_execution_start", "toolCallId": "c2", "toolName": "read", "args": {}})
    c.on_event({"type": "message_end", "message": {"role": "assistant", "usage": {
        "input": 1, "output": 2, "totalTokens": 3, "cost": {"total": 0.5}}}})
    c.on_event({"type": "turn_end"})  # counted at message_end, never twice
    c.on_event(AgentEndEvent(messages=[]))
    clock.advance_ms(1000)
    snap = c.snapshot()
    assert snap == {"status": "ok", "wallTimeMs": 40, "inputTokens": 121, "outputTokens": 32, "totalTokens": 203,
                    "costUsd": 0.75, "toolCalls": 2, "subagents": 0}


def test_cost_sums_print_without_float_noise():
    c, _, _ = make({"cost": 10})
    for _ in range(3):
        c.add_usage({"input": 0, "output": 0, "totalTokens": 0, "cost": {"total": 0.1}})
    assert c.snapshot()["costUsd"] == 0.3


def test_new_limits_reset_the_once_flags_and_fire_at_once_when_already_reached():
    c, events, clock = make({"tool_calls": 2})
    spend(c, clock, "tool_calls", 3)
    assert [e["type"] for e in events] == ["budget_warning", "budget_exceeded"]
    c.set_policy(BudgetPolicy({"tool_calls": 10}))  # raised: within budget again
    assert c.refusal() is None and c.snapshot()["status"] == "ok" and len(events) == 2
    spend(c, clock, "tool_calls", 5)
    assert [e["type"] for e in events[2:]] == ["budget_warning"]  # 8 of 10
    c.set_policy(BudgetPolicy({"tool_calls": 4}))  # lowered below what was spent: exceeded now
    assert [e["type"] for e in events[3:]] == ["budget_exceeded"] and events[-1]["spent"] == 8
    c.set_policy(None)  # cleared
    assert c.refusal() is None and c.snapshot()["status"] == "ok"
    spend(c, clock, "tool_calls", 100)
    assert len(events) == 4


def test_the_refusal_names_the_dimension_the_event_named():
    c, events, clock = make({"tool_calls": 1, "input_tokens": 100})
    spend(c, clock, "tool_calls", 2)
    c.add_usage({"input": 500, "output": 0, "totalTokens": 500, "cost": {"total": 0}})
    assert events[-1]["snapshot"]["reason"] == "tool_calls"
    assert c.refusal() == "Session budget exceeded (tool_calls)"
    assert c.snapshot()["reason"] == "tool_calls"


def test_remaining_is_what_is_left_of_each_limit_as_task_budget_keys():
    """The slice a headless subagent gets (core/task/headless.py): never below zero, no maxSubagents."""
    c, _events, clock = make({"cost": 1.0, "tool_calls": 3, "wall_time": 10_000, "subagents": 2})
    spend(c, clock, "tool_calls", 1)
    spend(c, clock, "cost", 0.25)
    spend(c, clock, "wall_time", 4000)
    c.reserve_subagent()
    assert c.remaining() == {"maxWallTimeMs": 6000, "maxCostUsd": 0.75, "maxToolCalls": 2}
    spend(c, clock, "tool_calls", 5)
    assert c.remaining()["maxToolCalls"] == 0
    assert make({})[0].remaining() == {}
