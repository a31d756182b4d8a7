"""The google-generative-ai provider, driven through pisces.ai.stream.stream and the real google-genai SDK
against the scripted SSE server."""

from __future__ import annotations

import time

import msgspec
import pytest
from provider_helpers import abort_soon_after_text_deltas, context_factory, options_factory
from provider_helpers import run_summary as run

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

PATH = "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"


def make_model(server, **kw) -> Model:
    base = dict(id="gemini-2.5-flash", name="Gemini 2.5 Flash", api="google-generative-ai", provider="google",
                baseUrl=server.url + "/v1beta", reasoning=True, input=["text", "image"],
                cost=ModelCost(input=0.3, output=2.5, cacheRead=0.075, cacheWrite=0), contextWindow=1048576,
                maxTokens=65536)
    base.update(kw)
    return Model(**base)


opts = options_factory("test-key")
user, ctx = context_factory("You are terse.", user_timestamp=1, default_prompt="Hi")


def chunk(*parts, finish=None, usage=None, rid="resp-1"):
    c: dict = {"candidates": [{"content": {"role": "model", "parts": list(parts)}, "index": 0}], "responseId": rid,
               "modelVersion": "gemini-2.5-flash"}
    if finish:
        c["candidates"][0]["finishReason"] = finish
    if usage:
        c["usageMetadata"] = usage
    return c


USAGE = {"promptTokenCount": 12, "candidatesTokenCount": 5, "totalTokenCount": 17}
BASH = Tool(name="bash", description="Run a command",
            parameters={"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]})


# ---------------------------------------------------------------------------------------------
async def test_text_reply(server):
    server.push(Reply.sse([chunk({"text": "Hello"}), chunk({"text": " there."}, finish="STOP", usage=USAGE)]))
    types, events, final = await run(make_model(server), ctx(), opts())
    assert types == ["start", "text_start", "text_delta", "text_delta", "text_end", "done"]
    assert [e.delta for e in events if event_type(e) == "text_delta"] == ["Hello", " there."]
    assert events[4].content == "Hello there." and events[4].contentIndex == 0
    assert events[-1].reason == "stop"
    assert final.content == [TextContent(text="Hello there.")]
    assert final.stopReason == "stop" and final.responseId == "resp-1"
    assert final.errorMessage is msgspec.UNSET and final.responseModel is msgspec.UNSET
    assert (final.api, final.provider, final.model) == ("google-generative-ai", "google", "gemini-2.5-flash")
    assert server.requests[0].path == PATH
    assert server.requests[0].headers["x-goog-api-key"] == "test-key"


async def test_replies_go_through_httpx2_even_where_aiohttp_can_be_imported(server, monkeypatch):
    """google-genai switches to aiohttp whenever it can import it (Ray installs it); pisces' client must stay on
    httpx2, where its bounded reader is. Pretending aiohttp is there makes the SDK reach for it unless told not to."""
    from google.genai import _api_client

    monkeypatch.setattr(_api_client, "has_aiohttp", True)
    server.push(Reply.sse([chunk({"text": "Hello"}, finish="STOP", usage=USAGE)]))
    types, _events, final = await run(make_model(server, baseUrl=f"{server.url}/v1beta/aiohttp-check"), ctx(), opts())
    assert types == ["start", "text_start", "text_delta", "text_end", "done"], final.errorMessage
    assert final.content == [TextContent(text="Hello")]


async def test_usage_and_cost(server):
    usage = {"promptTokenCount": 1000, "candidatesTokenCount": 200, "thoughtsTokenCount": 50,
             "cachedContentTokenCount": 400, "totalTokenCount": 1250}
    server.push(Reply.sse([chunk({"text": "ok"}, usage={"promptTokenCount": 1000, "candidatesTokenCount": 1}),
                           chunk({"text": "!"}, finish="STOP", usage=usage)]))
    types, _, final = await run(make_model(server), ctx(), opts())
    assert types == ["start", "text_start", "text_delta", "text_delta", "text_end", "done"]
    u = final.usage
    # input excludes the cached tokens; output includes the thoughts
    assert (u.input, u.output, u.cacheRead, u.cacheWrite, u.totalTokens) == (600, 250, 400, 0, 1250)
    # pi's arithmetic: (price / 1e6) * tokens as IEEE doubles, unrounded
    assert msgspec.to_builtins(u.cost) == {"input": 0.00017999999999999998, "output": 0.000625,
                                           "cacheRead": 2.9999999999999997e-05, "cacheWrite": 0,
                                           "total": 0.0008349999999999999}


async def test_thinking_and_signature_round_trip(server):
    server.push(Reply.sse([
        chunk({"text": "Let me ", "thought": True}),
        chunk({"text": "think.", "thought": True, "thoughtSignature": "VGhpbmtTaWc="}),
        chunk({"text": "The answer"}),
        chunk({"text": " is 4.", "thoughtSignature": "VGV4dFNpZw=="}, finish="STOP", usage=USAGE)]))
    model = make_model(server)
    first = user("2+2?")
    types, events, final = await run(model, ctx(first), opts(reasoning="medium"))
    assert types == ["start", "thinking_start", "thinking_delta", "thinking_delta", "thinking_end",
                     "text_start", "text_delta", "text_delta", "text_end", "done"]
    assert events[4].content == "Let me think." and events[4].contentIndex == 0
    assert events[8].content == "The answer is 4." and events[8].contentIndex == 1
    assert final.content == [ThinkingContent(thinking="Let me think.", thinkingSignature="VGhpbmtTaWc="),
                             TextContent(text="The answer is 4.", textSignature="VGV4dFNpZw==")]
    config = server.requests[0].body["generationConfig"]
    thinking = {k.replace("_", "").lower(): v for k, v in config["thinkingConfig"].items()}
    assert thinking == {"includethoughts": True, "thinkingbudget": 8192}

    server.push(Reply.sse([chunk({"text": "ok"}, finish="STOP")]))
    await run(model, ctx(first, final, user("Sure?")), opts(reasoning="medium"))
    sent = server.requests[1].body["contents"]
    assert sent[1] == {"role": "model", "parts": [
        {"thought": True, "text": "Let me think.", "thoughtSignature": "VGhpbmtTaWc="},
        {"text": "The answer is 4.", "thoughtSignature": "VGV4dFNpZw=="}]}

    # another model's thinking becomes plain text, without signatures
    server.push(Reply.sse([chunk({"text": "ok"}, finish="STOP")]))
    await run(make_model(server, id="gemini-2.5-pro"), ctx(first, final, user("Sure?")), opts())
    assert server.requests[2].body["contents"][1] == {"role": "model", "parts": [
        {"text": "Let me think."}, {"text": "The answer is 4."}]}


@pytest.mark.parametrize("model_id,level,expected", [
    ("gemini-2.5-flash", "off", {"thinkingbudget": 0}),
    ("gemini-2.5-flash", "minimal", {"includethoughts": True, "thinkingbudget": 128}),
    ("gemini-2.5-pro", "high", {"includethoughts": True, "thinkingbudget": 32768}),
    ("gemini-2.5-flash", "xhigh", {"includethoughts": True, "thinkingbudget": 24576}),
    ("gemini-3-pro-preview", "medium", {"includethoughts": True, "thinkinglevel": "HIGH"}),
    ("gemini-3-pro-preview", "off", {"thinkinglevel": "LOW"}),
])
async def test_thinking_config(server, model_id, level, expected):
    server.push(Reply.sse([chunk({"text": "ok"}, finish="STOP")]))
    await run(make_model(server, id=model_id), ctx(), opts(reasoning=level))
    config = server.requests[0].body["generationConfig"]
    assert {k.replace("_", "").lower(): v for k, v in config["thinkingConfig"].items()} == expected


async def test_no_thinking_config_for_non_reasoning_models(server):
    server.push(Reply.sse([chunk({"text": "ok"}, finish="STOP")]))
    await run(make_model(server, id="gemini-2.0-flash", reasoning=False), ctx(), opts(reasoning="high",
                                                                                      temperature=0.2))
    config = server.requests[0].body["generationConfig"]
    assert "thinkingConfig" not in config
    assert config["temperature"] == 0.2 and config["maxOutputTokens"] == 32000


async def test_tool_call(server):
    server.push(Reply.sse([
        chunk({"text": "Listing."}),
        chunk({"functionCall": {"name": "bash", "args": {"command": "ls -la"}}, "thoughtSignature": "Q2FsbFNpZw=="},
              finish="STOP", usage=USAGE)]))
    types, events, final = await run(make_model(server), ctx(tools=[BASH]), opts())
    assert types == ["start", "text_start", "text_delta", "text_end", "toolcall_start", "toolcall_delta",
                     "toolcall_end", "done"]
    assert events[5].delta == '{"command": "ls -la"}' and events[5].contentIndex == 1
    tc = events[6].toolCall
    assert tc.name == "bash" and tc.arguments == {"command": "ls -la"} and tc.thoughtSignature == "Q2FsbFNpZw=="
    assert tc.id.startswith("bash_")
    assert events[-1].reason == "toolUse" and final.stopReason == "toolUse"
    assert final.content == [TextContent(text="Listing."), tc]

    # the call and its result go back: signature kept, response in a user turn
    server.push(Reply.sse([chunk({"text": "Done"}, finish="STOP")]))
    result = ToolResultMessage(toolCallId=tc.id, toolName="bash", content=[TextContent(text="a\nb")])
    await run(make_model(server), ctx(user("ls"), final, result, tools=[BASH]), opts())
    contents = server.requests[1].body["contents"]
    assert contents[1] == {"role": "model", "parts": [
        {"text": "Listing."},
        {"functionCall": {"name": "bash", "args": {"command": "ls -la"}}, "thoughtSignature": "Q2FsbFNpZw=="}]}
    assert contents[2] == {"role": "user", "parts": [
        {"functionResponse": {"name": "bash", "response": {"output": "a\nb"}}}]}


async def test_two_calls_with_the_same_id_get_distinct_ids(server):
    call = {"functionCall": {"id": "c1", "name": "bash", "args": {"command": "pwd"}}}
    server.push(Reply.sse([chunk(call, call, finish="STOP")]))
    types, _, final = await run(make_model(server), ctx(tools=[BASH]), opts())
    assert types == ["start", "toolcall_start", "toolcall_delta", "toolcall_end", "toolcall_start",
                     "toolcall_delta", "toolcall_end", "done"]
    assert final.content[0].id == "c1" and final.content[1].id != "c1"


async def test_request_body_shape(server):
    server.push(Reply.sse([chunk({"text": "ok"}, finish="STOP")]))
    mine = dict(api="google-generative-ai", provider="google", model="gemini-2.5-flash")
    history = [
        UserMessage(content=[TextContent(text="Look"), ImageContent(data="aW1n", mimeType="image/png")], timestamp=1),
        AssistantMessage(content=[TextContent(text="broken")], stopReason="error", **mine),  # dropped
        AssistantMessage(content=[TextContent(text=" "),
                                  ToolCall(id="t1", name="bash", arguments={"command": "a"}),
                                  ToolCall(id="t2", name="bash", arguments={"command": "b"})],
                         stopReason="toolUse", **mine),
        ToolResultMessage(toolCallId="t1", toolName="bash", content=[TextContent(text="out-a")]),
        ToolResultMessage(toolCallId="t2", toolName="bash", content=[TextContent(text="bad")], isError=True),
        UserMessage(content="Next", timestamp=2),
    ]
    await run(make_model(server), ctx(*history, system="Be brief.", tools=[BASH]), opts(headers={"x-extra": "1"}))
    req = server.requests[0]
    assert req.method == "POST" and req.path == PATH
    assert req.headers["x-extra"] == "1"
    body = req.body
    assert body["contents"] == [
        {"role": "user", "parts": [{"text": "Look"}, {"inlineData": {"data": "aW1n", "mime_type": "image/png"}}]},
        {"role": "model", "parts": [{"functionCall": {"name": "bash", "args": {"command": "a"}}},
                                    {"functionCall": {"name": "bash", "args": {"command": "b"}}}]},
        {"role": "user", "parts": [{"functionResponse": {"name": "bash", "response": {"output": "out-a"}}},
                                   {"functionResponse": {"name": "bash", "response": {"error": "bad"}}}]},
        {"role": "user", "parts": [{"text": "Next"}]},
    ]
    assert body["systemInstruction"] == {"parts": [{"text": "Be brief."}], "role": "user"}
    decls = body["tools"][0]["functionDeclarations"]
    assert len(decls) == 1 and decls[0]["name"] == "bash" and decls[0]["description"] == "Run a command"
    schema = decls[0].get("parametersJsonSchema", decls[0].get("parameters_json_schema"))
    assert schema == BASH.parameters
    assert body["generationConfig"] == {"maxOutputTokens": 32000, "thinkingConfig": {"thinking_budget": 0}}


async def test_gemini3_replay_of_unsigned_calls_and_tool_images(server):
    server.push(Reply.sse([chunk({"text": "ok"}, finish="STOP")]), Reply.sse([chunk({"text": "ok"}, finish="STOP")]))
    other = dict(api="anthropic-messages", provider="anthropic", model="claude-sonnet-4-5")
    history = [user("Shot"),
               AssistantMessage(content=[ToolCall(id="toolu_1", name="shot", arguments={})], stopReason="toolUse",
                                **other),
               ToolResultMessage(toolCallId="toolu_1", toolName="shot",
                                 content=[ImageContent(data="cG5n", mimeType="image/png")])]
    await run(make_model(server, id="gemini-3-pro-preview"), ctx(*history), opts())
    contents = server.requests[0].body["contents"]
    assert contents[1] == {"role": "model", "parts": [
        {"functionCall": {"name": "shot", "args": {}}, "thoughtSignature": "skip_thought_signature_validator"}]}
    response = contents[2]["parts"][0]["functionResponse"]
    assert contents[2]["role"] == "user" and len(contents[2]["parts"]) == 1
    assert response["name"] == "shot" and response["response"] == {"output": "(see attached image)"}
    # the SDK spells the nested image in snake_case here; the API accepts both spellings
    image = response["parts"][0].get("inlineData") or response["parts"][0].get("inline_data")
    assert {k.replace("_", "").lower(): v for k, v in image.items()} == {"data": "cG5n", "mimetype": "image/png"}
    # older models get the image in a separate user turn
    await run(make_model(server), ctx(*history), opts())
    contents = server.requests[1].body["contents"]
    assert contents[1] == {"role": "model", "parts": [{"functionCall": {"name": "shot", "args": {}}}]}
    assert contents[2:] == [
        {"role": "user", "parts": [{"functionResponse": {"name": "shot",
                                                         "response": {"output": "(see attached image)"}}}]},
        {"role": "user", "parts": [{"text": "Tool result image:"},
                                   {"inlineData": {"data": "cG5n", "mime_type": "image/png"}}]}]


async def test_http_4xx(server):
    server.push(Reply.json(400, {"error": {"code": 400, "message": "API key not valid. Please pass a valid API key.",
                                           "status": "INVALID_ARGUMENT"}}))
    types, events, final = await run(make_model(server), ctx(), opts())
    assert types == ["start", "error"]
    assert events[-1].reason == "error" and final.stopReason == "error"
    assert final.errorMessage == "400 API key not valid. Please pass a valid API key."
    assert final.content == [] and final.usage.totalTokens == 0


async def test_http_5xx(server):
    server.push(Reply.json(503, {"error": {"code": 503, "message": "The model is overloaded. Please try again later.",
                                           "status": "UNAVAILABLE"}}))
    types, _, final = await run(make_model(server), ctx(), opts())
    assert types == ["start", "error"]
    assert final.errorMessage == "503 The model is overloaded. Please try again later."
    assert len(server.requests) == 1  # maxRetries=0: no retry inside the SDK


async def test_in_stream_error_keeps_partial_content(server):
    server.push(Reply.sse([chunk({"text": "partial text bef"}),
                           {"error": {"code": 500, "message": "Internal error encountered.", "status": "INTERNAL"}}]))
    types, _, final = await run(make_model(server), ctx(), opts())
    assert types == ["start", "text_start", "text_delta", "error"]
    assert final.stopReason == "error"
    assert final.errorMessage == "500 Internal error encountered."
    assert final.content == [TextContent(text="partial text bef")]


async def test_safety_finish_is_an_error(server):
    server.push(Reply.sse([chunk({"text": "Sure, here"}), chunk(finish="SAFETY", usage=USAGE)]))
    types, _, final = await run(make_model(server), ctx(), opts())
    assert types == ["start", "text_start", "text_delta", "text_end", "error"]
    assert final.stopReason == "error"
    assert final.errorMessage == "Gemini stopped the response (finish reason: SAFETY)"
    assert final.content == [TextContent(text="Sure, here")]
    assert final.usage.input == 12


async def test_max_tokens_is_length(server):
    server.push(Reply.sse([chunk({"text": "cut"}, finish="MAX_TOKENS", usage=USAGE)]))
    types, events, final = await run(make_model(server), ctx(), opts())
    assert types == ["start", "text_start", "text_delta", "text_end", "done"]
    assert events[-1].reason == "length" and final.stopReason == "length"


async def test_connection_dropped_mid_stream(server):
    server.push(Reply.sse([chunk({"text": "Hello"}), DROP]))
    types, _, final = await run(make_model(server), ctx(), opts())
    assert types == ["start", "text_start", "text_delta", "error"]
    assert final.stopReason == "error"
    assert final.errorMessage.startswith("Connection lost")
    assert final.content == [TextContent(text="Hello")]


async def test_abort_mid_stream(server):
    server.push(Reply.sse([chunk({"text": "partial"}), Stall(60), chunk({"text": " never"}, finish="STOP")]))
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
    types, _, final = await run(make_model(server), ctx(), StreamOptions(maxRetries=0))
    assert types == ["start", "error"]
    assert final.errorMessage.startswith("No API key for provider google: set GEMINI_API_KEY")
    assert server.requests == []


async def test_api_key_from_environment(server, monkeypatch):
    monkeypatch.setenv("GEMINI_API_KEY", "env-key")
    server.push(Reply.sse([chunk({"text": "ok"}, finish="STOP")]))
    types, _, _ = await run(make_model(server), ctx(), StreamOptions(maxRetries=0))
    assert types[-1] == "done"
    assert server.requests[0].headers["x-goog-api-key"] == "env-key"
