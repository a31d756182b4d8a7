"""The turn loop through Agent: exact event order (pi's), tool execution, tool failures, context."""

from __future__ import annotations

import asyncio

import msgspec
import pytest
from agent_helpers import Recorder, label, sleep_unless_aborted, text_of, user

from pisces.agent.agent import Agent, AgentBusyError
from pisces.agent.types import (
    AgentEndEvent,
    AgentTool,
    AgentToolResult,
    MessageUpdateEvent,
    ToolError,
    ToolExecutionEndEvent,
    ToolExecutionUpdateEvent,
    TurnEndEvent,
)
from pisces.ai.models import FAUX_MODELS
from pisces.ai.types import (
    UNSET,
    AssistantMessage,
    StreamOptions,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    event_type,
)

MODEL = FAUX_MODELS[0]


class SleepTool(AgentTool):
    """Sleeps ``ms`` milliseconds, or until its signal aborts (then fails with "Command aborted")."""

    name = "sleep"
    description = "sleep"
    parameters = {"type": "object", "properties": {"ms": {"type": "number"}}, "required": ["ms"]}

    def __init__(self, log: list | None = None) -> None:
        self.log = log if log is not None else []

    async def execute(self, tool_call_id, params, signal, on_update):
        self.log.append(("start", tool_call_id))
        if not await sleep_unless_aborted(signal, params["ms"] / 1000):
            self.log.append(("end", tool_call_id))
            return AgentToolResult(content=[TextContent(text=f"slept {params['ms']}")])
        self.log.append(("aborted", tool_call_id))
        raise ToolError("Command aborted")


class RaisingTool(AgentTool):
    name = "fail"
    description = "fails in various ways"
    parameters = {"type": "object", "properties": {"how": {"type": "string"}}, "required": ["how"]}

    async def execute(self, tool_call_id, params, signal, on_update):
        how = params["how"]
        if how == "runtime":
            raise RuntimeError("boom: disk on fire")
        if how == "tool-error":
            raise ToolError("nothing to edit", details={"path": "a.py"})
        if how == "silent":
            raise ValueError()
        if how == "wrong-type":
            return {"content": "not a result"}
        return AgentToolResult(content=[TextContent(text="fine")], details={"how": how})


class StreamingTool(AgentTool):
    name = "stream"
    description = "streams partial results"
    parameters = {"type": "object", "properties": {}}

    async def execute(self, tool_call_id, params, signal, on_update):
        text = ""
        for piece in ("one ", "two ", "three"):
            text += piece
            on_update(AgentToolResult(content=[TextContent(text=text)]))
            await asyncio.sleep(0)
        return AgentToolResult(content=[TextContent(text=text)])


# ---------------------------------------------------------------------------------------------
# Event order (compare pi-0.73.1/02_prompt_text, 03_prompt_bash_tool)
# ---------------------------------------------------------------------------------------------
async def test_text_turn_event_order(faux):
    faux.enqueue({"text": "Hello! I am a scripted model.", "chunkSize": 16})
    agent = Agent(model=MODEL)
    rec = Recorder(agent)
    prompt = user("Say hello")
    produced = await agent.prompt([prompt])
    assert rec.labels() == [
        "agent_start", "turn_start",
        "message_start:user", "message_end:user",
        "message_start:assistant",
        "update:text_start", "update:text_delta", "update:text_delta", "update:text_end",
        "message_end:assistant", "turn_end", "agent_end",
    ]
    assert rec.events[2].message is prompt and rec.events[3].message is prompt
    assistant = rec.events[-3].message
    assert isinstance(assistant, AssistantMessage)
    assert assistant.content == [TextContent(text="Hello! I am a scripted model.")]
    assert assistant.stopReason == "stop"
    turn_end = rec.events[-2]
    assert turn_end.message is assistant and turn_end.toolResults == []
    assert rec.events[-1].messages == [prompt, assistant]
    assert produced == [prompt, assistant]
    assert agent.messages == [prompt, assistant]
    assert not agent.is_streaming


async def test_thinking_turn_event_order(faux):
    faux.enqueue({"thinking": "The user wants a greeting.", "text": "Hi.", "chunkSize": 100})
    agent = Agent(model=FAUX_MODELS[1], thinking_level="medium")
    rec = Recorder(agent)
    await agent.prompt([user("hi")])
    assert rec.labels() == [
        "agent_start", "turn_start", "message_start:user", "message_end:user",
        "message_start:assistant",
        "update:thinking_start", "update:thinking_delta", "update:thinking_end",
        "update:text_start", "update:text_delta", "update:text_end",
        "message_end:assistant", "turn_end", "agent_end",
    ]
    updates = rec.of(MessageUpdateEvent)
    assert [u.assistantMessageEvent.contentIndex for u in updates] == [0, 0, 0, 1, 1, 1]
    assert updates[2].assistantMessageEvent.content == "The user wants a greeting."
    final = rec.events[-3].message
    assert isinstance(final.content[0], ThinkingContent)
    assert final.content[0].thinking == "The user wants a greeting."
    assert text_of(final) == "Hi."


async def test_tool_turn_then_final_text_event_order(faux):
    faux.enqueue({"toolCalls": [{"name": "sleep", "arguments": {"ms": 1}, "id": "call_01"}], "chunkSize": 100},
                 {"text": "The command printed hi.", "chunkSize": 100})
    agent = Agent(model=MODEL, tools=[SleepTool()])
    rec = Recorder(agent)
    produced = await agent.prompt([user("Run it")])
    assert rec.labels() == [
        "agent_start", "turn_start", "message_start:user", "message_end:user",
        "message_start:assistant",
        "update:toolcall_start", "update:toolcall_delta", "update:toolcall_end",
        "message_end:assistant",
        "tool_execution_start:call_01", "tool_execution_end:call_01",
        "message_start:toolResult", "message_end:toolResult",
        "turn_end",
        "turn_start",
        "message_start:assistant", "update:text_start", "update:text_delta", "update:text_end",
        "message_end:assistant", "turn_end", "agent_end",
    ]
    first, second = [e for e in rec.of(TurnEndEvent)]
    assert first.message.stopReason == "toolUse"
    assert [r.toolCallId for r in first.toolResults] == ["call_01"]
    result = first.toolResults[0]
    assert isinstance(result, ToolResultMessage)
    assert result.content == [TextContent(text="slept 1")] and result.isError is False
    assert result.details is UNSET  # absent from the JSON, as pi's clean bash result
    assert b'"details"' not in msgspec.json.encode(result)
    assert second.toolResults == [] and second.message.stopReason == "stop"
    start = rec.events[9]
    assert (start.toolName, start.args) == ("sleep", {"ms": 1})
    assert [event_type(m) for m in produced] == ["user", "assistant", "toolResult", "assistant"]
    # the second request carries the whole exchange
    assert [event_type(m) for m in faux.requests[1].messages] == ["user", "assistant", "toolResult"]


async def test_message_update_has_pi_shape_snapshot_in_message_and_partial(faux):
    faux.enqueue({"text": "abcdef", "chunkSize": 2})
    agent = Agent(model=MODEL)
    frames: list[dict] = []
    agent.subscribe(lambda e: frames.append(msgspec.json.decode(msgspec.json.encode(e))))
    await agent.prompt([user("x")])
    updates = [f for f in frames if f["type"] == "message_update"]
    # pi's field order and pi's shape: the event carries the same snapshot as ``message``
    assert all(list(f) == ["type", "assistantMessageEvent", "message"] for f in updates)
    assert all(f["assistantMessageEvent"]["partial"] == f["message"] for f in updates)
    # encoded at emit time, each snapshot shows the text accumulated so far
    texts = [f["message"]["content"][0]["text"] for f in updates if f["assistantMessageEvent"]["type"] == "text_delta"]
    assert texts == ["ab", "abcd", "abcdef"]
    start = next(f for f in frames if f["type"] == "message_start" and f["message"]["role"] == "assistant")
    assert start["message"]["content"] == []


# ---------------------------------------------------------------------------------------------
# Tool execution
# ---------------------------------------------------------------------------------------------
async def test_parallel_tools_end_in_completion_order_results_in_call_order(faux):
    log: list = []
    faux.enqueue({"toolCalls": [{"name": "sleep", "arguments": {"ms": 150}, "id": "slow"},
                                {"name": "sleep", "arguments": {"ms": 10}, "id": "fast"},
                                {"name": "sleep", "arguments": {"ms": 60}, "id": "mid"}]},
                 {"text": "done"})
    agent = Agent(model=MODEL, tools=[SleepTool(log)])
    rec = Recorder(agent)
    await agent.prompt([user("go")])
    labels = rec.labels()
    tool_labels = [x for x in labels if x.startswith("tool_execution")]
    assert tool_labels == [
        "tool_execution_start:slow", "tool_execution_start:fast", "tool_execution_start:mid",
        "tool_execution_end:fast", "tool_execution_end:mid", "tool_execution_end:slow",
    ]
    # they ran concurrently: every tool started before the first one finished
    assert [x[0] for x in log[:3]] == ["start", "start", "start"]
    # toolResult messages, turn_end.toolResults and the next request keep call order
    results = [e.message for e in rec.events if label(e) == "message_start:toolResult"]
    assert [r.toolCallId for r in results] == ["slow", "fast", "mid"]
    assert [r.content[0].text for r in results] == ["slept 150", "slept 10", "slept 60"]
    assert [r.toolCallId for r in rec.of(TurnEndEvent)[0].toolResults] == ["slow", "fast", "mid"]
    assert [m.toolCallId for m in faux.requests[1].messages[-3:]] == ["slow", "fast", "mid"]
    # results are added only after every call ended
    assert labels.index("message_start:toolResult") > labels.index("tool_execution_end:slow")


async def test_unknown_tool_and_validation_failure(faux):
    log: list = []
    faux.enqueue({"toolCalls": [{"name": "sleep", "arguments": {"ms": 20}, "id": "ok"},
                                {"name": "ls", "arguments": {"path": "."}, "id": "unknown"},
                                {"name": "sleep", "arguments": {"ms": "soon"}, "id": "invalid"}]},
                 {"text": "done"})
    agent = Agent(model=MODEL, tools=[SleepTool(log)])
    rec = Recorder(agent)
    await agent.prompt([user("go")])
    tool_labels = [x for x in rec.labels() if x.startswith("tool_execution")]
    # as pi: each call is prepared in call order and a call that fails there ends at once; the prepared
    # calls run after every call was prepared
    assert tool_labels == [
        "tool_execution_start:ok", "tool_execution_start:unknown", "tool_execution_end:unknown",
        "tool_execution_start:invalid", "tool_execution_end:invalid", "tool_execution_end:ok",
    ]
    ends = {e.toolCallId: e for e in rec.of(ToolExecutionEndEvent)}
    assert ends["unknown"].isError is True
    assert ends["unknown"].result.content == [TextContent(text="Tool ls not found")]
    assert ends["unknown"].result.details == {}
    assert ends["invalid"].isError is True
    assert ends["invalid"].result.content[0].text == (
        'Validation failed for tool "sleep":\n  - ms: must be number\n\nReceived arguments:\n{\n  "ms": "soon"\n}')
    assert ends["ok"].isError is False
    assert log == [("start", "ok"), ("end", "ok")]  # the invalid call never ran
    results = rec.of(TurnEndEvent)[0].toolResults
    assert [(r.toolCallId, r.isError) for r in results] == [("ok", False), ("unknown", True), ("invalid", True)]
    assert results[1].details == {}
    assert b'"details":{}' in msgspec.json.encode(results[1])


@pytest.mark.parametrize("how,text,details", [
    ("runtime", "boom: disk on fire", {}),
    ("tool-error", "nothing to edit", {"path": "a.py"}),
    ("silent", "ValueError", {}),
    ("wrong-type", "tool fail returned dict, not AgentToolResult", {}),
])
async def test_tool_failures_become_error_results(faux, how, text, details):
    faux.enqueue({"toolCalls": [{"name": "fail", "arguments": {"how": how}, "id": "c"}]}, {"text": "noted"})
    agent = Agent(model=MODEL, tools=[RaisingTool()])
    rec = Recorder(agent)
    produced = await agent.prompt([user("try")])
    end = rec.of(ToolExecutionEndEvent)[0]
    assert end.isError is True
    assert end.result.content == [TextContent(text=text)]
    assert end.result.details == details
    result = produced[2]
    assert isinstance(result, ToolResultMessage)
    assert (result.isError, result.content[0].text, result.details) == (True, text, details)
    # the run goes on: the model reads the error and answers
    assert text_of(produced[-1]) == "noted"
    assert rec.labels()[-1] == "agent_end"


async def test_tool_details_are_kept(faux):
    faux.enqueue({"toolCalls": [{"name": "fail", "arguments": {"how": "no"}, "id": "c"}]}, {"text": "ok"})
    agent = Agent(model=MODEL, tools=[RaisingTool()])
    produced = await agent.prompt([user("try")])
    assert produced[2].details == {"how": "no"} and produced[2].isError is False


async def test_tool_updates_stream_between_start_and_end(faux):
    faux.enqueue({"toolCalls": [{"name": "stream", "arguments": {}, "id": "s"}]}, {"text": "ok"})
    agent = Agent(model=MODEL, tools=[StreamingTool()])
    rec = Recorder(agent)
    await agent.prompt([user("go")])
    tool_labels = [x for x in rec.labels() if x.startswith("tool_execution")]
    assert tool_labels == ["tool_execution_start:s"] + ["tool_execution_update:s"] * 3 + ["tool_execution_end:s"]
    updates = rec.of(ToolExecutionUpdateEvent)
    assert [u.partialResult.content[0].text for u in updates] == ["one ", "one two ", "one two three"]
    assert all(u.toolName == "stream" and u.args == {} for u in updates)
    assert rec.of(ToolExecutionEndEvent)[0].result.content[0].text == "one two three"


async def test_tool_calls_in_an_errored_message_are_not_run(faux):
    log: list = []
    faux.enqueue({"toolCalls": [{"name": "sleep", "arguments": {"ms": 1}, "id": "c"}], "error": "stream broke"})
    agent = Agent(model=MODEL, tools=[SleepTool(log)])
    rec = Recorder(agent)
    produced = await agent.prompt([user("go")])
    assert log == []
    assert not any(x.startswith("tool_execution") for x in rec.labels())
    assert rec.labels()[-3:] == ["message_end:assistant", "turn_end", "agent_end"]
    assert produced[-1].stopReason == "error" and produced[-1].errorMessage == "stream broke"
    assert len(faux.requests) == 1


async def test_empty_script_ends_the_run_with_an_error_message(faux):
    agent = Agent(model=MODEL)
    rec = Recorder(agent)
    produced = await agent.prompt([user("anyone?")])
    assert produced[-1].stopReason == "error"
    assert "no scripted response left" in produced[-1].errorMessage
    assert rec.labels() == ["agent_start", "turn_start", "message_start:user", "message_end:user",
                            "message_start:assistant", "message_end:assistant", "turn_end", "agent_end"]
    assert len(rec.of(AgentEndEvent)) == 1


async def test_length_stop_with_no_tools_ends_the_run(faux):
    faux.enqueue({"text": "trunc", "stopReason": "length"})
    agent = Agent(model=MODEL)
    produced = await agent.prompt([user("x")])
    assert produced[-1].stopReason == "length"
    assert len(faux.requests) == 1


# ---------------------------------------------------------------------------------------------
# The request the model sees; the agent's state across runs
# ---------------------------------------------------------------------------------------------
async def test_request_context_carries_system_prompt_tools_and_history(faux):
    faux.enqueue({"text": "one"}, {"text": "two"})
    agent = Agent(model=MODEL, system_prompt="You are terse.", tools=[SleepTool(), RaisingTool()])
    await agent.prompt([user("first")])
    await agent.prompt([user("second")])
    req1, req2 = faux.requests
    assert req1.systemPrompt == "You are terse."
    assert [t.name for t in req1.tools] == ["sleep", "fail"]
    assert req1.tools[0].parameters == SleepTool.parameters
    assert [text_of(m) for m in req1.messages] == ["first"]
    assert [text_of(m) for m in req2.messages] == ["first", "one", "second"]
    assert [text_of(m) for m in agent.messages] == ["first", "one", "second", "two"]


async def test_no_tools_means_no_tools_field(faux):
    faux.enqueue({"text": "x"})
    await Agent(model=MODEL).prompt([user("x")])
    assert faux.requests[0].tools is UNSET


async def test_tool_list_change_applies_to_next_turn(faux):
    agent = Agent(model=MODEL, tools=[SleepTool()])

    def second(context, options):
        return {"text": ",".join(t.name for t in context.tools)}

    faux.enqueue({"toolCalls": [{"name": "sleep", "arguments": {"ms": 1}}]}, second)
    agent.subscribe(lambda e: isinstance(e, TurnEndEvent) and agent.tools.append(RaisingTool()))
    produced = await agent.prompt([user("x")])
    assert text_of(produced[-1]) == "sleep,fail"


async def test_continue_runs_from_the_current_context(faux):
    faux.enqueue({"text": "again"})
    agent = Agent(model=MODEL, messages=[user("earlier")])
    rec = Recorder(agent)
    produced = await agent.continue_()
    assert rec.labels() == ["agent_start", "turn_start", "message_start:assistant", "update:text_start",
                            "update:text_delta", "update:text_end", "message_end:assistant", "turn_end",
                            "agent_end"]
    assert [event_type(m) for m in produced] == ["assistant"]
    assert [text_of(m) for m in faux.requests[0].messages] == ["earlier"]


async def test_thinking_level_and_stream_options_reach_the_provider(faux):
    seen = {}

    def respond(context, options):
        seen.update(reasoning=options.reasoning, maxTokens=options.maxTokens, signal=options.signal)
        return {"text": "ok"}

    faux.enqueue(respond)
    agent = Agent(model=FAUX_MODELS[1], thinking_level="high",
                  stream_options=lambda model: StreamOptions(maxTokens=123))
    await agent.prompt([user("x")])
    assert seen["reasoning"] == "high" and seen["maxTokens"] == 123
    assert seen["signal"] is not None and not seen["signal"].aborted


async def test_transform_context_shapes_the_request_not_the_state(faux):
    async def keep_last(messages, signal):
        return messages[-1:]

    faux.enqueue({"text": "a"}, {"text": "b"})
    agent = Agent(model=MODEL, transform_context=keep_last)
    await agent.prompt([user("one")])
    await agent.prompt([user("two")])
    assert [text_of(m) for m in faux.requests[1].messages] == ["two"]
    assert len(agent.messages) == 4


async def test_convert_to_llm_drops_custom_messages(faux):
    class Note(msgspec.Struct, tag_field="role", tag="custom"):
        text: str

    faux.enqueue({"text": "ok"})
    agent = Agent(model=MODEL, messages=[Note(text="ui only")])
    rec = Recorder(agent)
    await agent.prompt([user("hi")])
    assert [event_type(m) for m in faux.requests[0].messages] == ["user"]
    assert isinstance(agent.messages[0], Note)
    assert rec.labels()[2:4] == ["message_start:user", "message_end:user"]


async def test_prompt_while_running_is_refused(faux):
    faux.enqueue({"text": "slow " * 10, "chunkSize": 5, "delayMs": 10})
    agent = Agent(model=MODEL)
    task = asyncio.create_task(agent.prompt([user("x")]))
    await asyncio.sleep(0.02)
    assert agent.is_streaming
    with pytest.raises(AgentBusyError, match="Agent is already processing."):
        await agent.prompt([user("y")])
    await task
    assert len(faux.requests) == 1
    assert [text_of(m) for m in agent.messages][0] == "x"


async def test_wait_for_idle_and_unsubscribe(faux):
    faux.enqueue({"text": "abc", "chunkSize": 1, "delayMs": 10}, {"text": "second"})
    agent = Agent(model=MODEL)
    seen: list = []
    unsubscribe = agent.subscribe(seen.append)
    await agent.wait_for_idle()  # idle at once
    task = asyncio.create_task(agent.prompt([user("x")]))
    await asyncio.sleep(0)
    assert agent.is_streaming
    await asyncio.wait_for(agent.wait_for_idle(), 1.0)
    assert task.done() and not agent.is_streaming
    assert isinstance(seen[-1], AgentEndEvent)
    unsubscribe()
    count = len(seen)
    await agent.prompt([user("y")])
    assert len(seen) == count
    unsubscribe()  # twice is harmless


async def test_tool_call_ids_link_start_end_and_result(faux):
    faux.enqueue({"toolCalls": [{"name": "sleep", "arguments": {"ms": 5}}, {"name": "sleep", "arguments": {"ms": 1}}]},
                 {"text": "ok"})
    agent = Agent(model=MODEL, tools=[SleepTool()])
    rec = Recorder(agent)
    produced = await agent.prompt([user("x")])
    call_ids = [b.id for b in produced[1].content if isinstance(b, ToolCall)]
    assert len(set(call_ids)) == 2
    starts = [e.toolCallId for e in rec.events if event_type(e) == "tool_execution_start"]
    ends = {e.toolCallId for e in rec.of(ToolExecutionEndEvent)}
    assert starts == call_ids and ends == set(call_ids)
    assert [m.toolCallId for m in produced[2:4]] == call_ids
