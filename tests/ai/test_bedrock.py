"""Amazon Bedrock (``bedrock-converse-stream``) through the real boto3 client, pointed by endpoint URL at the
scripted server, which answers in AWS's event-stream binary framing: reasoning with its signature, text, a
streamed tool call, usage and cost, the request pi builds (SigV4-signed with the chain's keys), an HTTP 429
with retry-after, an in-stream throttlingException, a stream cut before messageStop, missing boto3."""

from __future__ import annotations

import json
import sys

import msgspec
import pytest
from provider_helpers import collect, context_factory, final, kinds

from eventstream import CONTENT_TYPE, event, exception
from pisces.ai import catalogue
from pisces.ai.models import calculate_cost
from pisces.ai.providers.bedrock import client_settings
from pisces.ai.types import (
    AssistantMessage,
    StreamOptions,
    TextContent,
    ThinkingContent,
    Tool,
    ToolCall,
    ToolResultMessage,
    Usage,
)
from scripted_server import DROP, Reply

pytest.importorskip("boto3")

user, ctx = context_factory("You are a test.", default_prompt="Hi")
TOOL = Tool(name="bash", description="Run a command", parameters={"type": "object", "properties": {
    "cmd": {"type": "string"}}, "required": ["cmd"]})


def stream_reply(*messages: bytes) -> Reply:
    return Reply(status=200, headers={"content-type": CONTENT_TYPE}, chunks=list(messages))


@pytest.fixture
def bedrock(monkeypatch, server):
    for name in ("AWS_PROFILE", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_BEARER_TOKEN_BEDROCK",
                 "AWS_SESSION_TOKEN", "AWS_BEDROCK_SKIP_AUTH"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDTEST")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret-test")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    model = next(m for m in catalogue.models("amazon-bedrock")
                 if m.id == "us.anthropic.claude-sonnet-4-5-20250929-v1:0")
    return msgspec.structs.replace(model, baseUrl=server.url, input=list(model.input))


def opts(**kw) -> StreamOptions:
    kw.setdefault("maxRetries", 0)
    return StreamOptions(**kw)


async def test_reasoning_text_tool_call_usage_and_the_request(bedrock, server):
    server.push(stream_reply(
        event("messageStart", {"role": "assistant"}),
        event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"reasoningContent": {"text": "Think"}}}),
        event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"reasoningContent": {"text": "ing."}}}),
        event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"reasoningContent": {"signature": "sig=="}}}),
        event("contentBlockStop", {"contentBlockIndex": 0}),
        event("contentBlockDelta", {"contentBlockIndex": 1, "delta": {"text": "Running "}}),
        event("contentBlockDelta", {"contentBlockIndex": 1, "delta": {"text": "it."}}),
        event("contentBlockStop", {"contentBlockIndex": 1}),
        event("contentBlockStart", {"contentBlockIndex": 2, "start": {"toolUse": {"toolUseId": "tu_1",
                                                                                 "name": "bash"}}}),
        event("contentBlockDelta", {"contentBlockIndex": 2, "delta": {"toolUse": {"input": '{"cmd": '}}}),
        event("contentBlockDelta", {"contentBlockIndex": 2, "delta": {"toolUse": {"input": '"ls"}'}}}),
        event("contentBlockStop", {"contentBlockIndex": 2}),
        event("messageStop", {"stopReason": "tool_use"}),
        event("metadata", {"usage": {"inputTokens": 900, "outputTokens": 40, "totalTokens": 1240,
                                     "cacheReadInputTokens": 300, "cacheWriteInputTokens": 0},
                           "metrics": {"latencyMs": 12}}),
    ))
    events = await collect(bedrock, ctx(tools=[TOOL]), opts(reasoning="high"))
    msg = final(events)
    assert kinds(events)[-1] == "done", msg.errorMessage
    assert kinds(events) == ["start", "thinking_start", "thinking_delta", "thinking_delta", "thinking_end",
                             "text_start", "text_delta", "text_delta", "text_end", "toolcall_start",
                             "toolcall_delta", "toolcall_delta", "toolcall_end", "done"]
    assert [type(b) for b in msg.content] == [ThinkingContent, TextContent, ToolCall]
    assert msg.content[0].thinking == "Thinking." and msg.content[0].thinkingSignature == "sig=="
    assert msg.content[1].text == "Running it."
    assert (msg.content[2].id, msg.content[2].name, msg.content[2].arguments) == ("tu_1", "bash", {"cmd": "ls"})
    assert msg.stopReason == "toolUse"
    expected = Usage(input=900, output=40, cacheRead=300)
    calculate_cost(bedrock, expected)
    assert (msg.usage.input, msg.usage.output, msg.usage.cacheRead) == (900, 40, 300)
    assert msg.usage.cost.total == expected.cost.total > 0

    req = server.requests[0]
    assert req.method == "POST"
    assert req.path == "/model/us.anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse-stream"
    auth = req.headers["authorization"]
    assert auth.startswith("AWS4-HMAC-SHA256 Credential=AKIDTEST/") and "/us-east-1/bedrock/aws4_request" in auth
    body = req.body
    assert body["system"] == [{"text": "You are a test."}, {"cachePoint": {"type": "default"}}]
    assert body["messages"] == [{"role": "user", "content": [{"text": "Hi"}, {"cachePoint": {"type": "default"}}]}]
    thinking = body["additionalModelRequestFields"]["thinking"]
    assert thinking["type"] == "enabled" and thinking["budget_tokens"] == 16384
    assert body["inferenceConfig"]["maxTokens"] > 16384
    assert body["toolConfig"]["tools"][0]["toolSpec"]["name"] == "bash"
    assert body["toolConfig"]["tools"][0]["toolSpec"]["inputSchema"]["json"]["required"] == ["cmd"]


async def test_history_replay_groups_tool_results(bedrock, server):
    server.push(stream_reply(event("messageStart", {"role": "assistant"}),
                             event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "done"}}),
                             event("contentBlockStop", {"contentBlockIndex": 0}),
                             event("messageStop", {"stopReason": "end_turn"}),
                             event("metadata", {"usage": {"inputTokens": 5, "outputTokens": 1}})))
    assistant = AssistantMessage(
        content=[ThinkingContent(thinking="plan", thinkingSignature="s1"), TextContent(text="Two calls."),
                 ToolCall(id="a", name="bash", arguments={"cmd": "ls"}),
                 ToolCall(id="b", name="bash", arguments={"cmd": "pwd"})],
        api=bedrock.api, provider=bedrock.provider, model=bedrock.id, usage=Usage(), stopReason="toolUse",
        timestamp=1)
    results = [ToolResultMessage(toolCallId=i, toolName="bash", content=[TextContent(text=t)], isError=e)
               for i, t, e in (("a", "f.txt", False), ("b", "boom", True))]
    events = await collect(bedrock, ctx(user("go"), assistant, *results, tools=[TOOL]), opts())
    assert kinds(events)[-1] == "done" and final(events).content[0].text == "done"
    msgs = server.requests[0].body["messages"]
    assert [m["role"] for m in msgs] == ["user", "assistant", "user"]
    assert msgs[1]["content"][0] == {"reasoningContent": {"reasoningText": {"text": "plan", "signature": "s1"}}}
    assert msgs[1]["content"][2] == {"toolUse": {"toolUseId": "a", "name": "bash", "input": {"cmd": "ls"}}}
    tool_results = [b["toolResult"] for b in msgs[2]["content"] if "toolResult" in b]
    assert [(r["toolUseId"], r["status"], r["content"]) for r in tool_results] == [
        ("a", "success", [{"text": "f.txt"}]), ("b", "error", [{"text": "boom"}])]


async def test_http_throttling_with_retry_after(bedrock, server):
    server.push(Reply.json(429, {"message": "Too many requests, please wait before trying again."},
                           headers={"x-amzn-errortype": "ThrottlingException:http://internal.amazon.com/",
                                    "retry-after": "7"}))
    events = await collect(bedrock, ctx(), opts())
    msg = final(events)
    assert kinds(events)[-1] == "error" and msg.stopReason == "error"
    assert msg.errorMessage == ("429 ThrottlingException: Too many requests, please wait before trying again. "
                                "(retry-after: 7s)")


async def test_in_stream_throttling_keeps_partial_text(bedrock, server):
    server.push(stream_reply(event("messageStart", {"role": "assistant"}),
                             event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "Part"}}),
                             exception("throttlingException", "Rate exceeded")))
    events = await collect(bedrock, ctx(), opts())
    msg = final(events)
    assert kinds(events)[-1] == "error"
    assert msg.content[0].text == "Part"
    assert msg.errorMessage.startswith("429 throttlingException: Rate exceeded")


async def test_validation_error_and_cut_stream(bedrock, server):
    server.push(Reply.json(400, {"message": "The provided model identifier is invalid."},
                           headers={"x-amzn-errortype": "ValidationException"}))
    msg = final(await collect(bedrock, ctx(), opts()))
    assert msg.errorMessage == "400 ValidationException: The provided model identifier is invalid."
    server.push(Reply(status=200, headers={"content-type": CONTENT_TYPE},
                      chunks=[event("messageStart", {"role": "assistant"}),
                              event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "x"}}), DROP]))
    msg = final(await collect(bedrock, ctx(), opts()))
    assert msg.stopReason == "error" and msg.errorMessage.startswith("Connection lost")


def test_region_and_endpoint_rules(monkeypatch):
    base = catalogue.models("amazon-bedrock")[0]
    for name in ("AWS_PROFILE", "AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(name, raising=False)
    assert client_settings(base) == {"endpoint_url": "https://bedrock-runtime.us-east-1.amazonaws.com",
                                     "region_name": "us-east-1"}
    monkeypatch.setenv("AWS_REGION", "eu-west-1")  # a configured region wins over the catalogue's endpoint
    assert client_settings(base) == {"region_name": "eu-west-1"}
    proxy = msgspec.structs.replace(base, baseUrl="https://bedrock.internal.example:8443")
    assert client_settings(proxy) == {"endpoint_url": "https://bedrock.internal.example:8443",
                                      "region_name": "eu-west-1"}
    monkeypatch.delenv("AWS_REGION")
    monkeypatch.setenv("AWS_PROFILE", "work")  # the profile's own region: boto3 decides
    assert client_settings(base) == {}


async def test_without_boto3_the_error_names_the_extra(bedrock, monkeypatch):
    monkeypatch.setitem(sys.modules, "boto3", None)  # import boto3 raises ImportError
    from pisces.ai.providers import _shared

    monkeypatch.setattr(_shared, "_CLIENTS", type(_shared._CLIENTS)())
    msg = final(await collect(bedrock, ctx(), opts()))
    assert msg.stopReason == "error" and "pip install 'pisces-agent[bedrock]'" in msg.errorMessage


def test_credentials_from_the_aws_chain_count_as_a_key(tmp_path, monkeypatch):
    from pisces.core.config.auth import AuthStorage

    for name in ("AWS_PROFILE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_BEARER_TOKEN_BEDROCK",
                 "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                 "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_BEDROCK_SKIP_AUTH"):
        monkeypatch.delenv(name, raising=False)
    auth = AuthStorage(str(tmp_path))
    assert auth.lookup("amazon-bedrock") == (None, None)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKID")
    assert auth.lookup("amazon-bedrock") == (None, None)  # half a key pair is none
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s")
    assert auth.lookup("amazon-bedrock") == ("<authenticated>", "env:AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.setenv("AWS_PROFILE", "work")
    assert auth.lookup("amazon-bedrock") == ("<authenticated>", "env:AWS_PROFILE")


def test_the_request_is_json_serialisable(bedrock):
    from pisces.ai.providers.bedrock import build_request

    req = build_request(bedrock, ctx(tools=[TOOL]), opts(reasoning="low", temperature=0.5))
    json.dumps(req)
    assert "temperature" not in req["inferenceConfig"]  # not with thinking, as Anthropic requires
    assert build_request(bedrock, ctx(), opts(temperature=0.5))["inferenceConfig"]["temperature"] == 0.5


async def test_abort_mid_stream_keeps_the_text(bedrock, server):
    import time

    from provider_helpers import abort_soon_after_text_deltas

    from pisces.ai.abort import AbortSignal
    from scripted_server import Stall

    server.push(Reply(status=200, headers={"content-type": CONTENT_TYPE}, chunks=[iter([
        event("messageStart", {"role": "assistant"}),
        event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "partial"}}),
        Stall(60), event("messageStop", {"stopReason": "end_turn"})])]))
    signal = AbortSignal()
    t0 = time.monotonic()
    types, last = await abort_soon_after_text_deltas(bedrock, ctx(), opts(signal=signal), signal)
    assert time.monotonic() - t0 < 30  # bounds a hang: the event types show the stall was cut short
    assert types == ["start", "text_start", "text_delta", "text_end", "error"]
    assert last.reason == "aborted" and last.error.content == [TextContent(text="partial")]


async def test_sdk_retries_a_503_when_asked(bedrock, server):
    server.push(Reply.json(503, {"message": "Service unavailable"},
                           headers={"x-amzn-errortype": "ServiceUnavailableException"}),
                stream_reply(event("messageStart", {"role": "assistant"}),
                             event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "ok"}}),
                             event("contentBlockStop", {"contentBlockIndex": 0}),
                             event("messageStop", {"stopReason": "end_turn"}),
                             event("metadata", {"usage": {"inputTokens": 1, "outputTokens": 1}})))
    events = await collect(bedrock, ctx(), opts(maxRetries=1))
    assert kinds(events)[-1] == "done" and final(events).content[0].text == "ok" and len(server.requests) == 2
