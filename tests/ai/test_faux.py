"""The scripted ``faux`` model: chunked streaming, shortcuts, tool calls, usage, errors, scripts."""

from __future__ import annotations

import json
import time

import pytest
from provider_helpers import final, kinds

from pisces.ai.models import FAUX_MODELS
from pisces.ai.providers.faux import FauxScript, demo_response, use_demo
from pisces.ai.stream import stream
from pisces.ai.types import (
    Context,
    StreamOptions,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    event_type,
)

FAUX = FAUX_MODELS[0]


def ctx(text: str = "hello there") -> Context:
    return Context(systemPrompt="be brief", messages=[UserMessage(content=[TextContent(text=text)])])


async def run(context: Context | None = None, options: StreamOptions | None = None) -> list:
    return [ev async for ev in stream(FAUX, context or ctx(), options)]


async def test_text_is_streamed_in_chunks(faux):
    faux.enqueue({"text": "Hello, world!", "chunkSize": 5})
    events = await run()
    assert kinds(events) == ["start", "text_start", "text_delta", "text_delta", "text_delta", "text_end", "done"]
    assert [ev.delta for ev in events if event_type(ev) == "text_delta"] == ["Hello", ", wor", "ld!"]
    assert events[-2].content == "Hello, world!"
    assert all(ev.contentIndex == 0 for ev in events[1:-1])
    msg = final(events)
    assert msg.content == [TextContent(text="Hello, world!")]
    assert msg.stopReason == "stop"
    assert events[-1].reason == "stop"
    assert (msg.api, msg.provider, msg.model) == ("faux", "faux", "faux")
    assert msg.responseId == "faux-1"


async def test_partial_grows_with_each_delta(faux):
    faux.enqueue({"text": "abcdefgh", "chunkSize": 3})
    seen = []
    async for ev in stream(FAUX, ctx()):
        if event_type(ev) == "text_delta":
            seen.append(ev.partial.content[0].text)
    assert seen == ["abc", "abcdef", "abcdefgh"]


async def test_default_chunk_size_is_eight(faux):
    faux.enqueue({"text": "x" * 20})
    events = await run()
    assert [len(ev.delta) for ev in events if event_type(ev) == "text_delta"] == [8, 8, 4]


async def test_thinking_then_text_shortcut(faux):
    faux.enqueue({"text": "answer", "thinking": "let me think"})
    events = await run()
    assert kinds(events) == ["start", "thinking_start", "thinking_delta", "thinking_delta", "thinking_end",
                             "text_start", "text_delta", "text_end", "done"]
    assert events[4].content == "let me think"
    assert events[4].contentIndex == 0 and events[5].contentIndex == 1
    msg = final(events)
    assert msg.content == [ThinkingContent(thinking="let me think", thinkingSignature="faux"),
                           TextContent(text="answer")]


async def test_empty_text_still_gives_one_delta(faux):
    faux.enqueue({"content": [{"type": "text", "text": ""}]})
    events = await run()
    assert kinds(events) == ["start", "text_start", "text_delta", "text_end", "done"]
    assert events[2].delta == ""


async def test_tool_calls_stream_their_json_arguments(faux):
    faux.enqueue({"text": "running", "toolCalls": [
        {"name": "bash", "arguments": {"command": "ls -la"}, "id": "call_a"},
        {"name": "read", "arguments": {"path": "x.py"}},
    ], "chunkSize": 6})
    events = await run()
    msg = final(events)
    assert events[-1].reason == "toolUse"
    assert msg.stopReason == "toolUse"
    calls = [b for b in msg.content if isinstance(b, ToolCall)]
    assert [c.name for c in calls] == ["bash", "read"]
    assert calls[0].id == "call_a"
    assert calls[1].id and calls[1].id != "call_a"
    assert calls[0].arguments == {"command": "ls -la"}
    assert calls[1].arguments == {"path": "x.py"}
    for idx, call in ((1, calls[0]), (2, calls[1])):
        deltas = "".join(ev.delta for ev in events if event_type(ev) == "toolcall_delta" and ev.contentIndex == idx)
        assert json.loads(deltas) == call.arguments
        ends = [ev for ev in events if event_type(ev) == "toolcall_end" and ev.contentIndex == idx]
        assert len(ends) == 1 and ends[0].toolCall == call


async def test_generated_tool_call_ids_are_unique(faux):
    faux.enqueue({"toolCalls": [{"name": "a"}, {"name": "b"}]}, {"toolCalls": [{"name": "c"}]})
    ids = []
    for _ in range(2):
        ids += [b.id for b in final(await run()).content]
    assert len(ids) == len(set(ids)) == 3


async def test_tool_call_arguments_as_raw_json_string(faux):
    faux.enqueue({"toolCalls": [{"name": "t", "arguments": '{"a": 1}'}, {"name": "u", "arguments": "{not json"}]})
    msg = final(await run())
    assert [b.arguments for b in msg.content] == [{"a": 1}, {}]


async def test_explicit_stop_reason(faux):
    faux.enqueue({"text": "cut", "stopReason": "length"})
    events = await run()
    assert events[-1].reason == "length"
    assert final(events).stopReason == "length"


async def test_scripted_error_keeps_content(faux):
    faux.enqueue({"text": "partial", "error": "overloaded_error: Overloaded"})
    events = await run()
    assert kinds(events)[-1] == "error"
    assert events[-1].reason == "error"
    msg = final(events)
    assert msg.stopReason == "error"
    assert msg.errorMessage == "overloaded_error: Overloaded"
    assert msg.content == [TextContent(text="partial")]


async def test_explicit_usage(faux):
    faux.enqueue({"text": "x", "usage": {"input": 100, "output": 20, "cacheRead": 5, "cacheWrite": 3}})
    usage = final(await run()).usage
    assert (usage.input, usage.output, usage.cacheRead, usage.cacheWrite) == (100, 20, 5, 3)
    assert usage.totalTokens == 128
    assert usage.cost.total == 0  # the faux model is free


async def test_estimated_usage(faux):
    faux.enqueue({"text": "x" * 10})
    context = Context(systemPrompt="s" * 8, messages=[UserMessage(content="u" * 12)])
    usage = final(await run(context)).usage
    assert usage.input == (8 + 12 + 3) // 4
    assert usage.output == (10 + 3) // 4
    assert usage.totalTokens == usage.input + usage.output


async def test_delay_paces_the_chunks(faux):
    faux.enqueue({"text": "abcdef", "chunkSize": 2, "delayMs": 30})
    t0 = time.monotonic()
    events = await run()
    assert time.monotonic() - t0 >= 0.08  # three chunks, 30 ms before each
    assert final(events).content == [TextContent(text="abcdef")]


async def test_callable_response_sees_the_request(faux):
    seen = {}

    def respond(context, options):
        seen["last"] = context.messages[-1].content[0].text
        seen["reasoning"] = options.reasoning
        return {"text": f"you said {seen['last']}"}

    faux.enqueue(respond)
    msg = final(await run(ctx("ping"), StreamOptions(reasoning="high")))
    assert msg.content == [TextContent(text="you said ping")]
    assert seen == {"last": "ping", "reasoning": "high"}


async def test_requests_are_recorded(faux):
    faux.enqueue({"text": "a"}, {"text": "b"})
    c1, c2 = ctx("first"), ctx("second")
    await run(c1)
    await run(c2)
    assert faux.requests == [c1, c2]
    assert final(await run()).responseId == "faux-3"


async def test_empty_queue_is_an_error_not_a_hang(faux):
    events = await run()
    assert kinds(events) == ["start", "error"]
    msg = final(events)
    assert msg.stopReason == "error"
    assert "no scripted response left" in msg.errorMessage
    assert "request 1" in msg.errorMessage


async def test_queue_then_loop_then_default(faux):
    faux.enqueue({"text": "queued"})
    faux.set_loop([{"text": "l1"}, {"text": "l2"}])
    texts = [final(await run()).content[0].text for _ in range(4)]
    assert texts == ["queued", "l1", "l2", "l1"]
    faux.reset()
    assert faux.requests == [] and not faux.queue and faux.loop_responses is None
    faux.default = {"text": "default"}
    assert final(await run()).content[0].text == "default"
    assert final(await run()).content[0].text == "default"


async def test_demo_uses_bash_then_reports(faux):
    use_demo()
    first = final(await run())
    assert first.stopReason == "toolUse"
    call = first.content[-1]
    assert call.name == "bash" and "command" in call.arguments
    result = ToolResultMessage(toolCallId=call.id, toolName="bash", content=[TextContent(text="a.py\nb.py\n")])
    second = final(await run(Context(messages=[UserMessage(content="hi"), first, result])))
    assert second.stopReason == "stop"
    assert "2 entries" in second.content[0].text
    assert demo_response(Context(messages=[]), StreamOptions())["toolCalls"][0]["name"] == "bash"


# ---------------------------------------------------------------------------------------------
# Script files
# ---------------------------------------------------------------------------------------------
def test_load_file_list(tmp_path):
    f = tmp_path / "s.json"
    f.write_text(json.dumps([{"text": "a"}, {"toolCalls": [{"name": "bash"}]}]))
    s = FauxScript()
    s.load_file(str(f))
    assert list(s.queue) == [{"text": "a"}, {"toolCalls": [{"name": "bash"}]}]
    assert s.loop_responses is None


def test_load_file_loop(tmp_path):
    f = tmp_path / "s.json"
    f.write_text(json.dumps({"responses": [{"text": "a"}, {"text": "b"}], "loop": True}))
    s = FauxScript()
    s.load_file(str(f))
    assert [s.next()["text"] for _ in range(3)] == ["a", "b", "a"]


@pytest.mark.parametrize("content,needle", [
    ("{nope", "not valid JSON"),
    (json.dumps({"text": "a"}), "must be a list"),
    (json.dumps([1, 2]), "must be a list"),
    (json.dumps([{"content": [{"type": "image"}]}]), "content blocks must be"),
    (json.dumps([{"toolCalls": [{"arguments": {}}]}]), "needs a 'name'"),
])
def test_load_file_rejects_bad_scripts(tmp_path, content, needle):
    f = tmp_path / "s.json"
    f.write_text(content)
    with pytest.raises(ValueError, match=needle):
        FauxScript().load_file(str(f))


def test_subagents_are_scripted_apart_from_the_main_session(tmp_path):
    f = tmp_path / "s.json"
    f.write_text(json.dumps({"responses": [{"text": "main"}],
                             "subagents": {"Fix": [{"text": "fix 1"}, {"text": "fix 2"}], "explore": [{"text": "ex"}]}}))
    s = FauxScript()
    s.load_file(str(f))
    # most specific name first: allocated id, task id, agent name
    assert s.next(("0-Fix", "Fix", "task"))["text"] == "fix 1"
    assert s.next(("1-Look", "Look", "explore"))["text"] == "ex"
    assert s.next(())["text"] == "main"
    assert s.next(("0-Fix", "Fix", "task"))["text"] == "fix 2"
    assert s.next(("0-Fix", "Fix", "task")) is None  # its own queue is empty: never another's reply
    assert s.next(("2-Other", "Other", "task")) is None  # no name matches: the (now empty) main queue


async def test_an_exhausted_subagent_queue_says_whose_it_is(faux):
    faux.enqueue_for("Fix", {"text": "only one"})
    opts = StreamOptions(requester=("0-Fix", "Fix", "task"))
    assert final(await run(options=opts)).content[0].text == "only one"
    msg = final(await run(options=opts))
    assert msg.stopReason == "error" and "no scripted response left for subagent 'Fix'" in msg.errorMessage
    assert faux.requesters == [("0-Fix", "Fix", "task")] * 2


def test_load_file_rejects_bad_subagent_scripts(tmp_path):
    f = tmp_path / "s.json"
    f.write_text(json.dumps({"subagents": {"A": {"text": "x"}}}))
    with pytest.raises(ValueError, match="'subagents' must map names to lists"):
        FauxScript().load_file(str(f))
    f.write_text(json.dumps({"subagents": {"A": [{"toolCalls": [{}]}]}}))
    with pytest.raises(ValueError, match="subagent A response 0: every tool call needs a 'name'"):
        FauxScript().load_file(str(f))


def test_load_missing_file(tmp_path):
    with pytest.raises(ValueError, match="Cannot read faux script"):
        FauxScript().load_file(str(tmp_path / "missing.json"))


def test_faux_models():
    assert FAUX_MODELS[0].api == "faux" and not FAUX_MODELS[0].reasoning
    assert FAUX_MODELS[1].reasoning
