"""openai-responses through pisces.ai.stream.stream and the real SDK, against the scripted SSE server."""

from __future__ import annotations

import json
import time

import msgspec
import pytest
from provider_helpers import PNG, ZERO_USAGE, brief, collect, context_factory, final, kinds, options_factory

from pisces.ai.abort import AbortSignal
from pisces.ai.providers.openai_responses import short_hash
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
    base = dict(id="gpt-test", name="GPT test", api="openai-responses", provider="openai",
                baseUrl=server.url + "/v1", reasoning=False, input=["text", "image"],
                cost=ModelCost(input=1.25, output=10, cacheRead=0.125, cacheWrite=0), contextWindow=400000,
                maxTokens=128000)
    base.update(kw)
    return Model(**base)


opts = options_factory("sk-test")
user, ctx = context_factory("You are a test.")


async def run(model, context, options=None, on_event=None):
    return await collect(model, context, options or opts(), on_event)


# --- Responses API events --------------------------------------------------------------------
def created(rid="resp_1"):
    return {"type": "response.created", "sequence_number": 0,
            "response": {"id": rid, "object": "response", "status": "in_progress", "output": []}}


def completed(input_tokens=100, output_tokens=20, cached=0, status="completed", rid="resp_1"):
    return {"type": "response.completed" if status == "completed" else "response.incomplete",
            "response": {"id": rid, "object": "response", "status": status,
                         "usage": {"input_tokens": input_tokens, "input_tokens_details": {"cached_tokens": cached},
                                   "output_tokens": output_tokens,
                                   "output_tokens_details": {"reasoning_tokens": 0},
                                   "total_tokens": input_tokens + output_tokens}}}


def message_item(text_deltas, item_id="msg_1", index=0):
    text = "".join(text_deltas)
    evs = [{"type": "response.output_item.added", "output_index": index,
            "item": {"id": item_id, "type": "message", "status": "in_progress", "role": "assistant", "content": []}},
           {"type": "response.content_part.added", "item_id": item_id, "output_index": index, "content_index": 0,
            "part": {"type": "output_text", "text": "", "annotations": []}}]
    evs += [{"type": "response.output_text.delta", "item_id": item_id, "output_index": index, "content_index": 0,
             "delta": d} for d in text_deltas]
    evs += [{"type": "response.output_text.done", "item_id": item_id, "output_index": index, "content_index": 0,
             "text": text},
            {"type": "response.content_part.done", "item_id": item_id, "output_index": index, "content_index": 0,
             "part": {"type": "output_text", "text": text, "annotations": []}},
            {"type": "response.output_item.done", "output_index": index,
             "item": {"id": item_id, "type": "message", "status": "completed", "role": "assistant",
                      "content": [{"type": "output_text", "text": text, "annotations": []}]}}]
    return evs


REASONING_ITEM = {"id": "rs_1", "type": "reasoning", "encrypted_content": "ENC==",
                  "summary": [{"type": "summary_text", "text": "First, look."},
                              {"type": "summary_text", "text": "Then answer."}]}


def reasoning_item():
    evs = [{"type": "response.output_item.added", "output_index": 0,
            "item": {"id": "rs_1", "type": "reasoning", "summary": []}}]
    for i, parts in enumerate([["First, ", "look."], ["Then answer."]]):
        evs.append({"type": "response.reasoning_summary_part.added", "item_id": "rs_1", "output_index": 0,
                    "summary_index": i, "part": {"type": "summary_text", "text": ""}})
        evs += [{"type": "response.reasoning_summary_text.delta", "item_id": "rs_1", "output_index": 0,
                 "summary_index": i, "delta": d} for d in parts]
        evs.append({"type": "response.reasoning_summary_part.done", "item_id": "rs_1", "output_index": 0,
                    "summary_index": i, "part": {"type": "summary_text", "text": "".join(parts)}})
    evs.append({"type": "response.output_item.done", "output_index": 0, "item": REASONING_ITEM})
    return evs


def function_call_item(arg_deltas, call_id="call_1", item_id="fc_1", name="bash", index=0):
    args = "".join(arg_deltas)
    evs = [{"type": "response.output_item.added", "output_index": index,
            "item": {"id": item_id, "type": "function_call", "status": "in_progress", "call_id": call_id,
                     "name": name, "arguments": ""}}]
    evs += [{"type": "response.function_call_arguments.delta", "item_id": item_id, "output_index": index,
             "delta": d} for d in arg_deltas]
    evs += [{"type": "response.function_call_arguments.done", "item_id": item_id, "output_index": index,
             "arguments": args},
            {"type": "response.output_item.done", "output_index": index,
             "item": {"id": item_id, "type": "function_call", "status": "completed", "call_id": call_id,
                      "name": name, "arguments": args}}]
    return evs


# ---------------------------------------------------------------------------------------------
async def test_text_reply(server):
    server.push(Reply.sse([created(), *message_item(["Hello ", "there."]), completed(100, 20)], named=True))
    events = await run(make_model(server), ctx(user("hi")))
    assert brief(events) == [
        {"type": "text_start", "contentIndex": 0},
        {"type": "text_delta", "contentIndex": 0, "delta": "Hello "},
        {"type": "text_delta", "contentIndex": 0, "delta": "there."},
        {"type": "text_end", "contentIndex": 0, "content": "Hello there."},
    ]
    assert kinds(events)[0] == "start" and kinds(events)[-1] == "done"
    msg = final(events)
    assert events[-1].reason == "stop" and msg.stopReason == "stop"
    assert msgspec.to_builtins(msg.content) == [{"type": "text", "text": "Hello there.",
                                                 "textSignature": '{"v":1,"id":"msg_1"}'}]
    assert msg.responseId == "resp_1" and msg.api == "openai-responses" and msg.provider == "openai"
    assert msgspec.to_builtins(msg.usage) == {
        "input": 100, "output": 20, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 120,
        "cost": {"input": 0.000125, "output": 0.0002, "cacheRead": 0, "cacheWrite": 0, "total": 0.000325}}
    req = server.requests[0]
    assert req.path == "/v1/responses" and req.headers["authorization"] == "Bearer sk-test"
    assert req.body == {"model": "gpt-test",
                        "input": [{"role": "system", "content": "You are a test."},
                                  {"role": "user", "content": [{"type": "input_text", "text": "hi"}]}],
                        "stream": True, "store": False, "max_output_tokens": 32000}


async def test_reasoning_then_text(server):
    server.push(Reply.sse([created(), *reasoning_item(), *message_item(["Done."], index=1),
                           completed(1000, 300, cached=600)], named=True))
    model = make_model(server, reasoning=True)
    events = await run(model, ctx(user("think")), opts(reasoning="medium", sessionId="sess-1"))
    assert brief(events) == [
        {"type": "thinking_start", "contentIndex": 0},
        {"type": "thinking_delta", "contentIndex": 0, "delta": "First, "},
        {"type": "thinking_delta", "contentIndex": 0, "delta": "look."},
        {"type": "thinking_delta", "contentIndex": 0, "delta": "\n\n"},
        {"type": "thinking_delta", "contentIndex": 0, "delta": "Then answer."},
        {"type": "thinking_delta", "contentIndex": 0, "delta": "\n\n"},
        {"type": "thinking_end", "contentIndex": 0, "content": "First, look.\n\nThen answer."},
        {"type": "text_start", "contentIndex": 1},
        {"type": "text_delta", "contentIndex": 1, "delta": "Done."},
        {"type": "text_end", "contentIndex": 1, "content": "Done."},
    ]
    msg = final(events)
    thinking = msg.content[0]
    assert thinking.thinking == "First, look.\n\nThen answer."
    assert json.loads(thinking.thinkingSignature) == REASONING_ITEM
    assert msgspec.to_builtins(msg.usage) == {
        "input": 400, "output": 300, "cacheRead": 600, "cacheWrite": 0, "totalTokens": 1300,
        "cost": {"input": 0.0005, "output": 0.003, "cacheRead": 7.5e-05, "cacheWrite": 0, "total": 0.003575}}
    body = server.requests[0].body
    assert body["input"][0] == {"role": "developer", "content": "You are a test."}
    assert body["reasoning"] == {"effort": "medium", "summary": "auto"}
    assert body["include"] == ["reasoning.encrypted_content"]
    assert body["prompt_cache_key"] == "sess-1"


async def test_tool_call_streamed_in_several_deltas(server):
    tool = Tool(name="bash", description="Run a command", parameters={"type": "object", "properties": {
        "command": {"type": "string"}}})
    server.push(Reply.sse([created(), *message_item(["Running."]),
                           *function_call_item(['{"comm', 'and":"ec', 'ho hi"}'], index=1),
                           completed(50, 10)], named=True))
    seen = []
    events = await run(make_model(server), ctx(user("go"), tools=[tool]),
                       on_event=lambda ev, _: seen.append(dict(ev.partial.content[1].arguments))
                       if event_type(ev) == "toolcall_delta" else None)
    assert brief(events) == [
        {"type": "text_start", "contentIndex": 0},
        {"type": "text_delta", "contentIndex": 0, "delta": "Running."},
        {"type": "text_end", "contentIndex": 0, "content": "Running."},
        {"type": "toolcall_start", "contentIndex": 1},
        {"type": "toolcall_delta", "contentIndex": 1, "delta": '{"comm'},
        {"type": "toolcall_delta", "contentIndex": 1, "delta": 'and":"ec'},
        {"type": "toolcall_delta", "contentIndex": 1, "delta": 'ho hi"}'},
        {"type": "toolcall_end", "contentIndex": 1,
         "toolCall": {"type": "toolCall", "id": "call_1|fc_1", "name": "bash", "arguments": {"command": "echo hi"}}},
    ]
    assert seen == [{}, {"command": "ec"}, {"command": "echo hi"}]
    msg = final(events)
    assert events[-1].reason == "toolUse" and msg.stopReason == "toolUse"
    assert msgspec.to_builtins(msg.usage)["totalTokens"] == 60
    assert server.requests[0].body["tools"] == [{"type": "function", "name": "bash", "description": "Run a command",
                                                 "parameters": tool.parameters, "strict": False}]


async def test_incomplete_is_length(server):
    server.push(Reply.sse([created(), *message_item(["cut"]), completed(10, 5, status="incomplete")], named=True))
    events = await run(make_model(server), ctx(user("q")))
    assert kinds(events) == ["start", "text_start", "text_delta", "text_end", "done"]
    assert events[-1].reason == "length" and final(events).stopReason == "length"


# ---------------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("reply,message", [
    (Reply.json(400, {"error": {"message": "Invalid 'input[2].id'", "type": "invalid_request_error"}}),
     "400 Invalid 'input[2].id'"),
    (Reply.json(429, {"error": {"message": "Rate limit reached", "type": "requests"}}), "429 Rate limit reached"),
    (Reply(status=502, headers={"content-type": "text/html", "x-should-retry": "false"}, chunks=["Bad Gateway"]),
     "502 Bad Gateway"),
])
async def test_http_errors(server, reply, message):
    server.push(reply)
    events = await run(make_model(server), ctx(user("q")))
    assert kinds(events) == ["start", "error"]
    msg = final(events)
    assert events[-1].reason == "error" and msg.stopReason == "error" and msg.errorMessage == message
    assert msg.content == [] and msgspec.to_builtins(msg.usage) == ZERO_USAGE
    assert len(server.requests) == 1


async def test_response_failed(server):
    server.push(Reply.sse([created(), *message_item(["part"])[:3],
                           {"type": "response.failed", "response": {"id": "resp_1", "status": "failed", "error": {
                               "code": "server_error", "message": "The model crashed"}}}], named=True))
    events = await run(make_model(server), ctx(user("q")))
    assert kinds(events) == ["start", "text_start", "text_delta", "error"]
    msg = final(events)
    assert msg.errorMessage == "server_error: The model crashed" and msg.stopReason == "error"
    assert msgspec.to_builtins(msg.content) == [{"type": "text", "text": "part"}]
    assert msg.responseId == "resp_1"


async def test_error_event(server):
    server.push(Reply.sse([created(), {"type": "error", "code": "rate_limit_exceeded", "message": "Slow down",
                                       "param": None, "sequence_number": 1}], named=True))
    events = await run(make_model(server), ctx(user("q")))
    assert kinds(events) == ["start", "error"]
    assert final(events).errorMessage == "Error Code rate_limit_exceeded: Slow down"


async def test_in_stream_error_object(server):
    server.push(Reply.sse([created(), {"error": {"type": "overloaded_error", "message": "Overloaded"}}]))
    events = await run(make_model(server), ctx(user("q")))
    assert final(events).errorMessage == "Overloaded"


async def test_connection_dropped_mid_stream(server):
    server.push(Reply.sse([created(), *message_item(["Hel", "lo"])[:4], DROP], named=True))
    events = await run(make_model(server), ctx(user("q")))
    assert kinds(events) == ["start", "text_start", "text_delta", "text_delta", "error"]
    msg = final(events)
    assert msg.errorMessage.startswith("Connection lost: ") and msg.stopReason == "error"
    assert msgspec.to_builtins(msg.content) == [{"type": "text", "text": "Hello"}]


async def test_stream_cut_short_without_completed(server):
    server.push(Reply.sse([created(), *message_item(["Hi"])], named=True))
    events = await run(make_model(server), ctx(user("q")))
    assert kinds(events) == ["start", "text_start", "text_delta", "text_end", "error"]
    msg = final(events)
    assert msg.errorMessage == "Connection lost: the stream ended before the response was complete"
    assert msg.content[0].text == "Hi"


async def test_abort_mid_stream_keeps_partial_text(server):
    server.push(Reply.sse([created(), *message_item(["Slow ", "stream"])[:4], Stall(60), completed()], named=True))
    signal = AbortSignal()

    def on_event(ev, events):
        if kinds(events).count("text_delta") == 2:
            signal.abort()

    t0 = time.monotonic()
    events = await run(make_model(server), ctx(user("q")), opts(signal=signal), on_event)
    assert time.monotonic() - t0 < 30  # bounds a hang: the event types show the stall was cut short
    assert kinds(events) == ["start", "text_start", "text_delta", "text_delta", "text_end", "error"]
    msg = final(events)
    assert events[-1].reason == "aborted" and msg.stopReason == "aborted"
    assert msg.errorMessage == "Request was aborted"
    assert msgspec.to_builtins(msg.content) == [{"type": "text", "text": "Slow stream"}]
    assert msgspec.to_builtins(msg.usage) == ZERO_USAGE


async def test_missing_api_key(server):
    events = await run(make_model(server), ctx(user("q")), StreamOptions(maxRetries=0))
    assert kinds(events) == ["start", "error"]
    assert final(events).errorMessage.startswith("No API key for provider openai: set OPENAI_API_KEY")


# ---------------------------------------------------------------------------------------------
# Request shape
# ---------------------------------------------------------------------------------------------
def _assistant(content, stop="stop", model="gpt-test", provider="openai", api="openai-responses") -> AssistantMessage:
    return AssistantMessage(content=content, api=api, provider=provider, model=model, stopReason=stop)


async def test_request_input_conversion(server):
    server.push(Reply.sse([created(), *message_item(["ok"]), completed()], named=True))
    long_sig = json.dumps({"v": 1, "id": "m" * 80})
    messages = [
        UserMessage(content="plain"),
        UserMessage(content=[TextContent(text="look"), ImageContent(data=PNG, mimeType="image/png")]),
        _assistant([ThinkingContent(thinking="First, look.", thinkingSignature=json.dumps(REASONING_ITEM)),
                    TextContent(text="Looking.", textSignature='{"v":1,"id":"msg_a","phase":"commentary"}'),
                    ToolCall(id="call_1|fc_1", name="read", arguments={"path": "x.png"})], stop="toolUse"),
        ToolResultMessage(toolCallId="call_1|fc_1", toolName="read",
                          content=[TextContent(text="image:"), ImageContent(data=PNG, mimeType="image/png")]),
        _assistant([TextContent(text="partial")], stop="error"),
        UserMessage(content=[TextContent(text="again")]),
        _assistant([TextContent(text="no signature"), TextContent(text="long", textSignature=long_sig),
                    ToolCall(id="call_2|fc_2", name="bash", arguments={"command": "ls"})], stop="toolUse"),
        UserMessage(content=[TextContent(text="skip it")]),
        _assistant([ToolCall(id="call_3|fc_3", name="ls", arguments={})], stop="toolUse", model="gpt-other"),
        ToolResultMessage(toolCallId="call_3|fc_3", toolName="ls", content=[TextContent(text="files")]),
        _assistant([ThinkingContent(thinking="claude thoughts", thinkingSignature="c2lnbmF0dXJl"),
                    ToolCall(id="toolu_01", name="ls", arguments={})], stop="toolUse",
                   provider="anthropic", model="claude", api="anthropic-messages"),
        ToolResultMessage(toolCallId="toolu_01", toolName="ls",
                          content=[ImageContent(data=PNG, mimeType="image/png")]),
    ]
    await run(make_model(server), ctx(*messages))
    url = f"data:image/png;base64,{PNG}"
    assert server.requests[0].body["input"] == [
        {"role": "system", "content": "You are a test."},
        {"role": "user", "content": [{"type": "input_text", "text": "plain"}]},
        {"role": "user", "content": [{"type": "input_text", "text": "look"},
                                     {"type": "input_image", "detail": "auto", "image_url": url}]},
        REASONING_ITEM,
        {"type": "message", "role": "assistant",
         "content": [{"type": "output_text", "text": "Looking.", "annotations": []}],
         "status": "completed", "id": "msg_a", "phase": "commentary"},
        {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "read", "arguments": '{"path":"x.png"}'},
        {"type": "function_call_output", "call_id": "call_1",
         "output": [{"type": "input_text", "text": "image:"},
                    {"type": "input_image", "detail": "auto", "image_url": url}]},
        {"role": "user", "content": [{"type": "input_text", "text": "again"}]},
        {"type": "message", "role": "assistant",
         "content": [{"type": "output_text", "text": "no signature", "annotations": []}],
         "status": "completed", "id": "msg_5"},
        {"type": "message", "role": "assistant",
         "content": [{"type": "output_text", "text": "long", "annotations": []}],
         "status": "completed", "id": f"msg_{short_hash('m' * 80)}"},
        {"type": "function_call", "id": "fc_2", "call_id": "call_2", "name": "bash", "arguments": '{"command":"ls"}'},
        {"type": "function_call_output", "call_id": "call_2", "output": "No result provided"},
        {"role": "user", "content": [{"type": "input_text", "text": "skip it"}]},
        {"type": "function_call", "call_id": "call_3", "name": "ls", "arguments": "{}"},  # other model: no fc id
        {"type": "function_call_output", "call_id": "call_3", "output": "files"},
        {"type": "message", "role": "assistant",
         "content": [{"type": "output_text", "text": "claude thoughts", "annotations": []}],
         "status": "completed", "id": "msg_10"},
        {"type": "function_call", "call_id": "toolu_01", "name": "ls", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "toolu_01",
         "output": [{"type": "input_image", "detail": "auto", "image_url": url}]},
    ]


async def test_gpt5_without_reasoning_gets_pi_juice_note(server):
    server.push(Reply.sse([created(), *message_item(["ok"]), completed()], named=True))
    model = make_model(server, id="gpt-5", name="gpt-5", reasoning=True, input=["text"],
                       thinkingLevelMap={"xhigh": "xhigh"})
    await run(model, ctx(user("q"), system=""), opts(maxTokens=500))
    body = server.requests[0].body
    assert "reasoning" not in body and "include" not in body
    assert body["max_output_tokens"] == 500
    assert body["input"] == [{"role": "user", "content": [{"type": "input_text", "text": "q"}]},
                             {"role": "developer", "content": [{"type": "input_text",
                                                                "text": "# Juice: 0 !important"}]}]
    server.push(Reply.sse([created(), *message_item(["ok"]), completed()], named=True))
    await run(model, ctx(user("q")), opts(reasoning="xhigh"))
    assert server.requests[1].body["reasoning"] == {"effort": "xhigh", "summary": "auto"}


def test_short_hash_matches_pi():
    # values printed by pi's shortHash under node for the same strings (UTF-16 code units)
    assert short_hash("") == "k4n83c7h0j2b"
    assert short_hash("abc") == "y0biex7f9bbh"
    assert short_hash("m" * 80) == "15eu7wi1jeqy2r"
    assert short_hash("\u00e9\U0001F600x") == "1i488u5srdge7"


async def test_refusal_is_streamed_as_text(server):
    item = {"id": "msg_r", "type": "message", "status": "in_progress", "role": "assistant", "content": []}
    server.push(Reply.sse([
        created(), {"type": "response.output_item.added", "output_index": 0, "item": item},
        {"type": "response.content_part.added", "item_id": "msg_r", "output_index": 0, "content_index": 0,
         "part": {"type": "refusal", "refusal": ""}},
        {"type": "response.refusal.delta", "item_id": "msg_r", "output_index": 0, "content_index": 0,
         "delta": "I can't "},
        {"type": "response.refusal.delta", "item_id": "msg_r", "output_index": 0, "content_index": 0,
         "delta": "help."},
        {"type": "response.output_item.done", "output_index": 0,
         "item": {**item, "status": "completed", "content": [{"type": "refusal", "refusal": "I can't help."}]}},
        completed(5, 3)], named=True))
    events = await run(make_model(server), ctx(user("q")))
    assert kinds(events) == ["start", "text_start", "text_delta", "text_delta", "text_end", "done"]
    assert events[-2].content == "I can't help." and final(events).stopReason == "stop"
