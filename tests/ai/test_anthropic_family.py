"""The catalogue's providers that speak Anthropic's Messages API (Vercel AI Gateway, Fireworks, MiniMax, Kimi
Coding, Xiaomi MiMo, opencode's Claude models): a real catalogue model of each, re-pointed at the local scripted
server, through the real anthropic SDK, with the key from the provider's own variable (pi sends it as
``x-api-key`` to these servers)."""

from __future__ import annotations

import msgspec
import pytest
from provider_helpers import collect, context_factory, final, kinds, options_factory
from test_anthropic import MSG_STOP, block_start, block_stop, delta, msg_delta, msg_start, text_delta

from pisces.ai import catalogue
from pisces.ai.models import PROVIDER_ENV_KEYS
from pisces.ai.types import TextContent, ThinkingContent
from scripted_server import Reply

PROVIDERS = ["vercel-ai-gateway", "fireworks", "minimax", "minimax-cn", "kimi-coding", "xiaomi", "opencode"]
user, ctx = context_factory("You are terse.", default_prompt="Hi")


def family_model(provider: str, server):
    m = next(m for m in catalogue.models(provider) if m.api == "anthropic-messages" and m.reasoning)
    return msgspec.structs.replace(m, baseUrl=server.url, input=list(m.input))


@pytest.fixture
def clean_env(monkeypatch):
    for names in PROVIDER_ENV_KEYS.values():
        for name in names:
            monkeypatch.delenv(name, raising=False)
    return monkeypatch


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_provider_streams_thinking_text_and_usage(provider, server, clean_env):
    clean_env.setenv(PROVIDER_ENV_KEYS[provider][0], f"key-{provider}")
    model = family_model(provider, server)
    server.push(Reply.sse([
        msg_start(input_tokens=100, cache_read=50, model=model.id),
        block_start(0, {"type": "thinking", "thinking": ""}),
        delta(0, {"type": "thinking_delta", "thinking": "Hmm."}),
        delta(0, {"type": "signature_delta", "signature": "sig"}),
        block_stop(0),
        block_start(1, {"type": "text", "text": ""}),
        text_delta(1, "Hello"),
        block_stop(1),
        msg_delta(output_tokens=20),
        MSG_STOP,
    ], named=True))
    events = await collect(model, ctx(), options_factory(None)(reasoning="medium"))
    assert kinds(events)[-1] == "done", final(events).errorMessage
    msg = final(events)
    assert [type(b) for b in msg.content] == [ThinkingContent, TextContent]
    assert msg.content[1].text == "Hello" and msg.usage.output == 20 and msg.usage.cacheRead == 50
    assert msg.usage.cost.total > 0 or model.cost.input == 0
    req = server.requests[0]
    # the SDK sends the key as x-api-key or, in newer versions, as a bearer token (as test_anthropic allows)
    assert req.path == "/v1/messages"
    assert f"key-{provider}" in (req.headers.get("x-api-key", "") + req.headers.get("authorization", ""))
    assert req.body["model"] == model.id and req.body["stream"] is True


@pytest.mark.parametrize("provider", ["vercel-ai-gateway", "fireworks"])
async def test_rate_limit_and_error(provider, server, clean_env):
    clean_env.setenv(PROVIDER_ENV_KEYS[provider][0], "k")
    model = family_model(provider, server)
    server.push(Reply.json(429, {"type": "error", "error": {"type": "rate_limit_error", "message": "Too fast"}},
                           headers={"retry-after": "3"}))
    events = await collect(model, ctx(), options_factory(None)())
    assert kinds(events) == ["start", "error"]
    assert "429" in final(events).errorMessage and "retry-after: 3s" in final(events).errorMessage


async def test_missing_key_names_the_variable(server, clean_env):
    events = await collect(family_model("minimax", server), ctx(), options_factory(None)())
    assert "MINIMAX_API_KEY" in final(events).errorMessage and server.requests == []
