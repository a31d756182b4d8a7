"""Steering and follow-up queues, their delivery modes, and the interrupt modes (compare
pi-0.73.1/11_streaming_queue and spec 000 "Prompt/Queue Concurrency and Ordering")."""

from __future__ import annotations

import time

import agent_helpers
import pytest
from agent_helpers import run_with, sleep_unless_aborted, text_of, user

from pisces.agent.agent import Agent
from pisces.agent.loop import SKIPPED_FOR_STEERING
from pisces.agent.types import (
    AgentEndEvent,
    AgentStartEvent,
    AgentTool,
    AgentToolResult,
    ToolError,
    ToolExecutionEndEvent,
    TurnEndEvent,
)
from pisces.ai.models import FAUX_MODELS
from pisces.ai.types import TextContent, ToolResultMessage, event_type

MODEL = FAUX_MODELS[0]
SLOW_TEXT = {"text": "This is a slow streamed answer that takes a while.", "chunkSize": 8, "delayMs": 15}


def tails(requests) -> list[list[str]]:
    """For each LLM request, the texts of the user messages it ends with (after the last non-user)."""
    out = []
    for req in requests:
        tail: list[str] = []
        for m in reversed(req.messages):
            if event_type(m) != "user":
                break
            tail.insert(0, text_of(m))
        out.append(tail)
    return out


class Recorder(agent_helpers.Recorder):
    user_text = True  # labels name the user messages' text: "message_start:user:steer one"


def is_update(kind: str):
    return lambda e: event_type(e) == "message_update" and event_type(e.assistantMessageEvent) == kind


def is_tool_start(call_id: str):
    return lambda e: event_type(e) == "tool_execution_start" and e.toolCallId == call_id


class SleepTool(AgentTool):
    name = "sleep"
    description = "sleep"
    parameters = {"type": "object", "properties": {"ms": {"type": "number"}}, "required": ["ms"]}

    def __init__(self) -> None:
        self.log: list[tuple[str, str]] = []

    async def execute(self, tool_call_id, params, signal, on_update):
        if not await sleep_unless_aborted(signal, params["ms"] / 1000):
            self.log.append(("done", tool_call_id))
            return AgentToolResult(content=[TextContent(text=f"slept {params['ms']}")])
        self.log.append(("saw abort", tool_call_id))
        raise ToolError("Command aborted")


# ---------------------------------------------------------------------------------------------
# Steering
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("interrupt_mode", ["immediate", "wait"])
async def test_steer_during_streaming_is_delivered_after_the_turn(faux, interrupt_mode):
    faux.enqueue(SLOW_TEXT, {"text": "reply #2"})
    agent = Agent(model=MODEL, interrupt_mode=interrupt_mode)
    rec = Recorder(agent)
    await run_with(agent, rec, "Start a long answer", pred=is_update("text_delta"),
                   action=lambda: agent.steer(user("steer one")))
    labels = rec.labels()
    # the streaming reply is never cut short by a steer
    first = [e for e in rec.events if isinstance(e, TurnEndEvent)][0].message
    assert text_of(first) == SLOW_TEXT["text"] and first.stopReason == "stop"
    i = labels.index("turn_end")
    assert labels[i:i + 5] == ["turn_end", "turn_start", "message_start:user:steer one",
                               "message_end:user:steer one", "message_start:assistant"]
    assert tails(faux.requests) == [["Start a long answer"], ["steer one"]]
    assert labels.count("agent_start") == 1 and labels.count("agent_end") == 1
    assert agent.steering_queue == []


async def test_immediate_mode_skips_tools_still_running_when_a_steer_is_queued(faux):
    tool = SleepTool()
    faux.enqueue({"toolCalls": [{"name": "sleep", "arguments": {"ms": 40}, "id": "fast"},
                                {"name": "sleep", "arguments": {"ms": 60000}, "id": "slow"}]},
                 {"text": "ok, changing course"})
    agent = Agent(model=MODEL, tools=[tool], interrupt_mode="immediate")
    rec = Recorder(agent)
    t0 = time.monotonic()
    await run_with(agent, rec, "run both", pred=is_tool_start("slow"), action=lambda: agent.steer(user("stop that")))
    assert time.monotonic() - t0 < 30  # the 60 s tool did not run to its end
    assert ("done", "fast") in tool.log and ("saw abort", "slow") in tool.log
    ends = [e for e in rec.events if isinstance(e, ToolExecutionEndEvent)]
    assert [(e.toolCallId, e.isError) for e in ends] == [("fast", False), ("slow", True)]
    assert ends[0].result.content[0].text == "slept 40"
    assert ends[1].result.content == [TextContent(text=SKIPPED_FOR_STEERING)]
    assert SKIPPED_FOR_STEERING == "Skipped due to queued user message."
    results = [e for e in rec.events if isinstance(e, TurnEndEvent)][0].toolResults
    assert [(r.toolCallId, r.content[0].text) for r in results] == [("fast", "slept 40"),
                                                                  ("slow", SKIPPED_FOR_STEERING)]
    # the steer follows the tool results in the next request
    req = faux.requests[1].messages
    assert [event_type(m) for m in req[-3:]] == ["toolResult", "toolResult", "user"]
    assert text_of(req[-1]) == "stop that"
    assert len(faux.requests) == 2
    labels = rec.labels()
    i = labels.index("turn_end")
    assert labels[i:i + 3] == ["turn_end", "turn_start", "message_start:user:stop that"]


async def test_wait_mode_lets_running_tools_finish_then_delivers_the_steer(faux):
    tool = SleepTool()
    faux.enqueue({"toolCalls": [{"name": "sleep", "arguments": {"ms": 20}, "id": "fast"},
                                {"name": "sleep", "arguments": {"ms": 150}, "id": "slow"}]},
                 {"text": "both done"})
    agent = Agent(model=MODEL, tools=[tool], interrupt_mode="wait")
    rec = Recorder(agent)
    t0 = time.monotonic()
    await run_with(agent, rec, "run both", pred=is_tool_start("slow"), action=lambda: agent.steer(user("and then?")))
    assert time.monotonic() - t0 >= 0.14
    assert sorted(tool.log) == [("done", "fast"), ("done", "slow")]
    ends = [e for e in rec.events if isinstance(e, ToolExecutionEndEvent)]
    assert [(e.toolCallId, e.isError) for e in ends] == [("fast", False), ("slow", False)]
    assert all(SKIPPED_FOR_STEERING not in e.result.content[0].text for e in ends)
    req = faux.requests[1].messages
    assert [event_type(m) for m in req[-3:]] == ["toolResult", "toolResult", "user"]
    assert [m.content[0].text for m in req[-3:-1]] == ["slept 20", "slept 150"]
    assert text_of(req[-1]) == "and then?"
    labels = rec.labels()
    assert labels.index("message_start:user:and then?") > labels.index("turn_end")


async def test_steer_without_running_tools_in_immediate_mode_skips_nothing(faux):
    tool = SleepTool()
    faux.enqueue({"toolCalls": [{"name": "sleep", "arguments": {"ms": 20}, "id": "only"}]}, {"text": "ok"})
    agent = Agent(model=MODEL, tools=[tool], interrupt_mode="immediate")
    rec = Recorder(agent)
    await run_with(agent, rec, "go", pred=is_tool_start("only"), action=lambda: agent.steer(user("hey")))
    assert tool.log == [("done", "only")]
    assert tails(faux.requests) == [["go"], ["hey"]]


async def test_immediate_mode_checks_steering_between_tool_calls(faux):
    """Steering is checked when a call ends: a steer queued after the last other call ended leaves the
    one still running alone (spec 000: "tool execution checks steering between tool calls")."""
    tool = SleepTool()
    faux.enqueue({"toolCalls": [{"name": "sleep", "arguments": {"ms": 5}, "id": "fast"},
                                {"name": "sleep", "arguments": {"ms": 120}, "id": "slow"}]},
                 {"text": "ok"})
    agent = Agent(model=MODEL, tools=[tool], interrupt_mode="immediate")
    rec = Recorder(agent)
    is_fast_end = lambda e: isinstance(e, ToolExecutionEndEvent) and e.toolCallId == "fast"  # noqa: E731
    await run_with(agent, rec, "go", pred=is_fast_end, action=lambda: agent.steer(user("s")))
    assert sorted(tool.log) == [("done", "fast"), ("done", "slow")]
    assert tails(faux.requests) == [["go"], ["s"]]


async def test_steer_queued_while_idle_follows_the_next_prompt(faux):
    faux.enqueue({"text": "answer"})
    agent = Agent(model=MODEL)
    agent.steer(user("queued earlier"))
    rec = Recorder(agent)
    produced = await agent.prompt([user("the prompt")])
    assert rec.labels()[:7] == [
        "agent_start", "turn_start",
        "message_start:user:the prompt", "message_end:user:the prompt",
        "message_start:user:queued earlier", "message_end:user:queued earlier",
        "message_start:assistant",
    ]
    assert len(faux.requests) == 1
    assert tails(faux.requests) == [["the prompt", "queued earlier"]]
    assert [text_of(m) for m in produced] == ["the prompt", "queued earlier", "answer"]
    assert agent.steering_queue == []


@pytest.mark.parametrize("mode,expected", [
    ("one-at-a-time", [["p", "s1"], ["s2"]]),
    ("all", [["p", "s1", "s2"]]),
])
async def test_idle_steers_follow_the_steering_mode(faux, mode, expected):
    faux.enqueue({"text": "a"}, {"text": "b"})
    agent = Agent(model=MODEL, steering_mode=mode)
    agent.steer(user("s1"))
    agent.steer(user("s2"))
    await agent.prompt([user("p")])
    assert tails(faux.requests) == expected


# ---------------------------------------------------------------------------------------------
# Follow-up
# ---------------------------------------------------------------------------------------------
async def test_follow_up_waits_until_the_agent_would_stop(faux):
    faux.enqueue({"toolCalls": [{"name": "sleep", "arguments": {"ms": 20}, "id": "t"}]},
                 {"text": "tool done"},
                 {"text": "follow-up answered"})
    agent = Agent(model=MODEL, tools=[SleepTool()])
    rec = Recorder(agent)
    produced = await run_with(agent, rec, "go", pred=is_tool_start("t"),
                              action=lambda: agent.follow_up(user("later")))
    assert len(faux.requests) == 3
    # the request after the tool results does not carry the follow-up
    assert event_type(faux.requests[1].messages[-1]) == "toolResult"
    assert tails(faux.requests) == [["go"], [], ["later"]]
    assert [text_of(m) for m in produced if event_type(m) != "toolResult"] == [
        "go", "", "tool done", "later", "follow-up answered"]
    labels = rec.labels()
    i = labels.index("message_start:user:later")
    assert labels[i - 2:i] == ["turn_end", "turn_start"]
    assert labels.count("agent_start") == 1 and labels.count("agent_end") == 1


async def test_steering_goes_before_follow_up(faux):
    faux.enqueue(SLOW_TEXT, {"text": "r2"}, {"text": "r3"})
    agent = Agent(model=MODEL)
    rec = Recorder(agent)

    def queue_both() -> None:
        agent.follow_up(user("follow"))  # queued first, delivered last
        agent.steer(user("steer"))

    await run_with(agent, rec, "p", pred=is_update("text_delta"), action=queue_both)
    assert tails(faux.requests) == [["p"], ["steer"], ["follow"]]


async def test_follow_up_queued_while_idle_runs_after_the_first_reply(faux):
    faux.enqueue({"text": "first"}, {"text": "second"})
    agent = Agent(model=MODEL)
    agent.follow_up(user("afterwards"))
    rec = Recorder(agent)
    await agent.prompt([user("p")])
    assert tails(faux.requests) == [["p"], ["afterwards"]]
    assert len([e for e in rec.events if isinstance(e, AgentStartEvent)]) == 1


async def test_follow_up_after_a_steer_reply_with_tools(faux):
    """A follow-up waits through steer turns that themselves call tools."""
    faux.enqueue(SLOW_TEXT,
                 {"toolCalls": [{"name": "sleep", "arguments": {"ms": 5}, "id": "t"}]},
                 {"text": "after tool"},
                 {"text": "follow reply"})
    agent = Agent(model=MODEL, tools=[SleepTool()])
    rec = Recorder(agent)

    def queue() -> None:
        agent.steer(user("steer"))
        agent.follow_up(user("follow"))

    await run_with(agent, rec, "p", pred=is_update("text_delta"), action=queue)
    assert tails(faux.requests) == [["p"], ["steer"], [], ["follow"]]


# ---------------------------------------------------------------------------------------------
# Queue modes together (pi run 11: prompt, 2 steers, 2 follow-ups)
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("steering_mode,follow_up_mode,expected", [
    ("one-at-a-time", "one-at-a-time", [["p"], ["s1"], ["s2"], ["f1"], ["f2"]]),
    ("all", "one-at-a-time", [["p"], ["s1", "s2"], ["f1"], ["f2"]]),
    ("one-at-a-time", "all", [["p"], ["s1"], ["s2"], ["f1", "f2"]]),
    ("all", "all", [["p"], ["s1", "s2"], ["f1", "f2"]]),
])
async def test_queue_modes(faux, steering_mode, follow_up_mode, expected):
    faux.enqueue(SLOW_TEXT, *({"text": f"reply #{i}"} for i in range(2, 6)))
    agent = Agent(model=MODEL, steering_mode=steering_mode, follow_up_mode=follow_up_mode)
    rec = Recorder(agent)

    def queue() -> None:
        agent.steer(user("s1"))
        agent.follow_up(user("f1"))
        agent.steer(user("s2"))
        agent.follow_up(user("f2"))

    produced = await run_with(agent, rec, "p", pred=is_update("text_delta"), action=queue)
    assert tails(faux.requests) == expected
    assert len(faux.requests) == len(expected)
    # one run, one turn per request, every queued message delivered exactly once
    labels = rec.labels()
    assert labels.count("agent_start") == 1 and labels.count("agent_end") == 1
    assert labels.count("turn_start") == len(expected) == labels.count("turn_end")
    users = [text_of(m) for m in produced if event_type(m) == "user"]
    assert users == [t for tail in expected for t in tail]
    assert agent.steering_queue == [] and agent.follow_up_queue == []
    end = [e for e in rec.events if isinstance(e, AgentEndEvent)][0]
    assert end.messages == produced


async def test_mode_change_mid_run_applies_to_the_next_delivery(faux):
    faux.enqueue(SLOW_TEXT, {"text": "r2"}, {"text": "r3"})
    agent = Agent(model=MODEL, steering_mode="one-at-a-time")
    rec = Recorder(agent)

    def queue() -> None:
        agent.steer(user("a"))
        agent.steer(user("b"))
        agent.steering_mode = "all"

    await run_with(agent, rec, "p", pred=is_update("text_delta"), action=queue)
    assert tails(faux.requests) == [["p"], ["a", "b"]]


async def test_clear_queues_returns_and_empties_both():
    agent = Agent(model=MODEL)
    s, f = user("s"), user("f")
    agent.steer(s)
    agent.follow_up(f)
    assert agent.clear_queues() == ([s], [f])
    assert agent.steering_queue == [] and agent.follow_up_queue == []


async def test_queued_messages_are_not_tool_results(faux):
    """A steer is a user message in the context, never mixed into the tool results of the turn."""
    faux.enqueue({"toolCalls": [{"name": "sleep", "arguments": {"ms": 30}, "id": "t"}]}, {"text": "ok"})
    agent = Agent(model=MODEL, tools=[SleepTool()], interrupt_mode="wait")
    rec = Recorder(agent)
    await run_with(agent, rec, "p", pred=is_tool_start("t"), action=lambda: agent.steer(user("s")))
    turn_end = [e for e in rec.events if isinstance(e, TurnEndEvent)][0]
    assert all(isinstance(r, ToolResultMessage) for r in turn_end.toolResults)
    assert [r.toolCallId for r in turn_end.toolResults] == ["t"]
