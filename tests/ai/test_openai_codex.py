"""The ChatGPT subscription's Codex backend (``openai-codex-responses``) through the openai SDK against the
scripted server: pi's path, headers and body (instructions instead of a system item, no max_output_tokens,
store false, low verbosity, encrypted reasoning), reasoning, text and a tool call, usage and cost, a usage-limit
429, and a token without the account claim."""

from __future__ import annotations

import base64
import json

import msgspec
import pytest
from provider_helpers import collect, context_factory, final, kinds
from test_openai_responses import completed, created, function_call_item, message_item, reasoning_item

from pisces.ai import catalogue
from pisces.ai.providers.openai_codex import codex_base
from pisces.ai.types import StreamOptions, TextContent, ThinkingContent, Tool, ToolCall
from scripted_server import Reply

user, ctx = context_factory("You are a test.", default_prompt="Hi")
TOOL = Tool(name="bash", description="Run", parameters={"type": "object", "properties": {}})


def _jwt(claims: dict) -> str:
    enc = lambda o: base64.urlsafe_b64encode(json.dumps(o).encode()).rstrip(b"=").decode()  # noqa: E731
    return f"{enc({'alg': 'none'})}.{enc(claims)}.sig"


TOKEN = _jwt({"https://api.openai.com/auth": {"chatgpt_account_id": "acct-42"}})


@pytest.fixture
def codex(server):
    model = next(m for m in catalogue.models("openai-codex") if m.id == "gpt-5.1")
    return msgspec.structs.replace(model, baseUrl=server.url + "/backend-api", input=list(model.input))


def opts(**kw) -> StreamOptions:
    kw.setdefault("apiKey", TOKEN)
    kw.setdefault("maxRetries", 0)
    return StreamOptions(**kw)


async def test_reasoning_text_tool_call_and_the_request(codex, server):
    server.push(Reply.sse([created(), *reasoning_item(), *message_item(["Run", "ning."], index=1),
                           *function_call_item(['{"cmd":', '"ls"}'], index=2), completed(1000, 50, cached=200)],
                          named=True))
    events = await collect(codex, ctx(tools=[TOOL]), opts(reasoning="high", sessionId="sess-1"))
    msg = final(events)
    assert kinds(events)[-1] == "done", msg.errorMessage
    assert [type(b) for b in msg.content] == [ThinkingContent, TextContent, ToolCall]
    assert msg.content[2].arguments == {"cmd": "ls"} and msg.stopReason == "toolUse"
    assert (msg.usage.input, msg.usage.cacheRead, msg.usage.output) == (800, 200, 50)
    req = server.requests[0]
    assert req.path == "/backend-api/codex/responses"
    h = req.headers
    assert h["authorization"] == f"Bearer {TOKEN}" and h["chatgpt-account-id"] == "acct-42"
    assert h["originator"] == "pi" and h["openai-beta"] == "responses=experimental" and h["session_id"] == "sess-1"
    body = req.body
    assert body["instructions"] == "You are a test." and body["store"] is False
    assert all(i.get("role") not in ("system", "developer") for i in body["input"])
    assert "max_output_tokens" not in body and body["text"] == {"verbosity": "low"}
    assert body["include"] == ["reasoning.encrypted_content"] and body["reasoning"]["effort"] == "high"
    assert body["tool_choice"] == "auto" and body["parallel_tool_calls"] is True
    assert "strict" not in body["tools"][0] and body["prompt_cache_key"] == "sess-1"


async def test_usage_limit_and_bad_token(codex, server):
    server.push(Reply.json(429, {"error": {"code": "usage_limit_reached", "message": "The usage limit has been reached",
                                           "type": "usage_limit_reached"}}, headers={"retry-after": "60"}))
    msg = final(await collect(codex, ctx(), opts()))
    assert msg.stopReason == "error" and msg.errorMessage.startswith("429") and "usage limit" in msg.errorMessage
    msg = final(await collect(codex, ctx(), opts(apiKey="not-a-jwt")))
    assert "Failed to extract accountId" in msg.errorMessage and len(server.requests) == 1


def test_base_url_forms():
    m = catalogue.models("openai-codex")[0]
    for base, want in (("https://chatgpt.com/backend-api", "https://chatgpt.com/backend-api/codex"),
                       ("https://x/backend-api/codex", "https://x/backend-api/codex"),
                       ("https://x/backend-api/codex/responses/", "https://x/backend-api/codex")):
        assert codex_base(msgspec.structs.replace(m, baseUrl=base)) == want
