"""``providers.direct``: the request it sends is the installed SDK's request, header for header; a fresh
interpreter gets a complete reply without importing the SDK; ``auto`` sends directly whether the SDK is
imported or not, and the idle warm-up imports no SDK for it; the SDK's retry policy."""

from __future__ import annotations

import os
import subprocess
import sys
import types

import httpx2
import pytest
from provider_helpers import collect, context_factory, final, kinds, options_factory
from test_openai_responses import completed, created, message_item

from pisces.ai.providers import direct
from pisces.ai.types import Model, ModelCost
from scripted_server import Reply

opts = options_factory("parity-key")
user, ctx = context_factory("You are a test.")


def _chunk(delta: dict, finish: str | None = None) -> dict:
    return {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def _openai_reply() -> Reply:
    return Reply.sse([_chunk({"content": "ok"}), _chunk({}, "stop")], done=True)


def _anthropic_reply() -> Reply:
    return Reply.sse([
        {"type": "message_start", "message": {"id": "msg_1", "model": "m", "usage": {"input_tokens": 3,
                                                                                      "output_tokens": 1}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "ok"}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 2}},
        {"type": "message_stop"}], named=True)


def _responses_reply() -> Reply:
    return Reply.sse([created(), *message_item(["ok"]), completed()], named=True)


def _model(server, api: str, **kw) -> Model:
    base = "/v1" if api.startswith("openai") else ""
    return Model(id="m", name="m", api=api, provider="scripted", baseUrl=server.url + base, reasoning=False,
                 input=["text"], cost=ModelCost(), contextWindow=8000, maxTokens=1000, **kw)


CASES = [
    ("openai-completions", {}, {}),
    ("openai-completions", {"headers": {"X-Model": "1"}}, {"headers": {"X-Call": "2"}, "timeoutMs": 30000}),
    ("openai-responses", {}, {"sessionId": "s-1"}),
    ("anthropic-messages", {}, {}),
    ("anthropic-messages", {"headers": {"X-Model": "1", "anthropic-beta": "b1"}},
     {"headers": {"X-Call": "2"}, "timeoutMs": 45000}),
]


@pytest.mark.parametrize("api, model_kw, options_kw", CASES)
async def test_the_direct_request_is_the_sdks_request(server, monkeypatch, api, model_kw, options_kw):
    reply = {"anthropic-messages": _anthropic_reply, "openai-responses": _responses_reply}.get(api, _openai_reply)
    model = _model(server, api, **model_kw)
    seen = []
    for transport in ("sdk", "direct"):
        monkeypatch.setenv("PISCES_PROVIDER_TRANSPORT", transport)
        server.push(reply())
        events = await collect(model, ctx(user("q")), opts(**options_kw))
        assert kinds(events)[-1] == "done", final(events).errorMessage
        seen.append(server.requests[-1])
    via_sdk, via_direct = seen
    assert "openai" in sys.modules or "anthropic" in sys.modules  # the SDK really sent the first one
    assert (via_direct.method, via_direct.path) == (via_sdk.method, via_sdk.path)
    assert via_direct.body == via_sdk.body
    assert via_direct.headers == via_sdk.headers


def test_a_fresh_interpreter_gets_its_reply_without_importing_the_sdk():
    code = r'''
import asyncio, sys
sys.path[:0] = ["tests", "tests/ai"]
from provider_helpers import collect, context_factory, options_factory
from scripted_server import Reply, ScriptedServer
from pisces.ai.types import Model

user, ctx = context_factory("s")
chunk = lambda d, f=None: {"id": "c", "choices": [{"index": 0, "delta": d, "finish_reason": f}]}
with ScriptedServer() as srv:
    srv.push(Reply.sse([chunk({"content": "hel"}), chunk({"content": "lo"}), chunk({}, "stop")], done=True))
    model = Model(id="m", name="m", api="openai-completions", provider="p", baseUrl=srv.url + "/v1")
    events = asyncio.run(collect(model, ctx(user("q")), options_factory("k")()))
    print(events[-1].message.content[0].text, events[-1].reason, "openai" in sys.modules,
          srv.requests[0].headers["authorization"])
'''
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["hello", "stop", "False", "Bearer", "k"]


def test_auto_sends_directly_whether_or_not_the_sdk_is_imported(monkeypatch):
    monkeypatch.delenv("PISCES_PROVIDER_TRANSPORT", raising=False)
    half = types.ModuleType("openai")
    half.__spec__ = types.SimpleNamespace(_initializing=True)
    monkeypatch.setitem(sys.modules, "openai", half)
    assert direct.use_direct("openai")  # being imported (by an extension, say): do not wait for it
    half.__spec__ = types.SimpleNamespace(_initializing=False)
    assert direct.use_direct("openai")  # imported: still direct, one process sends one way
    monkeypatch.setenv("PISCES_PROVIDER_TRANSPORT", "direct")
    assert direct.use_direct("openai")
    monkeypatch.setenv("PISCES_PROVIDER_TRANSPORT", "sdk")
    assert not direct.use_direct("openai")
    monkeypatch.delitem(sys.modules, "openai")
    assert not direct.use_direct("openai")


def test_the_idle_warm_up_of_a_direct_api_imports_no_sdk():
    code = ("import sys; from pisces.ai import providers; providers.prepare('openai-completions'); "
            "providers.prepare('anthropic-messages'); from pisces.ai.providers import direct; "
            "print('openai' in sys.modules, 'anthropic' in sys.modules, len(direct._prebuilt))")
    env = {k: v for k, v in os.environ.items() if k != "PISCES_PROVIDER_TRANSPORT"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "False", "1"]  # no SDK, one client built for both APIs


def test_an_sdk_whose_version_cannot_be_read_is_waited_for(monkeypatch):
    monkeypatch.setenv("PISCES_PROVIDER_TRANSPORT", "direct")
    assert not direct.use_direct("pisces_no_such_sdk")


def test_the_sdks_constants_are_read_without_importing_it():
    code = ("import sys; from pisces.ai.providers import direct; "
            "print(direct.package_version('anthropic'), direct.anthropic_api_version(), 'anthropic' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    import anthropic
    from anthropic._constants import ANTHROPIC_API_VERSION

    assert out.stdout.split() == [anthropic.__version__, ANTHROPIC_API_VERSION, "False"]


def _headers(**kw: str) -> httpx2.Headers:
    return httpx2.Headers(kw)


@pytest.mark.parametrize("status, headers, retry", [
    (503, {}, True), (500, {}, True), (429, {}, True), (409, {}, True), (408, {}, True),
    (400, {}, False), (401, {}, False), (404, {}, False),
    (503, {"x-should-retry": "false"}, False), (400, {"x-should-retry": "true"}, True),
    (429, {"retry-after": "121"}, False),  # longer than two minutes: not retried
])
def test_should_retry_follows_the_sdk(status, headers, retry):
    response = httpx2.Response(status, headers=headers)
    assert direct.should_retry(response) is retry


def test_retry_delay_honours_the_server_then_backs_off():
    assert direct.retry_delay(0, _headers(**{"retry-after-ms": "250"})) == 0.25
    assert direct.retry_delay(3, _headers(**{"retry-after": "2"})) == 2.0
    for taken, top in ((0, 0.5), (1, 1.0), (2, 2.0), (5, 8.0)):
        delay = direct.retry_delay(taken, _headers())
        assert top * 0.75 <= delay <= top


@pytest.mark.parametrize("tls", [True, False])
def test_prepare_builds_the_tls_context_only_when_asked(tls):
    code = ("from pisces.ai.providers import direct; "
            f"direct.prepare(tls={tls}); print(direct._prebuilt[0]._transport._tls is not None)")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PISCES_", "HTTP", "HTTPS", "ALL_PROXY"))}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str(tls)
