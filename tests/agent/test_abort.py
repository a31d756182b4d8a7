"""Abort: mid-stream (partial kept, "Request was aborted"), during tools (the tool sees it, then pi's empty
aborted assistant "Request was aborted."), and the agent idle and usable right after (pi-0.73.1/12_abort)."""

from __future__ import annotations

import asyncio
import time

import pytest
from agent_helpers import Recorder, run_with, sleep_unless_aborted, text_of, user

from pisces.agent.agent import Agent
from pisces.agent.types import (
    AgentEndEvent,
    AgentTool,
    AgentToolResult,
    ToolError,
    ToolExecutionEndEvent,
    TurnEndEvent,
)
from pisces.ai.models import FAUX_MODELS
from pisces.ai.types import TextContent, ThinkingContent, ToolCall, event_type

MODEL = FAUX_MODELS[0]
LONG = "This is a slow streamed answer. " * 20
SLOW = {"text": LONG, "chunkSize": 6, "delayMs": 10}


def nth_update(kind: str, n: int):
    count = [0]

    def pred(e) -> bool:
        if event_type(e) == "message_update" and event_type(e.assistantMessageEvent) == kind:
            count[0] += 1
            return count[0] == n
        return False

    return pred


class WaitForAbortTool(AgentTool):
    """Runs until its signal aborts, like a long bash command; then "Command aborted"."""

    name = "bash"
    description = "run"
    parameters = {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}

    def __init__(self) -> None:
        self.saw_abort: list[str] = []
        self.started = 0

    async def execute(self, tool_call_id, params, signal, on_update):
        self.started += 1
        on_update(AgentToolResult(content=[]))
        if not await sleep_unless_aborted(signal, 10):
            return AgentToolResult(content=[TextContent(text="done")])
        self.saw_abort.append(tool_call_id)
        raise ToolError("Command aborted")


async def abort_when(agent: Agent, rec: Recorder, prompt: str, pred) -> tuple[list, float]:
    """Prompt, abort once ``pred`` matches, return (produced, seconds from abort to the run's end)."""
    aborted_at: list[float] = []

    def abort() -> None:
        aborted_at.append(time.monotonic())
        agent.abort()

    produced = await run_with(agent, rec, prompt, pred=pred, action=abort, timeout=2.0)
    return produced, time.monotonic() - aborted_at[0]


# ---------------------------------------------------------------------------------------------
# Abort during streaming
# ---------------------------------------------------------------------------------------------
async def test_abort_during_streaming_keeps_partial_text(faux):
    faux.enqueue(SLOW)
    agent = Agent(model=MODEL)
    rec = Recorder(agent)
    produced, elapsed = await abort_when(agent, rec, "Start a long answer", nth_update("text_delta", 4))
    assert elapsed < 30  # bounds a hang; what was produced shows where it stopped
    labels = rec.labels()
    assert labels[-5:] == ["update:text_delta", "update:text_end", "message_end:assistant", "turn_end", "agent_end"]
    streamed = rec.deltas()
    assert 4 * 6 <= len(streamed) < len(LONG)
    text_end = rec.events[-4].assistantMessageEvent
    assert text_end.content == streamed
    final = rec.events[-3].message
    assert final.content == [TextContent(text=streamed)]
    assert final.stopReason == "aborted"
    assert final.errorMessage == "Request was aborted"
    assert final.usage.totalTokens == 0 and final.usage.input == 0
    assert rec.events[-2].message is final and rec.events[-2].toolResults == []
    assert [e for e in rec.events if isinstance(e, AgentEndEvent)] == [rec.events[-1]]
    assert rec.events[-1].messages == produced == [produced[0], final]
    assert agent.messages[-1] is final


async def test_agent_is_idle_and_usable_right_after_an_abort(faux):
    faux.enqueue(SLOW, {"text": "second answer"})
    agent = Agent(model=MODEL)
    rec = Recorder(agent)
    hit = rec.when(nth_update("text_delta", 2))
    task = asyncio.create_task(agent.prompt([user("first")]))
    await hit
    agent.abort()
    await asyncio.wait_for(agent.wait_for_idle(), 0.5)
    assert not agent.is_streaming and not agent.aborted
    assert task.done()
    produced = await agent.prompt([user("second")])
    assert produced[-1].stopReason == "stop" and text_of(produced[-1]) == "second answer"
    assert [event_type(m) for m in agent.messages] == ["user", "assistant", "user", "assistant"]
    assert agent.messages[1].stopReason == "aborted"
    assert [text_of(m) for m in faux.requests[1].messages][-1] == "second"
    labels = rec.labels()
    assert labels.count("agent_start") == 2 and labels.count("agent_end") == 2


async def test_abort_from_a_subscriber_mid_stream(faux):
    """An abort called synchronously while an event is being emitted ends the stream just the same."""
    faux.enqueue(SLOW)
    agent = Agent(model=MODEL)
    rec = Recorder(agent)
    pred = nth_update("text_delta", 3)
    agent.subscribe(lambda e: pred(e) and agent.abort())
    t0 = time.monotonic()
    produced = await agent.prompt([user("go")])
    assert time.monotonic() - t0 < 30  # bounds a hang
    final = produced[-1]
    assert final.stopReason == "aborted" and final.errorMessage == "Request was aborted"
    assert text_of(final) == rec.deltas() == LONG[:18]
    assert rec.labels()[-4:] == ["update:text_end", "message_end:assistant", "turn_end", "agent_end"]


async def test_abort_during_thinking_closes_the_thinking_block(faux):
    faux.enqueue({"thinking": "hmm " * 50, "text": "never", "chunkSize": 4, "delayMs": 10})
    agent = Agent(model=FAUX_MODELS[1], thinking_level="low")
    rec = Recorder(agent)
    produced, elapsed = await abort_when(agent, rec, "think", nth_update("thinking_delta", 2))
    assert elapsed < 30  # bounds a hang; what was produced shows where it stopped
    assert rec.labels()[-4:] == ["update:thinking_end", "message_end:assistant", "turn_end", "agent_end"]
    final = produced[-1]
    assert final.content == [ThinkingContent(thinking=rec.deltas("thinking_delta"), thinkingSignature="faux")]
    assert final.stopReason == "aborted"


async def test_abort_while_a_tool_call_streams_runs_no_tool(faux):
    tool = WaitForAbortTool()
    faux.enqueue({"toolCalls": [{"name": "bash", "arguments": {"command": "sleep 10; echo done"}, "id": "c"}],
                  "chunkSize": 3, "delayMs": 10})
    agent = Agent(model=MODEL, tools=[tool])
    rec = Recorder(agent)
    produced, _ = await abort_when(agent, rec, "run", nth_update("toolcall_delta", 2))
    assert tool.started == 0
    assert not any(x.startswith("tool_execution") for x in rec.labels())
    assert rec.labels()[-4:] == ["update:toolcall_end", "message_end:assistant", "turn_end", "agent_end"]
    final = produced[-1]
    assert final.stopReason == "aborted"
    assert isinstance(final.content[0], ToolCall)
    assert len(faux.requests) == 1


# ---------------------------------------------------------------------------------------------
# Abort during a tool
# ---------------------------------------------------------------------------------------------
async def test_abort_during_a_tool_then_empty_aborted_assistant(faux):
    tool = WaitForAbortTool()
    faux.enqueue({"toolCalls": [{"name": "bash", "arguments": {"command": "sleep 10; echo done"},
                                 "id": "call_01"}]},
                 {"text": "must never be requested"})
    agent = Agent(model=MODEL, tools=[tool])
    rec = Recorder(agent)
    produced, elapsed = await abort_when(
        agent, rec, "run a slow command", lambda e: event_type(e) == "tool_execution_update")
    assert elapsed < 30  # bounds a hang; what was produced shows where it stopped
    assert tool.saw_abort == ["call_01"]
    labels = rec.labels()
    i = labels.index("tool_execution_start:call_01")
    assert labels[i:] == [
        "tool_execution_start:call_01", "tool_execution_update:call_01", "tool_execution_end:call_01",
        "message_start:toolResult", "message_end:toolResult", "turn_end",
        "turn_start", "message_start:assistant", "message_end:assistant", "turn_end", "agent_end",
    ]
    end = [e for e in rec.events if isinstance(e, ToolExecutionEndEvent)][0]
    assert end.isError is True
    assert end.result.content == [TextContent(text="Command aborted")] and end.result.details == {}
    empty = rec.events[-3].message
    assert rec.events[-4].message is empty
    assert empty.content == []
    assert empty.stopReason == "aborted"
    assert empty.errorMessage == "Request was aborted."
    assert empty.usage.totalTokens == 0
    assert (empty.api, empty.provider, empty.model) == ("faux", "faux", "faux")
    assert rec.events[-2].message is empty
    # the second request never reached the model
    assert len(faux.requests) == 1 and len(faux.queue) == 1
    assert [event_type(m) for m in produced] == ["user", "assistant", "toolResult", "assistant"]
    assert produced[2].content[0].text == "Command aborted" and produced[2].isError
    assert len([e for e in rec.events if isinstance(e, AgentEndEvent)]) == 1
    # usable right after
    produced = await agent.prompt([user("again")])
    assert text_of(produced[-1]) == "must never be requested"


async def test_abort_reaches_every_running_tool(faux):
    tool = WaitForAbortTool()
    faux.enqueue({"toolCalls": [{"name": "bash", "arguments": {"command": "a"}, "id": "a"},
                                {"name": "bash", "arguments": {"command": "b"}, "id": "b"},
                                {"name": "bash", "arguments": {"command": "c"}, "id": "c"}]})
    agent = Agent(model=MODEL, tools=[tool])
    rec = Recorder(agent)
    started = [0]

    def third_update(e) -> bool:
        if event_type(e) == "tool_execution_update":
            started[0] += 1
        return started[0] == 3

    produced, elapsed = await abort_when(agent, rec, "run three", third_update)
    assert elapsed < 30  # bounds a hang; what was produced shows where it stopped
    assert sorted(tool.saw_abort) == ["a", "b", "c"]
    results = [m for m in produced if event_type(m) == "toolResult"]
    assert [(r.toolCallId, r.content[0].text, r.isError) for r in results] == [
        ("a", "Command aborted", True), ("b", "Command aborted", True), ("c", "Command aborted", True)]
    assert produced[-1].content == [] and produced[-1].errorMessage == "Request was aborted."


async def test_abort_between_turns_never_calls_the_model_again(faux):
    faux.enqueue({"toolCalls": [{"name": "bash", "arguments": {"command": "x"}, "id": "t"}]}, {"text": "unused"})

    class Quick(AgentTool):
        name = "bash"
        parameters = {"type": "object", "properties": {}}

        async def execute(self, tool_call_id, params, signal, on_update):
            return AgentToolResult(content=[TextContent(text="ok")])

    agent = Agent(model=MODEL, tools=[Quick()])
    rec = Recorder(agent)
    agent.subscribe(lambda e: isinstance(e, TurnEndEvent) and agent.abort())
    produced = await agent.prompt([user("x")])
    assert len(faux.requests) == 1
    assert produced[-1].stopReason == "aborted" and produced[-1].errorMessage == "Request was aborted."
    assert produced[2].content[0].text == "ok"  # the tool finished before the abort
    assert rec.labels()[-6:] == ["turn_end", "turn_start", "message_start:assistant", "message_end:assistant",
                                 "turn_end", "agent_end"]


async def test_abort_after_the_message_before_tools_start(faux):
    """Tools started after an abort see an aborted signal at once."""
    tool = WaitForAbortTool()
    faux.enqueue({"toolCalls": [{"name": "bash", "arguments": {"command": "x"}, "id": "t"}]})
    agent = Agent(model=MODEL, tools=[tool])
    agent.subscribe(lambda e: event_type(e) == "message_end" and event_type(e.message) == "assistant"
                    and agent.abort())
    t0 = time.monotonic()
    produced = await agent.prompt([user("x")])
    assert time.monotonic() - t0 < 30  # bounds a hang
    assert tool.saw_abort == ["t"]
    assert [event_type(m) for m in produced] == ["user", "assistant", "toolResult", "assistant"]
    assert produced[1].stopReason == "toolUse"
    assert produced[-1].errorMessage == "Request was aborted."


# ---------------------------------------------------------------------------------------------
# Abort and the queues; abort when idle
# ---------------------------------------------------------------------------------------------
async def test_abort_keeps_the_queues(faux):
    faux.enqueue(SLOW, {"text": "after"})
    agent = Agent(model=MODEL)
    rec = Recorder(agent)
    hit = rec.when(nth_update("text_delta", 2))
    task = asyncio.create_task(agent.prompt([user("first")]))
    await hit
    agent.steer(user("steered"))
    agent.follow_up(user("followed"))
    agent.abort()
    await task
    assert len(faux.requests) == 1  # the aborted run delivered nothing
    assert [text_of(m) for m in agent.steering_queue] == ["steered"]
    assert [text_of(m) for m in agent.follow_up_queue] == ["followed"]
    faux.enqueue({"text": "follow reply"})
    await agent.prompt([user("next")])
    tails = [[text_of(m) for m in req.messages[-2:]] for req in faux.requests[1:]]
    assert tails == [["next", "steered"], ["after", "followed"]]


async def test_abort_when_idle_is_harmless(faux):
    faux.enqueue({"text": "fine"})
    agent = Agent(model=MODEL)
    agent.abort()
    assert not agent.aborted and not agent.is_streaming
    produced = await agent.prompt([user("x")])
    assert produced[-1].stopReason == "stop"


async def test_abort_twice_gives_one_agent_end(faux):
    faux.enqueue(SLOW)
    agent = Agent(model=MODEL)
    rec = Recorder(agent)
    hit = rec.when(nth_update("text_delta", 1))
    task = asyncio.create_task(agent.prompt([user("x")]))
    await hit
    agent.abort()
    agent.abort()
    await task
    assert rec.labels().count("agent_end") == 1
    assert rec.labels().count("message_end:assistant") == 1


@pytest.mark.parametrize("at", ["message_start", "text_start", "text_end"])
async def test_abort_at_any_point_of_the_stream_ends_with_one_aborted_message(faux, at):
    faux.enqueue({"text": "abcdefghij" * 5, "chunkSize": 5, "delayMs": 5})
    agent = Agent(model=MODEL)
    rec = Recorder(agent)

    def pred(e) -> bool:
        if at == "message_start":
            return event_type(e) == "message_start" and event_type(e.message) == "assistant"
        return event_type(e) == "message_update" and event_type(e.assistantMessageEvent) == at

    agent.subscribe(lambda e: pred(e) and agent.abort())
    produced = await agent.prompt([user("x")])
    labels = rec.labels()
    assert labels.count("agent_end") == 1 and labels.count("message_end:assistant") == 1
    assert labels.count("update:text_end") <= 1
    final = produced[-1]
    if at == "text_end":
        # the whole text already arrived; the stream is still aborted before its terminal event
        assert text_of(final) == "abcdefghij" * 5
    assert final.stopReason == "aborted"
    assert final.errorMessage == "Request was aborted"
