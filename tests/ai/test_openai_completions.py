"""openai-completions through pisces.ai.stream.stream and the real SDK, against the scripted SSE server."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time

import msgspec
import pytest
from provider_helpers import PNG, ZERO_USAGE, brief, collect, context_factory, final, kinds, options_factory

from pisces.ai.abort import AbortSignal
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
    UserMessage,
    event_type,
)
from scripted_server import DROP, Reply, Stall


def make_model(server, **kw) -> Model:
    base = dict(id="scripted-model", name="Scripted Model", api="openai-completions", provider="scripted",
                baseUrl=server.url + "/v1", reasoning=False, input=["text", "image"],
                cost=ModelCost(input=3, output=15, cacheRead=0.3, cacheWrite=3.75), contextWindow=128000,
                maxTokens=16384)
    base.update(kw)
    return Model(**base)


def reasoning_model(server, **kw) -> Model:
    return make_model(server, id="scripted-reasoning", name="scripted-reasoning", reasoning=True, input=["text"],
                      cost=ModelCost(input=1, output=2, cacheRead=0.1, cacheWrite=1), contextWindow=64000,
                      maxTokens=8000, **kw)


def chunk(delta: dict | None = None, finish: str | None = None, cid: str = "chatcmpl-scripted-1") -> dict:
    return {"id": cid, "object": "chat.completion.chunk", "created": 0, "model": "scripted-model",
            "choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish}]}


def usage_chunk(prompt: int, completion: int, cached: int = 0, cid: str = "chatcmpl-scripted-1") -> dict:
    usage: dict = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
    if cached:
        usage["prompt_tokens_details"] = {"cached_tokens": cached}
    return {"id": cid, "object": "chat.completion.chunk", "created": 0, "model": "scripted-model", "choices": [],
            "usage": usage}


opts = options_factory("scripted-key")
user, ctx = context_factory("You are a test.")


async def run(model, context, options=None, on_event=None):
    return await collect(model, context, options or opts(), on_event)


def usage_dict(msg: AssistantMessage) -> dict:
    return msgspec.to_builtins(msg.usage)


# ---------------------------------------------------------------------------------------------
async def test_text_reply(server):
    server.push(Reply.sse([chunk({"role": "assistant", "content": ""}), chunk({"content": "Hello! I am a sc"}),
                           chunk({"content": "ripted model."}), chunk({}, "stop"), usage_chunk(1200, 9)], done=True))
    events = await run(make_model(server), ctx(user("hi")))
    assert kinds(events) == ["start", "text_start", "text_delta", "text_delta", "text_end", "done"]
    assert brief(events) == [
        {"type": "text_start", "contentIndex": 0},
        {"type": "text_delta", "contentIndex": 0, "delta": "Hello! I am a sc"},
        {"type": "text_delta", "contentIndex": 0, "delta": "ripted model."},
        {"type": "text_end", "contentIndex": 0, "content": "Hello! I am a scripted model."},
    ]
    msg = final(events)
    assert events[-1].reason == "stop"
    assert msgspec.to_builtins(msg.content) == [{"type": "text", "text": "Hello! I am a scripted model."}]
    assert msg.stopReason == "stop" and msg.responseId == "chatcmpl-scripted-1"
    assert msg.api == "openai-completions" and msg.provider == "scripted" and msg.model == "scripted-model"
    assert usage_dict(msg) == {"input": 1200, "output": 9, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 1209,
                               "cost": {"input": 0.0036, "output": 0.000135, "cacheRead": 0, "cacheWrite": 0,
                                        "total": 0.003735}}
    assert events[0].partial is msg
    req = server.requests[0]
    assert req.path == "/v1/chat/completions"
    assert req.headers["authorization"] == "Bearer scripted-key"
    assert req.body == {"model": "scripted-model",
                        "messages": [{"role": "system", "content": "You are a test."},
                                     {"role": "user", "content": [{"type": "text", "text": "hi"}]}],
                        "stream": True, "stream_options": {"include_usage": True}, "store": False,
                        "max_completion_tokens": 16384}


async def test_thinking_then_text_ends_after_stream(server):
    """Run 18: reasoning_content -> thinking block; every *_end comes after the stream, in content order."""
    server.push(Reply.sse([
        chunk({"role": "assistant", "content": ""}),
        chunk({"reasoning_content": "Let me think abo"}), chunk({"reasoning_content": "ut this carefull"}),
        chunk({"reasoning_content": "y."}), chunk({"content": "Thought-through "}), chunk({"content": "answer."}),
        chunk({}, "stop"), usage_chunk(900, 40, cached=300)], done=True))
    events = await run(reasoning_model(server), ctx(user("think first")), opts(reasoning="low"))
    assert brief(events) == [
        {"type": "thinking_start", "contentIndex": 0},
        {"type": "thinking_delta", "contentIndex": 0, "delta": "Let me think abo"},
        {"type": "thinking_delta", "contentIndex": 0, "delta": "ut this carefull"},
        {"type": "thinking_delta", "contentIndex": 0, "delta": "y."},
        {"type": "text_start", "contentIndex": 1},
        {"type": "text_delta", "contentIndex": 1, "delta": "Thought-through "},
        {"type": "text_delta", "contentIndex": 1, "delta": "answer."},
        {"type": "thinking_end", "contentIndex": 0, "content": "Let me think about this carefully."},
        {"type": "text_end", "contentIndex": 1, "content": "Thought-through answer."},
    ]
    msg = final(events)
    assert msgspec.to_builtins(msg.content) == [
        {"type": "thinking", "thinking": "Let me think about this carefully.", "thinkingSignature": "reasoning_content"},
        {"type": "text", "text": "Thought-through answer."}]
    assert usage_dict(msg) == {"input": 600, "output": 40, "cacheRead": 300, "cacheWrite": 0, "totalTokens": 940,
                               "cost": {"input": 0.0006, "output": 7.999999999999999e-05,
                                        "cacheRead": 3.0000000000000004e-05, "cacheWrite": 0,
                                        "total": 0.0007099999999999999}}
    body = server.requests[0].body
    assert body["messages"][0] == {"role": "developer", "content": "You are a test."}
    assert body["reasoning_effort"] == "low" and body["max_completion_tokens"] == 8000


@pytest.mark.parametrize("field", ["reasoning", "reasoning_text"])
async def test_other_reasoning_fields(server, field):
    server.push(Reply.sse([chunk({field: "hmm"}), chunk({"content": "ok"}), chunk({}, "stop")], done=True))
    events = await run(reasoning_model(server), ctx(user("q")))
    assert kinds(events) == ["start", "thinking_start", "thinking_delta", "text_start", "text_delta",
                             "thinking_end", "text_end", "done"]
    assert msgspec.to_builtins(final(events).content)[0] == {"type": "thinking", "thinking": "hmm",
                                                             "thinkingSignature": field}
    assert "reasoning_effort" not in server.requests[0].body  # reasoning off


async def test_tool_call_streamed_in_several_deltas(server):
    tool = Tool(name="bash", description="Run a command", parameters={"type": "object", "properties": {
        "command": {"type": "string"}}, "required": ["command"]})
    server.push(Reply.sse([
        chunk({"role": "assistant", "content": ""}),
        chunk({"tool_calls": [{"index": 0, "id": "call_01", "type": "function",
                               "function": {"name": "bash", "arguments": ""}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"command":'}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"echo h'}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": 'i"}'}}]}),
        chunk({}, "tool_calls"), usage_chunk(1210, 20)], done=True))
    seen_args = []
    events = await run(make_model(server), ctx(user("Run echo hi"), tools=[tool]),
                       on_event=lambda ev, _: seen_args.append(dict(ev.partial.content[0].arguments))
                       if event_type(ev) == "toolcall_delta" else None)
    assert brief(events) == [
        {"type": "toolcall_start", "contentIndex": 0},
        {"type": "toolcall_delta", "contentIndex": 0, "delta": ""},
        {"type": "toolcall_delta", "contentIndex": 0, "delta": '{"command":'},
        {"type": "toolcall_delta", "contentIndex": 0, "delta": '"echo h'},
        {"type": "toolcall_delta", "contentIndex": 0, "delta": 'i"}'},
        {"type": "toolcall_end", "contentIndex": 0,
         "toolCall": {"type": "toolCall", "id": "call_01", "name": "bash", "arguments": {"command": "echo hi"}}},
    ]
    assert seen_args == [{}, {}, {"command": "echo h"}, {"command": "echo hi"}]  # partial JSON as it streams
    msg = final(events)
    assert events[-1].reason == "toolUse" and msg.stopReason == "toolUse"
    assert usage_dict(msg) == {"input": 1210, "output": 20, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 1230,
                               "cost": {"input": 0.00363, "output": 0.00030000000000000003, "cacheRead": 0,
                                        "cacheWrite": 0, "total": 0.00393}}
    assert server.requests[0].body["tools"] == [{"type": "function", "function": {
        "name": "bash", "description": "Run a command", "parameters": tool.parameters, "strict": False}}]


async def test_text_then_two_tool_calls(server):
    server.push(Reply.sse([
        chunk({"content": "Running both."}),
        chunk({"tool_calls": [{"index": 0, "id": "call_a", "function": {"name": "ls", "arguments": "{}"}}]}),
        chunk({"tool_calls": [{"index": 1, "id": "call_b", "function": {"name": "bash", "arguments": ""}}]}),
        chunk({"tool_calls": [{"index": 1, "function": {"arguments": '{"command":"pwd"}'}}]}),
        chunk({}, "stop")], done=True))  # some servers say "stop" even with tool calls
    events = await run(make_model(server), ctx(user("go")))
    assert kinds(events) == ["start", "text_start", "text_delta", "toolcall_start", "toolcall_delta",
                             "toolcall_start", "toolcall_delta", "toolcall_delta", "text_end", "toolcall_end",
                             "toolcall_end", "done"]
    assert [e.contentIndex for e in events[-4:-1]] == [0, 1, 2]
    msg = final(events)
    assert msg.stopReason == "toolUse"
    assert msgspec.to_builtins(msg.content) == [
        {"type": "text", "text": "Running both."},
        {"type": "toolCall", "id": "call_a", "name": "ls", "arguments": {}},
        {"type": "toolCall", "id": "call_b", "name": "bash", "arguments": {"command": "pwd"}}]
    assert usage_dict(msg) == ZERO_USAGE  # no usage chunk


@pytest.mark.parametrize("finish,reason", [("length", "length"), ("function_call", "toolUse"), ("end", "stop")])
async def test_finish_reasons(server, finish, reason):
    server.push(Reply.sse([chunk({"content": "x"}), chunk({}, finish)], done=True))
    events = await run(make_model(server), ctx(user("q")))
    assert kinds(events)[-1] == "done" and events[-1].reason == reason == final(events).stopReason


async def test_content_filter_is_an_error(server):
    server.push(Reply.sse([chunk({"content": "x"}), chunk({}, "content_filter")], done=True))
    events = await run(make_model(server), ctx(user("q")))
    assert kinds(events) == ["start", "text_start", "text_delta", "text_end", "error"]
    msg = final(events)
    assert msg.stopReason == "error" and events[-1].reason == "error"
    assert msg.errorMessage == "The provider stopped the response (finish_reason: content_filter)"


# ---------------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("reply,message", [
    (Reply.json(400, {"error": {"message": "Bad request: invalid thing", "type": "invalid_request_error"}}),
     "400 Bad request: invalid thing"),
    (Reply(status=503, headers={"content-type": "text/plain", "x-should-retry": "false"},
           chunks=["Service Unavailable"]), "503 Service Unavailable"),
    (Reply.json(503, {"error": {"message": "Service Unavailable", "type": "server_error"}}),
     "503 Service Unavailable"),
    (Reply.json(401, {"error": {"code": "invalid_api_key"}}), '401 {"code":"invalid_api_key"}'),
    (Reply.json(422, {"detail": "model not found"}), "422 model not found"),
    (Reply(status=500, headers={"x-should-retry": "false"}, chunks=[]), "500 status code (no body)"),
])
async def test_http_errors(server, reply, message):
    server.push(reply)
    events = await run(make_model(server), ctx(user("q")))
    assert kinds(events) == ["start", "error"]
    msg = final(events)
    assert events[-1].reason == "error" and msg.stopReason == "error"
    assert msg.errorMessage == message
    assert msg.content == [] and usage_dict(msg) == ZERO_USAGE
    assert len(server.requests) == 1  # maxRetries=0: the SDK did not retry


async def test_sdk_retries_when_allowed(server):
    server.push(Reply(status=503, headers={"retry-after-ms": "10"}, chunks=["busy"]),
                Reply.sse([chunk({"content": "ok"}), chunk({}, "stop")], done=True))
    events = await run(make_model(server), ctx(user("q")), opts(maxRetries=1))
    assert kinds(events)[-1] == "done" and len(server.requests) == 2


async def test_in_stream_error_keeps_partial_content(server):
    server.push(Reply.sse([chunk({"content": "partial text "}), chunk({"content": "bef"}),
                           {"error": {"message": "Overloaded", "type": "overloaded_error"}}]))
    events = await run(make_model(server), ctx(user("q")))
    assert kinds(events) == ["start", "text_start", "text_delta", "text_delta", "error"]
    msg = final(events)
    assert msg.stopReason == "error" and msg.errorMessage == "Overloaded"  # as sent, no "type: " prefix
    assert msgspec.to_builtins(msg.content) == [{"type": "text", "text": "partial text bef"}]


async def test_in_stream_error_without_type(server):
    server.push(Reply.sse([chunk({"content": "a"}), {"error": {"message": "scripted stream error"}}]))
    events = await run(make_model(server), ctx(user("q")))
    assert final(events).errorMessage == "scripted stream error"


@pytest.mark.parametrize("body,message", [
    ({"error": {"message": "upstream failed", "type": "proxy_error"}}, "upstream failed"),  # as sent
    ({"id": "x", "choices": []}, "The server answered with JSON instead of an event stream; check that the base "
                                 "URL points at an OpenAI-compatible API"),
])
async def test_json_200_instead_of_a_stream(server, body, message):
    server.push(Reply.json(200, body))
    events = await run(make_model(server), ctx(user("q")))
    assert kinds(events) == ["start", "error"]
    assert final(events).errorMessage == message


async def test_connection_dropped_mid_stream(server):
    server.push(Reply.sse([chunk({"content": "Hello"}),
                           chunk({"tool_calls": [{"index": 0, "id": "c1", "function": {"name": "bash",
                                                                                        "arguments": '{"comm'}}]}),
                           DROP]))
    events = await run(make_model(server), ctx(user("q")))
    assert kinds(events) == ["start", "text_start", "text_delta", "toolcall_start", "toolcall_delta", "error"]
    msg = final(events)
    assert msg.stopReason == "error"
    assert msg.errorMessage.startswith("Connection lost: ")
    assert "incomplete chunked read" in msg.errorMessage
    assert msgspec.to_builtins(msg.content) == [{"type": "text", "text": "Hello"},
                                                {"type": "toolCall", "id": "c1", "name": "bash", "arguments": {}}]


async def test_stream_cut_short_without_finish_reason(server):
    server.push(Reply.sse([chunk({"content": "Hel"})]))  # a clean end of body, but no finish_reason nor [DONE]
    events = await run(make_model(server), ctx(user("q")))
    assert kinds(events) == ["start", "text_start", "text_delta", "error"]
    msg = final(events)
    assert msg.errorMessage == "Connection lost: the stream ended before the response was complete"
    assert msgspec.to_builtins(msg.content) == [{"type": "text", "text": "Hel"}]


async def test_done_marker_without_finish_reason_is_a_stop(server):
    server.push(Reply.sse([chunk({"content": "Hi"})], done=True))
    events = await run(make_model(server), ctx(user("q")))
    assert kinds(events) == ["start", "text_start", "text_delta", "text_end", "done"]
    assert events[-1].reason == "stop"


async def test_connection_refused():
    model = Model(id="m", name="m", api="openai-completions", provider="scripted", baseUrl="http://127.0.0.1:9/v1")
    events = await run(model, ctx(user("q")))
    assert kinds(events) == ["start", "error"]
    assert final(events).errorMessage.startswith("Connection error: could not reach http://127.0.0.1:9/v1")


async def test_missing_api_key_is_an_error_event(server):
    events = await run(make_model(server, provider="openai"), ctx(user("q")), StreamOptions(maxRetries=0))
    assert kinds(events) == ["start", "error"]
    agent_dir = os.environ["PISCES_CODING_AGENT_DIR"]  # set per test by conftest
    assert final(events).errorMessage == ("No API key for provider openai: set OPENAI_API_KEY or add it to "
                                          f"{agent_dir}/auth.json")
    assert server.requests == []


async def test_api_key_from_environment(server, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "env-key")
    server.push(Reply.sse([chunk({"content": "ok"}), chunk({}, "stop")], done=True))
    events = await run(make_model(server, provider="openai"), ctx(user("q")), StreamOptions(maxRetries=0))
    assert kinds(events)[-1] == "done"
    assert server.requests[0].headers["authorization"] == "Bearer env-key"


async def test_abort_mid_stream_keeps_partial_text(server):
    server.push(Reply.sse([chunk({"content": "This i"}), chunk({"content": "s a sl"}), Stall(60),
                           chunk({"content": "never"}), chunk({}, "stop")], done=True))
    signal = AbortSignal()

    def on_event(ev, events):
        if kinds(events).count("text_delta") == 2:
            signal.abort()

    t0 = time.monotonic()
    events = await run(make_model(server), ctx(user("q")), opts(signal=signal), on_event)
    assert time.monotonic() - t0 < 30  # bounds a hang: the event types show the stall was cut short
    assert kinds(events) == ["start", "text_start", "text_delta", "text_delta", "text_end", "error"]
    assert events[-2].content == "This is a sl"
    msg = final(events)
    assert events[-1].reason == "aborted" and msg.stopReason == "aborted"
    assert msg.errorMessage == "Request was aborted"
    assert msgspec.to_builtins(msg.content) == [{"type": "text", "text": "This is a sl"}]
    assert usage_dict(msg) == ZERO_USAGE


async def test_idle_timeout_ends_a_stalled_stream(server):
    server.push(Reply.sse([chunk({"content": "a"}), Stall(60), chunk({}, "stop")], done=True))
    t0 = time.monotonic()
    events = await run(make_model(server), ctx(user("q")), opts(idleTimeoutMs=2000))
    assert time.monotonic() - t0 < 30  # bounds a hang: the event types show the stall was cut short
    assert kinds(events) == ["start", "text_start", "text_delta", "error"]
    assert "stalled" in final(events).errorMessage


# ---------------------------------------------------------------------------------------------
# Request shape
# ---------------------------------------------------------------------------------------------
def _assistant(content, stop="stop", model="scripted-model", provider="scripted", **kw) -> AssistantMessage:
    return AssistantMessage(content=content, api="openai-completions", provider=provider, model=model,
                            stopReason=stop, **kw)


async def test_request_messages_conversion(server):
    server.push(Reply.sse([chunk({"content": "ok"}), chunk({}, "stop")], done=True))
    messages = [
        UserMessage(content="plain string"),
        UserMessage(content=[TextContent(text="What is in this image?"), ImageContent(data=PNG, mimeType="image/png")]),
        _assistant([ThinkingContent(thinking="Let me see.", thinkingSignature="reasoning_content"),
                    TextContent(text="I'll look."), TextContent(text="  "), TextContent(text=" Now."),
                    ToolCall(id="call_1", name="read", arguments={"path": "a.png"})], stop="toolUse"),
        ToolResultMessage(toolCallId="call_1", toolName="read",
                          content=[ImageContent(data=PNG, mimeType="image/png")]),
        _assistant([TextContent(text="half an ans")], stop="error", errorMessage="503 Service Unavailable"),
        _assistant([], stop="aborted"),
        UserMessage(content=[TextContent(text="again")]),
        _assistant([ToolCall(id="call_2", name="bash", arguments={"command": "ls -1"})], stop="toolUse"),
        ToolResultMessage(toolCallId="call_2", toolName="bash", content=[TextContent(text="a\n"),
                                                                         TextContent(text="b")]),
        _assistant([ToolCall(id="call_3", name="bash", arguments={})], stop="toolUse"),
        UserMessage(content=[TextContent(text="never mind")]),
        _assistant([TextContent(text="")]),  # nothing left to send: dropped
        _assistant([ThinkingContent(thinking="foreign", thinkingSignature="sig=="), TextContent(text="From claude.")],
                   model="claude", provider="anthropic"),
        UserMessage(content=[TextContent(text="last")]),
    ]
    await run(make_model(server), ctx(*messages))
    assert server.requests[0].body["messages"] == [
        {"role": "system", "content": "You are a test."},
        {"role": "user", "content": "plain string"},
        {"role": "user", "content": [{"type": "text", "text": "What is in this image?"},
                                     {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}}]},
        {"role": "assistant", "content": "I'll look. Now.", "reasoning_content": "Let me see.",
         "tool_calls": [{"id": "call_1", "type": "function",
                         "function": {"name": "read", "arguments": '{"path":"a.png"}'}}]},
        {"role": "tool", "content": "(see attached image)", "tool_call_id": "call_1"},
        {"role": "user", "content": [{"type": "text", "text": "Attached image(s) from tool result:"},
                                     {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}}]},
        {"role": "user", "content": [{"type": "text", "text": "again"}]},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_2", "type": "function", "function": {"name": "bash", "arguments": '{"command":"ls -1"}'}}]},
        {"role": "tool", "content": "a\n\nb", "tool_call_id": "call_2"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_3", "type": "function", "function": {"name": "bash", "arguments": "{}"}}]},
        {"role": "tool", "content": "No result provided", "tool_call_id": "call_3"},
        {"role": "user", "content": [{"type": "text", "text": "never mind"}]},
        {"role": "assistant", "content": "foreignFrom claude."},
        {"role": "user", "content": [{"type": "text", "text": "last"}]},
    ]


async def test_text_only_model_drops_images(server):
    server.push(Reply.sse([chunk({"content": "ok"}), chunk({}, "stop")], done=True))
    messages = [
        UserMessage(content=[ImageContent(data=PNG, mimeType="image/png")]),  # nothing left: dropped
        UserMessage(content=[TextContent(text="see"), ImageContent(data=PNG, mimeType="image/png")]),
        _assistant([ToolCall(id="c", name="read", arguments={})], stop="toolUse", model="m2"),
        ToolResultMessage(toolCallId="c", toolName="read", content=[ImageContent(data=PNG, mimeType="image/png")]),
    ]
    await run(make_model(server, input=["text"], id="m2"), ctx(*messages, system=""))
    assert server.requests[0].body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "see"}]},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "read", "arguments": "{}"}}]},
        {"role": "tool", "content": "(see attached image)", "tool_call_id": "c"},
    ]


async def test_responses_style_tool_call_ids_are_shortened(server):
    server.push(Reply.sse([chunk({"content": "ok"}), chunk({}, "stop")], done=True))
    long_id = "call_abc+/=|fc_" + "x" * 300
    messages = [user("q"),
                AssistantMessage(content=[ToolCall(id=long_id, name="ls", arguments={})], api="openai-responses",
                                 provider="openai", model="gpt-5", stopReason="toolUse"),
                ToolResultMessage(toolCallId=long_id, toolName="ls", content=[TextContent(text="ok")])]
    await run(make_model(server), ctx(*messages))
    sent = server.requests[0].body["messages"]
    assert sent[2]["tool_calls"][0]["id"] == "call_abc___"
    assert sent[3] == {"role": "tool", "content": "ok", "tool_call_id": "call_abc___"}


async def test_compat_and_options(server):
    server.push(Reply.sse([chunk({"content": "ok"}), chunk({}, "stop")], done=True))
    model = reasoning_model(server, compat={"supportsStore": False, "maxTokensField": "max_tokens",
                                            "supportsDeveloperRole": False, "supportsStrictMode": False},
                            headers={"x-model-header": "1"})
    tool = Tool(name="t", description="d", parameters={"type": "object"})
    await run(model, ctx(user("q"), tools=[tool]),
              opts(reasoning="xhigh", maxTokens=100, temperature=0.5, headers={"x-extra": "yes"}))
    req = server.requests[0]
    body = req.body
    assert "store" not in body and "max_completion_tokens" not in body
    assert body["max_tokens"] == 100 and body["temperature"] == 0.5
    assert body["reasoning_effort"] == "high"  # xhigh is not in the model's thinkingLevelMap
    assert body["messages"][0]["role"] == "system"
    assert body["tools"] == [{"type": "function", "function": {"name": "t", "description": "d",
                                                               "parameters": {"type": "object"}}}]
    assert req.headers["x-model-header"] == "1" and req.headers["x-extra"] == "yes"


async def test_thinking_level_map_and_non_standard_host(server):
    server.push(Reply.sse([chunk({"content": "ok"}), chunk({}, "stop")], done=True))
    model = reasoning_model(server, thinkingLevelMap={"xhigh": "max", "minimal": "low"})
    await run(model, ctx(user("q")), opts(reasoning="xhigh"))
    assert server.requests[0].body["reasoning_effort"] == "max"
    server.push(Reply.sse([chunk({"content": "ok"}), chunk({}, "stop")], done=True))
    await run(reasoning_model(server, provider="cerebras"), ctx(user("q")), opts(reasoning="minimal"))
    body = server.requests[1].body
    assert "store" not in body and body["messages"][0]["role"] == "system" and body["reasoning_effort"] == "minimal"


async def test_usage_with_cache_writes_and_response_model(server):
    server.push(Reply.sse([
        {**chunk({"content": "ok"}, cid="gen-1"), "model": "provider/real-model"}, chunk({}, "stop", cid="gen-1"),
        {"id": "gen-1", "choices": [], "usage": {"prompt_tokens": 1000, "completion_tokens": 50,
                                                  "prompt_tokens_details": {"cached_tokens": 400,
                                                                            "cache_write_tokens": 100}}}],
        done=True))
    events = await run(make_model(server), ctx(user("q")))
    msg = final(events)
    assert msg.responseId == "gen-1" and msg.responseModel == "provider/real-model"
    assert usage_dict(msg) == {"input": 600, "output": 50, "cacheRead": 300, "cacheWrite": 100, "totalTokens": 1050,
                               "cost": {"input": 0.0018, "output": 0.00075, "cacheRead": 8.999999999999999e-05,
                                        "cacheWrite": 0.000375, "total": 0.003015}}


async def test_u2028_and_crlf_in_sse(server):
    text = "line\u2028sep \u00e9"
    body = ("data: " + msgspec.json.encode(chunk({"content": text})).decode() + "\r\n\r\n"
            + "data: " + msgspec.json.encode(chunk({}, "stop")).decode() + "\r\n\r\ndata: [DONE]\r\n\r\n")
    server.push(Reply.sse([body]))
    events = await run(make_model(server), ctx(user("q")))
    assert final(events).content[0].text == text


def test_import_does_not_load_the_sdk():
    code = ("import sys, pisces, pisces.ai.stream, pisces.ai.providers.openai_completions, "
            "pisces.ai.providers.openai_responses; "
            "bad = [m for m in ('openai', 'httpx2', 'httpx') if m in sys.modules]; "
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)


async def test_cancellation_is_not_swallowed(server):
    from pisces.ai.providers import openai_completions

    server.push(Reply.sse([chunk({"content": "a"}), Stall(5)]))

    async def consume():
        async for _ in openai_completions.stream(make_model(server), ctx(user("q")), opts()):
            pass

    task = asyncio.ensure_future(consume())
    await asyncio.sleep(0.3)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
