"""The OpenAI-compatible providers of the catalogue (OpenRouter, Groq, Cerebras, xAI, DeepSeek, Hugging Face,
Z.ai, Moonshot, Cloudflare, opencode, GitHub Copilot's completions models, ...), each through the real openai
SDK against the local scripted server: a real catalogue model of the provider, re-pointed at 127.0.0.1, its
key taken from the provider's own variable, and the request checked for that provider's quirks as pi's
compat flags give them (written out here by hand from pi 0.73.1's detection rules, not computed)."""

from __future__ import annotations

import msgspec
import pytest
from provider_helpers import collect, context_factory, final, kinds, options_factory

from pisces.ai import catalogue
from pisces.ai.models import PROVIDER_ENV_KEYS, calculate_cost
from pisces.ai.types import AssistantMessage, TextContent, ThinkingContent, Tool, ToolCall, ToolResultMessage, Usage
from scripted_server import Reply

# provider -> (max tokens field, sends store:false, developer role for reasoning models, how reasoning is asked)
QUIRKS = {
    "openrouter": ("max_completion_tokens", True, True, "openrouter"),
    "groq": ("max_completion_tokens", True, True, "reasoning_effort"),
    "huggingface": ("max_completion_tokens", True, False, "reasoning_effort"),  # the catalogue: no developer
    "cerebras": ("max_completion_tokens", False, False, "reasoning_effort"),
    "xai": ("max_completion_tokens", False, False, None),
    "deepseek": ("max_completion_tokens", False, False, "deepseek"),
    "zai": ("max_completion_tokens", False, False, "zai"),
    "moonshotai": ("max_tokens", False, False, None),
    "moonshotai-cn": ("max_tokens", False, False, None),
    "cloudflare-workers-ai": ("max_completion_tokens", False, False, "reasoning_effort"),
    "opencode-go": ("max_completion_tokens", False, False, "deepseek"),  # its first reasoning model: DeepSeek
    "opencode": ("max_completion_tokens", False, False, "reasoning_effort"),
    "github-copilot": ("max_completion_tokens", False, False, None),  # the catalogue's flags for Copilot
}

user, ctx = context_factory("You are a test.")
TOOL = Tool(name="read", description="Read a file", parameters={"type": "object", "properties": {}})


def family_model(provider: str, server, *, reasoning: bool | None = None):
    """A catalogue model of ``provider`` on the completions wire (a reasoning one when asked), at ``server``."""
    pool = [m for m in catalogue.models(provider) if m.api == "openai-completions"]
    if reasoning is not None:
        pool = [m for m in pool if m.reasoning == reasoning] or pool
    m = pool[0]
    return msgspec.structs.replace(m, baseUrl=server.url + "/v1", input=list(m.input))


@pytest.fixture
def keyed(monkeypatch):
    """Clear every provider's variables; ``keyed(provider)`` sets the first one and returns its value."""
    for names in PROVIDER_ENV_KEYS.values():
        for name in names:
            monkeypatch.delenv(name, raising=False)

    def set_key(provider: str) -> str:
        value = f"key-for-{provider}"
        monkeypatch.setenv(PROVIDER_ENV_KEYS[provider][0], value)
        return value

    return set_key


def sse_chunk(delta=None, finish=None, usage=None):
    body = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0, "model": "m",
            "choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish}] if usage is None else []}
    if usage is not None:
        body["usage"] = usage
    return body


@pytest.mark.parametrize("provider", sorted(QUIRKS))
async def test_provider_streams_thinking_text_tool_call_and_usage(provider, server, keyed):
    key = keyed(provider)
    model = family_model(provider, server, reasoning=True)
    field, store, developer, reasoning = QUIRKS[provider]
    server.push(Reply.sse([
        sse_chunk({"role": "assistant", "reasoning_content": "Let me think."}),
        sse_chunk({"content": "Reading it."}),
        sse_chunk({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                                   "function": {"name": "read", "arguments": '{"pa'}}]}),
        sse_chunk({"tool_calls": [{"index": 0, "function": {"arguments": 'th":"a.txt"}'}}]}),
        sse_chunk({}, "tool_calls"),
        sse_chunk(usage={"prompt_tokens": 1000, "completion_tokens": 200, "total_tokens": 1200,
                         "prompt_tokens_details": {"cached_tokens": 400}}),
    ], done=True))
    events = await collect(model, ctx(user("read a.txt"), tools=[TOOL]),
                           options_factory(None)(reasoning="high" if model.reasoning else None, maxTokens=999))
    assert kinds(events)[-1] == "done", final(events).errorMessage
    msg = final(events)
    assert [type(b) for b in msg.content] == [ThinkingContent, TextContent, ToolCall]
    assert msg.content[0].thinking == "Let me think." and msg.content[1].text == "Reading it."
    assert (msg.content[2].name, msg.content[2].arguments) == ("read", {"path": "a.txt"})
    assert msg.stopReason == "toolUse"
    assert (msg.usage.input, msg.usage.output, msg.usage.cacheRead) == (600, 200, 400)
    expected = Usage(input=600, output=200, cacheRead=400)
    calculate_cost(model, expected)
    assert msg.usage.cost.total == expected.cost.total
    assert model.cost.input == 0 or msg.usage.cost.total > 0

    req = server.requests[0]
    assert req.path == "/v1/chat/completions"
    assert req.headers.get("authorization") == f"Bearer {key}"
    body = req.body
    assert body["model"] == model.id and body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body.get(field) == 999 and len({"max_tokens", "max_completion_tokens"} & set(body)) == 1
    assert ("store" in body) is store and body.get("store", False) is False
    role = "developer" if developer and model.reasoning else "system"
    assert body["messages"][0] == {"role": role, "content": "You are a test."}
    assert body["tools"][0]["function"]["name"] == "read"
    # Moonshot refuses "strict" in a tool definition; the others get strict: false
    assert body["tools"][0]["function"].get("strict", "absent") == ("absent" if "moonshot" in provider else False)
    if not model.reasoning:
        return
    if reasoning == "openrouter":
        assert body["reasoning"] == {"effort": "high"} and "reasoning_effort" not in body
    elif reasoning == "deepseek":
        assert body["thinking"] == {"type": "enabled"} and body["reasoning_effort"] in ("high", "max")
    elif reasoning == "zai":
        assert body["enable_thinking"] is True and "reasoning_effort" not in body
    elif reasoning == "reasoning_effort":
        assert body["reasoning_effort"] in ("high", "medium", "low")
    else:
        assert not {"reasoning_effort", "reasoning", "thinking", "enable_thinking"} & set(body)


async def test_session_affinity_headers_where_the_catalogue_asks_for_them(server, keyed):
    keyed("cloudflare-workers-ai")
    keyed("groq")
    cf = msgspec.structs.replace(family_model("cloudflare-workers-ai", server), baseUrl=server.url + "/v1")
    groq = family_model("groq", server)
    for _ in range(2):
        server.push(Reply.sse([sse_chunk({"content": "ok"}), sse_chunk({}, "stop")], done=True))
    await collect(cf, ctx(user("q")), options_factory(None)(sessionId="sess-1"))
    await collect(groq, ctx(user("q")), options_factory(None)(sessionId="sess-1"))
    assert server.requests[0].headers.get("x-session-affinity") == "sess-1"
    assert server.requests[0].headers.get("session_id") == "sess-1"
    assert "x-session-affinity" not in server.requests[1].headers


async def test_thinking_off_is_said_the_providers_way(server, keyed):
    keyed("deepseek")
    keyed("zai")
    ds = family_model("deepseek", server, reasoning=True)
    zai = family_model("zai", server, reasoning=True)
    for _ in range(2):
        server.push(Reply.sse([sse_chunk({"content": "ok"}), sse_chunk({}, "stop")], done=True))
    assert kinds(await collect(ds, ctx(user("q")), options_factory(None)()))[-1] == "done"
    assert kinds(await collect(zai, ctx(user("q")), options_factory(None)()))[-1] == "done"
    assert server.requests[0].body["thinking"] == {"type": "disabled"}
    assert "reasoning_effort" not in server.requests[0].body
    assert server.requests[1].body["enable_thinking"] is False


async def test_deepseek_replays_reasoning_content_on_assistant_messages(server, keyed):
    keyed("deepseek")
    model = family_model("deepseek", server, reasoning=True)
    prior = AssistantMessage(content=[TextContent(text="Earlier answer.")], api=model.api, provider=model.provider,
                             model=model.id, stopReason="stop")
    server.push(Reply.sse([sse_chunk({"content": "ok"}), sse_chunk({}, "stop")], done=True))
    await collect(model, ctx(user("a"), prior, user("b")), options_factory(None)())
    assistant = [m for m in server.requests[0].body["messages"] if m["role"] == "assistant"]
    assert assistant == [{"role": "assistant", "content": "Earlier answer.", "reasoning_content": ""}]


async def test_zai_tool_stream_flag_and_assistant_bridge_after_tool_results(server, keyed):
    keyed("zai")
    model = family_model("zai", server, reasoning=True)
    model = msgspec.structs.replace(model, compat={**(model.compat or {}), "zaiToolStream": True,
                                                   "requiresAssistantAfterToolResult": True})
    call = ToolCall(id="call_1", name="read", arguments={"path": "a"})
    prior = AssistantMessage(content=[call], api=model.api, provider=model.provider, model=model.id,
                             stopReason="toolUse")
    result = ToolResultMessage(toolCallId="call_1", toolName="read", content=[TextContent(text="A")], isError=False)
    server.push(Reply.sse([sse_chunk({"content": "ok"}), sse_chunk({}, "stop")], done=True))
    await collect(model, ctx(user("a"), prior, result, user("b"), tools=[TOOL]), options_factory(None)())
    body = server.requests[0].body
    assert body["tool_stream"] is True
    roles = [m["role"] for m in body["messages"]]
    assert roles == ["system", "user", "assistant", "tool", "assistant", "user"]
    assert body["messages"][4] == {"role": "assistant", "content": "I have processed the tool results."}
    assert body["messages"][2]["content"] == ""  # such servers refuse a null content


async def test_cloudflare_account_id_fills_the_base_url(server, keyed, monkeypatch):
    keyed("cloudflare-workers-ai")
    model = catalogue.models("cloudflare-workers-ai")[0]
    assert "{CLOUDFLARE_ACCOUNT_ID}" in model.baseUrl
    events = await collect(model, ctx(user("q")), options_factory(None)())
    assert final(events).errorMessage == ("CLOUDFLARE_ACCOUNT_ID is required for provider cloudflare-workers-ai "
                                          "but is not set")
    # the placeholder filled from the environment: here it points the request at the local server
    local = msgspec.structs.replace(model, baseUrl=server.url + "/{CLOUDFLARE_ACCOUNT_ID}/ai/v1")
    monkeypatch.setenv("CLOUDFLARE_ACCOUNT_ID", "acct42")
    server.push(Reply.sse([sse_chunk({"content": "ok"}), sse_chunk({}, "stop")], done=True))
    assert kinds(await collect(local, ctx(user("q")), options_factory(None)()))[-1] == "done"
    assert server.requests[0].path == "/acct42/ai/v1/chat/completions"


@pytest.mark.parametrize("provider", ["openrouter", "groq", "xai", "deepseek", "moonshotai"])
async def test_rate_limit_carries_retry_after_and_errors_keep_the_server_text(provider, server, keyed):
    keyed(provider)
    model = family_model(provider, server)
    server.push(Reply.json(429, {"error": {"message": "Rate limit reached", "type": "rate_limit"}},
                           headers={"retry-after": "7"}),
                Reply.json(400, {"error": {"message": "Invalid model", "type": "invalid_request_error"}}))
    events = await collect(model, ctx(user("q")), options_factory(None)())
    assert kinds(events) == ["start", "error"]
    assert final(events).errorMessage == "429 Rate limit reached (retry-after: 7s)"
    events = await collect(model, ctx(user("q")), options_factory(None)())
    assert final(events).errorMessage == "400 Invalid model"


async def test_sdk_retry_honours_retry_after_then_succeeds(server, keyed):
    keyed("groq")
    model = family_model("groq", server)
    server.push(Reply(status=429, headers={"retry-after-ms": "10", "content-type": "application/json"},
                      chunks=['{"error":{"message":"slow down"}}']),
                Reply.sse([sse_chunk({"content": "ok"}), sse_chunk({}, "stop")], done=True))
    events = await collect(model, ctx(user("q")), options_factory(None)(maxRetries=1))
    assert kinds(events)[-1] == "done" and len(server.requests) == 2


async def test_missing_key_names_the_providers_variable(server, keyed):
    model = family_model("openrouter", server)
    events = await collect(model, ctx(user("q")), options_factory(None)())
    assert "OPENROUTER_API_KEY" in final(events).errorMessage
    assert server.requests == []


async def test_mistral_through_its_openai_compatible_endpoint(server, keyed):
    """pi's ``mistral-conversations`` models, sent to Mistral's Chat Completions endpoint with its quirks."""
    key = keyed("mistral")
    model = next(m for m in catalogue.models("mistral") if not m.reasoning)
    assert model.api == "mistral-conversations" and model.baseUrl == "https://api.mistral.ai"
    model = msgspec.structs.replace(model, baseUrl=server.url, input=list(model.input))
    call = ToolCall(id="toolu_01ABCdef-long-id", name="read", arguments={"path": "a"})
    prior = AssistantMessage(content=[ThinkingContent(thinking="Plan."), TextContent(text="Reading."), call],
                             api="anthropic-messages", provider="anthropic", model="claude-x", stopReason="toolUse")
    result = ToolResultMessage(toolCallId=call.id, toolName="read", content=[TextContent(text="A")], isError=False)
    server.push(Reply.sse([
        sse_chunk({"role": "assistant", "content": "Done."}),
        sse_chunk({}, "stop"),
        sse_chunk(usage={"prompt_tokens": 50, "completion_tokens": 5, "total_tokens": 55}),
    ], done=True))
    events = await collect(model, ctx(user("a"), prior, result, user("b"), tools=[TOOL]),
                           options_factory(None)(maxTokens=500))
    assert kinds(events)[-1] == "done", final(events).errorMessage
    msg = final(events)
    assert msg.content[0].text == "Done." and msg.api == "mistral-conversations" and msg.usage.input == 50
    req = server.requests[0]
    assert req.path == "/v1/chat/completions" and req.headers["authorization"] == f"Bearer {key}"
    body = req.body
    assert body["max_tokens"] == 500 and "max_completion_tokens" not in body and "store" not in body
    msgs = body["messages"]
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "tool", "assistant", "user"]
    sent_id = msgs[2]["tool_calls"][0]["id"]
    assert len(sent_id) == 9 and sent_id.isalnum() and msgs[3]["tool_call_id"] == sent_id
    assert msgs[3]["name"] == "read"
    assert msgs[2]["content"] == "Plan.Reading."  # another model's thinking arrives as text already
    # the same model's own thinking is replayed as text blocks, as Mistral needs
    own = AssistantMessage(content=[ThinkingContent(thinking="Plan."), TextContent(text="Answer.")], api=model.api,
                           provider="mistral", model=model.id, stopReason="stop")
    server.push(Reply.sse([sse_chunk({"content": "ok"}), sse_chunk({}, "stop")], done=True))
    await collect(model, ctx(user("a"), own, user("b")), options_factory(None)())
    assert server.requests[1].body["messages"][2]["content"] == [{"type": "text", "text": "Plan."},
                                                                 {"type": "text", "text": "Answer."}]
    assert msgs[4] == {"role": "assistant", "content": "I have processed the tool results."}
