"""The anthropic-messages provider, driven through pisces.ai.stream.stream and the real SDK against the
scripted SSE server."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import msgspec
import pytest
from provider_helpers import abort_soon_after_text_deltas, context_factory, options_factory
from provider_helpers import run_summary as run

from pisces.ai.abort import AbortSignal
from pisces.ai.stream import stream
from pisces.ai.types import (
    AssistantMessage,
    ImageContent,
    Model,
    ModelCost,
    StreamOptions,
    TextContent,
    ThinkingContent,
    Tool,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
    event_type,
)
from scripted_server import DROP, Reply, Stall

EPHEMERAL = {"type": "ephemeral"}


def make_model(server, **kw) -> Model:
    base = dict(id="scripted-claude", name="Scripted Claude", api="anthropic-messages", provider="scripted-anthropic",
                baseUrl=server.url, reasoning=False, input=["text", "image"],
                cost=ModelCost(input=3, output=15, cacheRead=0.3, cacheWrite=3.75), contextWindow=200000,
                maxTokens=8192)
    base.update(kw)
    return Model(**base)


opts = options_factory("test-key")
user, ctx = context_factory("You are terse.", user_timestamp=1, default_prompt="Hi")


def msg_start(mid="msg_1", input_tokens=28, output_tokens=1, cache_read=0, cache_write=0, model="scripted-claude"):
    return {"type": "message_start", "message": {
        "id": mid, "type": "message", "role": "assistant", "model": model, "content": [], "stop_reason": None,
        "stop_sequence": None, "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens,
                                         "cache_read_input_tokens": cache_read,
                                         "cache_creation_input_tokens": cache_write}}}


def block_start(i, block):
    return {"type": "content_block_start", "index": i, "content_block": block}


def delta(i, d):
    return {"type": "content_block_delta", "index": i, "delta": d}


def text_delta(i, text):
    return delta(i, {"type": "text_delta", "text": text})


def block_stop(i):
    return {"type": "content_block_stop", "index": i}


def msg_delta(stop_reason="end_turn", output_tokens=4, **usage):
    return {"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": None},
            "usage": {"output_tokens": output_tokens, **usage}}


MSG_STOP = {"type": "message_stop"}


def text_reply(*pieces, mid="msg_1", stop="end_turn", input_tokens=28, output_tokens=4):
    return [msg_start(mid, input_tokens), block_start(0, {"type": "text", "text": ""}),
            *[text_delta(0, p) for p in pieces], block_stop(0), msg_delta(stop, output_tokens), MSG_STOP]


# ---------------------------------------------------------------------------------------------
async def test_text_reply(server):
    events = text_reply("It printed", " hi.")
    server.push(Reply.sse([*events[:3], {"type": "ping"}, *events[3:]], named=True))
    types, events, final = await run(make_model(server), ctx(), opts())
    assert types == ["start", "text_start", "text_delta", "text_delta", "text_end", "done"]
    assert [e.delta for e in events if event_type(e) == "text_delta"] == ["It printed", " hi."]
    assert events[4].content == "It printed hi." and events[4].contentIndex == 0
    assert events[-1].reason == "stop"
    assert final.content == [TextContent(text="It printed hi.")]
    assert final.stopReason == "stop" and final.responseId == "msg_1"
    assert final.errorMessage is msgspec.UNSET and final.responseModel is msgspec.UNSET
    assert (final.api, final.provider, final.model) == ("anthropic-messages", "scripted-anthropic", "scripted-claude")
    # every event carries the same live partial message
    assert all(e.partial is final for e in events[:-1])


async def test_usage_and_cost(server):
    server.push(Reply.sse([msg_start("msg_u", input_tokens=100, output_tokens=1, cache_read=2000, cache_write=500),
                           block_start(0, {"type": "text", "text": ""}), text_delta(0, "ok"), block_stop(0),
                           msg_delta("end_turn", 20, cache_read_input_tokens=2000), MSG_STOP], named=True))
    types, events, final = await run(make_model(server), ctx(), opts())
    assert types == ["start", "text_start", "text_delta", "text_end", "done"]
    # message_start fills usage at once: the first partial already shows the input tokens
    u = final.usage
    assert (u.input, u.output, u.cacheRead, u.cacheWrite, u.totalTokens) == (100, 20, 2000, 500, 2620)
    # pi's arithmetic: (price / 1e6) * tokens as IEEE doubles, unrounded
    assert msgspec.to_builtins(u.cost) == {
        "input": 0.00030000000000000003, "output": 0.00030000000000000003, "cacheRead": 0.0006,
        "cacheWrite": 0.0018750000000000001, "total": 0.0030750000000000005}
    # pi's own recorded numbers (run 14): 28 in, 9 out at 3/15 per million
    server.push(Reply.sse(text_reply("x", input_tokens=28, output_tokens=9), named=True))
    _, _, final = await run(make_model(server), ctx(), opts())
    assert msgspec.json.encode(final.usage) == (
        b'{"input":28,"output":9,"cacheRead":0,"cacheWrite":0,"totalTokens":37,"cost":{"input":0.00008400000000000001,'
        b'"output":0.000135,"cacheRead":0,"cacheWrite":0,"total":0.000219}}')


async def test_response_model_and_unnamed_events(server):
    """Events without ``event:`` lines are still understood; a served model that differs is recorded."""
    server.push(Reply.sse([msg_start(model="claude-x-20250101"), *text_reply("ok")[1:]]))
    types, _, final = await run(make_model(server), ctx(), opts())
    assert types == ["start", "text_start", "text_delta", "text_end", "done"]
    assert final.responseModel == "claude-x-20250101"


async def test_usage_is_known_from_message_start(server):
    seen: list[Usage] = []
    server.push(Reply.sse([msg_start(input_tokens=77, output_tokens=1), block_start(0, {"type": "text", "text": ""}),
                           text_delta(0, "a"), block_stop(0), msg_delta("max_tokens", 3), MSG_STOP], named=True))
    async for ev in stream(make_model(server), ctx(), opts()):
        if event_type(ev) == "text_start":
            seen.append(msgspec.structs.replace(ev.partial.usage))
        last = ev
    assert (seen[0].input, seen[0].output) == (77, 1)
    assert last.reason == "length" and last.message.stopReason == "length"
    assert (last.message.usage.input, last.message.usage.output) == (77, 3)


async def test_tool_call_arguments_in_several_deltas(server):
    server.push(Reply.sse([
        msg_start("msg_t"),
        block_start(0, {"type": "text", "text": ""}), text_delta(0, "Running it."), block_stop(0),
        block_start(1, {"type": "tool_use", "id": "toolu_01", "name": "bash", "input": {}}),
        delta(1, {"type": "input_json_delta", "partial_json": ""}),
        delta(1, {"type": "input_json_delta", "partial_json": '{"comma'}),
        delta(1, {"type": "input_json_delta", "partial_json": 'nd": "echo h'}),
        delta(1, {"type": "input_json_delta", "partial_json": 'i", "timeout": 5}'}),
        block_stop(1), msg_delta("tool_use", 9), MSG_STOP], named=True))
    bash = Tool(name="bash", description="Run a command",
                parameters={"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]})
    types, events, final = await run(make_model(server), ctx(user("Run echo hi"), tools=[bash]), opts())
    assert types == ["start", "text_start", "text_delta", "text_end", "toolcall_start", "toolcall_delta",
                     "toolcall_delta", "toolcall_delta", "toolcall_delta", "toolcall_end", "done"]
    assert [e.delta for e in events if event_type(e) == "toolcall_delta"] == [
        "", '{"comma', 'nd": "echo h', 'i", "timeout": 5}']
    assert {e.contentIndex for e in events[4:10]} == {1}
    tc = ToolCall(id="toolu_01", name="bash", arguments={"command": "echo hi", "timeout": 5})
    assert events[9].toolCall == tc
    assert events[-1].reason == "toolUse"
    assert final.content == [TextContent(text="Running it."), tc]
    assert final.stopReason == "toolUse"


async def test_thinking_and_signature_round_trip(server):
    server.push(Reply.sse([
        msg_start("msg_th"),
        block_start(0, {"type": "thinking", "thinking": "", "signature": ""}),
        delta(0, {"type": "thinking_delta", "thinking": "Let me "}),
        delta(0, {"type": "thinking_delta", "thinking": "think."}),
        delta(0, {"type": "signature_delta", "signature": "sig-part-1"}),
        delta(0, {"type": "signature_delta", "signature": "+part-2"}),
        block_stop(0),
        block_start(1, {"type": "redacted_thinking", "data": "opaque-data"}), block_stop(1),
        block_start(2, {"type": "text", "text": ""}), text_delta(2, "Done."), block_stop(2),
        msg_delta("end_turn", 12), MSG_STOP], named=True))
    model = make_model(server, reasoning=True, maxTokens=64000)
    first = user("Think")
    types, events, final = await run(model, ctx(first), opts(reasoning="medium"))
    assert types == ["start", "thinking_start", "thinking_delta", "thinking_delta", "thinking_end",
                     "thinking_start", "thinking_end", "text_start", "text_delta", "text_end", "done"]
    assert events[4].content == "Let me think." and events[4].contentIndex == 0
    assert events[6].contentIndex == 1 and events[9].contentIndex == 2
    assert final.content == [
        ThinkingContent(thinking="Let me think.", thinkingSignature="sig-part-1+part-2"),
        ThinkingContent(thinking="[Reasoning redacted]", thinkingSignature="opaque-data", redacted=True),
        TextContent(text="Done.")]
    body = server.requests[0].body
    # medium: budget 8192 on top of min(maxTokens, 32000)
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 8192}
    assert body["max_tokens"] == 32000 + 8192
    assert server.requests[0].headers["anthropic-beta"] == "interleaved-thinking-2025-05-14"

    # the next request replays the signed thinking and the redacted block
    server.push(Reply.sse(text_reply("ok"), named=True))
    await run(model, ctx(first, final, user("Again")), opts(reasoning="medium"))
    sent = server.requests[1].body["messages"]
    assert sent[1] == {"role": "assistant", "content": [
        {"type": "thinking", "thinking": "Let me think.", "signature": "sig-part-1+part-2"},
        {"type": "redacted_thinking", "data": "opaque-data"},
        {"type": "text", "text": "Done."}]}


@pytest.mark.parametrize("level,budget,max_tokens", [
    ("minimal", 1024, 8192), ("low", 2048, 8192), ("high", 8192 - 1024, 8192), ("xhigh", 8192 - 1024, 8192)])
async def test_thinking_budget_is_clamped_to_model_max_tokens(server, level, budget, max_tokens):
    server.push(Reply.sse(text_reply("ok"), named=True))
    await run(make_model(server, reasoning=True), ctx(), opts(reasoning=level, temperature=0.3))
    body = server.requests[0].body
    assert body["thinking"] == {"type": "enabled", "budget_tokens": budget}
    assert body["max_tokens"] == max_tokens
    assert "temperature" not in body  # incompatible with thinking


async def test_custom_thinking_budgets_and_no_thinking(server):
    server.push(Reply.sse(text_reply("ok"), named=True), Reply.sse(text_reply("ok"), named=True),
                Reply.sse(text_reply("ok"), named=True))
    model = make_model(server, reasoning=True, maxTokens=64000)
    await run(model, ctx(), opts(reasoning="low", thinkingBudgets={"low": 3000}, maxTokens=1000))
    assert server.requests[0].body["thinking"] == {"type": "enabled", "budget_tokens": 3000}
    assert server.requests[0].body["max_tokens"] == 4000
    await run(model, ctx(), opts(reasoning="off", temperature=0.5))
    assert "thinking" not in server.requests[1].body and server.requests[1].body["temperature"] == 0.5
    await run(make_model(server, reasoning=False), ctx(), opts(reasoning="high"))
    assert "thinking" not in server.requests[2].body and server.requests[2].body["max_tokens"] == 8192


async def test_request_body_shape(server):
    server.push(Reply.sse(text_reply("ok"), named=True))
    tools = [
        Tool(name="read", description="Read a file",
             parameters={"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"],
                         "additionalProperties": False}),
        Tool(name="bash", description="Run a command",
             parameters={"type": "object", "properties": {"command": {"type": "string"}}}),
    ]
    model = make_model(server)
    mine = dict(api="anthropic-messages", provider="scripted-anthropic", model="scripted-claude")
    history = [
        UserMessage(content=[TextContent(text="Look at this"), TextContent(text="  "),
                             ImageContent(data="aW1n", mimeType="image/png")], timestamp=1),
        AssistantMessage(content=[TextContent(text="Half"), ToolCall(id="toolu_x", name="bash", arguments={})],
                         stopReason="error", errorMessage="boom", **mine),  # dropped
        AssistantMessage(content=[
            ThinkingContent(thinking="pondering", thinkingSignature="SIG"),
            ThinkingContent(thinking="unsigned thought", thinkingSignature=""),
            TextContent(text="Reading both."), TextContent(text=" "),
            ToolCall(id="toolu_a", name="read", arguments={"path": "a.txt"}),
            ToolCall(id="toolu_b", name="read", arguments={"path": "b.png"})], stopReason="toolUse", **mine),
        ToolResultMessage(toolCallId="toolu_a", toolName="read", content=[TextContent(text="line1"),
                                                                          TextContent(text="line2")]),
        ToolResultMessage(toolCallId="toolu_b", toolName="read", content=[ImageContent(data="cG5n",
                                                                                       mimeType="image/png")],
                          isError=False),
        AssistantMessage(content=[ToolCall(id="toolu_c", name="bash", arguments={"command": "false"})],
                         stopReason="toolUse", **mine),
        ToolResultMessage(toolCallId="toolu_c", toolName="bash", content=[TextContent(text="exit 1")], isError=True),
        AssistantMessage(content=[TextContent(text="aborted half")], stopReason="aborted", **mine),  # dropped
        UserMessage(content="Thanks", timestamp=2),
    ]
    await run(model, ctx(*history, system="Be brief.", tools=tools), opts(headers={"x-extra": "1"}))
    req = server.requests[0]
    assert req.method == "POST" and req.path == "/v1/messages"
    assert req.headers["anthropic-beta"] == "interleaved-thinking-2025-05-14"
    assert req.headers["x-extra"] == "1"
    assert "test-key" in (req.headers.get("x-api-key", "") + req.headers.get("authorization", ""))
    body = req.body
    assert body["model"] == "scripted-claude" and body["stream"] is True and body["max_tokens"] == 8192
    assert body["system"] == [{"type": "text", "text": "Be brief.", "cache_control": EPHEMERAL}]
    assert body["tools"] == [
        {"name": "read", "description": "Read a file", "eager_input_streaming": True,
         "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}},
        {"name": "bash", "description": "Run a command", "eager_input_streaming": True,
         "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}, "required": []},
         "cache_control": EPHEMERAL}]
    assert "thinking" not in body and "temperature" not in body
    assert body["messages"] == [
        {"role": "user", "content": [
            {"type": "text", "text": "Look at this"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "aW1n"}}]},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "pondering", "signature": "SIG"},
            {"type": "text", "text": "unsigned thought"},
            {"type": "text", "text": "Reading both."},
            {"type": "tool_use", "id": "toolu_a", "name": "read", "input": {"path": "a.txt"}},
            {"type": "tool_use", "id": "toolu_b", "name": "read", "input": {"path": "b.png"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_a", "content": "line1\nline2", "is_error": False},
            {"type": "tool_result", "tool_use_id": "toolu_b", "is_error": False, "content": [
                {"type": "text", "text": "(see attached image)"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "cG5n"}}]}]},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_c", "name": "bash", "input": {"command": "false"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_c", "content": "exit 1", "is_error": True}]},
        {"role": "user", "content": [{"type": "text", "text": "Thanks", "cache_control": EPHEMERAL}]},
    ]


async def test_request_matches_pi_recording(server):
    """The second request of pi's run 14: tool result last, carrying the cache breakpoint."""
    server.push(Reply.sse(text_reply("It printed hi."), named=True))
    mine = dict(api="anthropic-messages", provider="scripted-anthropic", model="scripted-claude")
    history = [user("Run echo hi"),
               AssistantMessage(content=[TextContent(text="Running it."),
                                         ToolCall(id="toolu_01", name="bash", arguments={"command": "echo hi"})],
                                stopReason="toolUse", **mine),
               ToolResultMessage(toolCallId="toolu_01", toolName="bash", content=[TextContent(text="hi\n")])]
    await run(make_model(server), ctx(*history, system="S"), opts())
    assert server.requests[0].body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Run echo hi"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "Running it."},
                                          {"type": "tool_use", "id": "toolu_01", "name": "bash",
                                           "input": {"command": "echo hi"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01", "content": "hi\n",
                                      "is_error": False, "cache_control": EPHEMERAL}]}]


async def test_cross_model_history_and_orphaned_tool_calls(server):
    server.push(Reply.sse(text_reply("ok"), named=True))
    other = dict(api="openai-responses", provider="openai", model="gpt-5")
    history = [
        user("Go"),
        AssistantMessage(content=[ThinkingContent(thinking="other model thought", thinkingSignature="enc"),
                                  ThinkingContent(thinking="secret", thinkingSignature="x", redacted=True),
                                  ToolCall(id="call_1|fc_99", name="bash", arguments={"command": "ls"})],
                         stopReason="toolUse", **other),
        user("never mind"),
    ]
    await run(make_model(server), ctx(*history), opts())
    msgs = server.requests[0].body["messages"]
    assert msgs[1] == {"role": "assistant", "content": [
        {"type": "text", "text": "other model thought"},
        {"type": "tool_use", "id": "call_1_fc_99", "name": "bash", "input": {"command": "ls"}}]}
    assert msgs[2] == {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "call_1_fc_99", "content": "No result provided", "is_error": True}]}
    assert msgs[3]["content"][-1]["text"] == "never mind"


async def test_http_4xx(server):
    server.push(Reply.json(400, {"type": "error", "error": {"type": "invalid_request_error",
                                                            "message": "prompt is too long: 210000 tokens > 200000"}}))
    types, events, final = await run(make_model(server), ctx(), opts())
    assert types == ["start", "error"]
    assert events[-1].reason == "error"
    assert final.stopReason == "error"
    assert final.errorMessage == "400 prompt is too long: 210000 tokens > 200000"
    assert final.content == [] and final.usage.totalTokens == 0


async def test_http_5xx_overloaded(server):
    server.push(Reply.json(529, {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}))
    types, _, final = await run(make_model(server), ctx(), opts())
    assert types == ["start", "error"]
    assert final.errorMessage == "529 Overloaded"
    assert len(server.requests) == 1  # maxRetries=0: no retry inside the SDK


async def test_http_error_with_plain_text_body(server):
    server.push(Reply(status=502, headers={"content-type": "text/plain", "x-should-retry": "false"},
                      chunks=["Bad gateway"]))
    types, _, final = await run(make_model(server), ctx(), opts())
    assert types == ["start", "error"]
    assert final.errorMessage == "502 Bad gateway"


async def test_sdk_retries_when_allowed(server):
    server.push(Reply(status=503, headers={"content-type": "application/json", "retry-after-ms": "10"},
                      chunks=[json.dumps({"type": "error", "error": {"type": "api_error", "message": "busy"}})]),
                Reply.sse(text_reply("second try"), named=True))
    types, _, final = await run(make_model(server), ctx(), opts(maxRetries=1))
    assert types[-1] == "done" and final.content == [TextContent(text="second try")]
    assert len(server.requests) == 2


async def test_in_stream_error_keeps_partial_content(server):
    server.push(Reply.sse([msg_start(), block_start(0, {"type": "text", "text": ""}),
                           text_delta(0, "partial text bef"),
                           {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}],
                          named=True))
    types, events, final = await run(make_model(server), ctx(), opts())
    assert types == ["start", "text_start", "text_delta", "error"]
    assert events[-1].reason == "error"
    assert final.stopReason == "error"
    assert final.errorMessage == "overloaded_error: Overloaded"
    assert final.content == [TextContent(text="partial text bef")]
    assert final.usage.input == 28  # from message_start


async def test_refusal_is_an_error(server):
    server.push(Reply.sse(text_reply("I can't", stop="refusal"), named=True))
    types, _, final = await run(make_model(server), ctx(), opts())
    assert types == ["start", "text_start", "text_delta", "text_end", "error"]
    assert final.stopReason == "error" and "refus" in final.errorMessage
    assert final.content == [TextContent(text="I can't")]


async def test_connection_dropped_mid_stream(server):
    server.push(Reply.sse([msg_start(), block_start(0, {"type": "text", "text": ""}), text_delta(0, "Hello"), DROP],
                          named=True))
    types, _, final = await run(make_model(server), ctx(), opts())
    assert types == ["start", "text_start", "text_delta", "error"]
    assert final.stopReason == "error"
    assert final.errorMessage.startswith("Connection lost")
    assert final.content == [TextContent(text="Hello")]


async def test_stream_ending_early_is_an_error(server):
    server.push(Reply.sse([msg_start(), block_start(0, {"type": "text", "text": ""}), text_delta(0, "Hel")],
                          named=True))
    types, _, final = await run(make_model(server), ctx(), opts())
    assert types == ["start", "text_start", "text_delta", "error"]
    assert final.errorMessage.startswith("Connection lost")


async def test_connection_refused(server):
    model = make_model(server, baseUrl="http://127.0.0.1:9")
    types, _, final = await run(model, ctx(), opts())
    assert types == ["start", "error"]
    assert final.errorMessage.startswith("Connection error: could not reach http://127.0.0.1:9")


async def test_abort_mid_stream(server):
    server.push(Reply.sse([msg_start(), block_start(0, {"type": "text", "text": ""}), text_delta(0, "partial"),
                           Stall(60), text_delta(0, " never"), block_stop(0), msg_delta(), MSG_STOP], named=True))
    signal = AbortSignal()
    t0 = time.monotonic()
    types, last = await abort_soon_after_text_deltas(make_model(server), ctx(), opts(signal=signal), signal)
    assert time.monotonic() - t0 < 30  # bounds a hang: the event types show the stall was cut short
    assert types == ["start", "text_start", "text_delta", "text_end", "error"]
    assert last.reason == "aborted"
    assert last.error.stopReason == "aborted"
    assert last.error.errorMessage == "Request was aborted"
    assert last.error.content == [TextContent(text="partial")]


async def test_missing_api_key(server):
    types, _, final = await run(make_model(server, provider="anthropic"), ctx(), StreamOptions(maxRetries=0))
    assert types == ["start", "error"]
    assert final.errorMessage.startswith("No API key for provider anthropic: set ANTHROPIC_API_KEY")
    assert server.requests == []


async def test_api_key_from_environment(server, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "env-key")
    server.push(Reply.sse(text_reply("ok"), named=True))
    types, _, _ = await run(make_model(server, provider="anthropic"), ctx(), StreamOptions(maxRetries=0))
    assert types[-1] == "done"
    h = server.requests[0].headers
    assert "env-key" in (h.get("x-api-key", "") + h.get("authorization", ""))


async def test_line_separator_inside_text_is_content(server):
    server.push(Reply.sse([msg_start(), block_start(0, {"type": "text", "text": ""}),
                           "event: content_block_delta\ndata: " + json.dumps(
                               text_delta(0, "a\u2028b\u2029c"), ensure_ascii=False) + "\r\n\r\n",
                           block_stop(0), msg_delta(), MSG_STOP], named=True))
    _, _, final = await run(make_model(server), ctx(), opts())
    assert final.content == [TextContent(text="a\u2028b\u2029c")]


def test_import_does_not_load_sdks():
    code = ("import sys, pisces, pisces.ai.stream, pisces.ai.providers.anthropic, pisces.ai.providers.google\n"
            "bad = [m for m in sys.modules if m == 'anthropic' or m.startswith(('anthropic.', 'google.genai'))]\n"
            "assert not bad, bad\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
