"""``providers.google_direct``: a Gemini request sent without google-genai is the installed SDK's request byte
for byte (URL, body, every header) for each shape pisces sends; retries and errors come out the same; a
fresh interpreter gets a complete reply without importing the SDK, and ``PISCES_PROVIDER_TRANSPORT=sdk``
still goes through it; a payload ``google_direct`` does not know goes through the SDK."""

from __future__ import annotations

import os
import subprocess
import sys

import msgspec
import pytest
from provider_helpers import PNG, collect, context_factory, final, kinds, options_factory
from test_google import BASH, USAGE, chunk, make_model

from pisces.ai.providers import google_direct
from pisces.ai.types import (
    AssistantMessage,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from scripted_server import DROP, Reply

opts = options_factory("parity-key")
user, ctx = context_factory("You are terse.", user_timestamp=1, default_prompt="Hi")
MINE = dict(api="google-generative-ai", provider="google", model="gemini-2.5-flash")


def _reply() -> Reply:
    return Reply.sse([chunk({"text": "ok"}, finish="STOP", usage=USAGE)])


def _history():
    """Thinking, text and a call with signatures (one in base64's URL-safe alphabet), results, images."""
    return [
        user("Look"),
        AssistantMessage(content=[ThinkingContent(thinking="Hmm.", thinkingSignature="VGhpbmtTaWc="),
                                  TextContent(text="Let me run it.", textSignature="-_-_"),
                                  ToolCall(id="t1", name="bash", arguments={"command": "ls", "n": 1.5},
                                           thoughtSignature="Q2FsbFNpZw==")],
                         stopReason="toolUse", **MINE),
        ToolResultMessage(toolCallId="t1", toolName="bash",
                          content=[TextContent(text="a\nb ü"), ImageContent(data=PNG, mimeType="image/png")]),
        ToolResultMessage(toolCallId="t2", toolName="bash", content=[TextContent(text="bad")], isError=True),
        UserMessage(content=[TextContent(text="And this?"), ImageContent(data=PNG, mimeType="image/png")], timestamp=2),
    ]


SHAPES = {
    "plain text": (dict(), lambda: ctx(), dict()),
    "no system prompt, temperature": (dict(reasoning=False), lambda: ctx(system=None), dict(temperature=0.3)),
    "system prompt and tools": (dict(), lambda: ctx(user("ls"), system="Be brief ✓.", tools=[BASH]), dict()),
    "thinking 2.5 medium": (dict(), lambda: ctx(), dict(reasoning="medium")),
    "thinking 2.5 off": (dict(), lambda: ctx(), dict(reasoning="off")),
    "thinking budgets": (dict(id="gemini-2.5-pro"), lambda: ctx(), dict(reasoning="low",
                                                                       thinkingBudgets={"low": 1000})),
    "thinking gemini 3 pro": (dict(id="gemini-3-pro-preview"), lambda: ctx(), dict(reasoning="high")),
    "thinking gemini 3 flash off": (dict(id="gemini-3-flash-preview"), lambda: ctx(), dict()),
    "history with images, 2.5": (dict(), lambda: ctx(*_history(), tools=[BASH]), dict(reasoning="high")),
    "history with images, gemini 3": (dict(id="gemini-3-pro-preview"), lambda: ctx(*_history(), tools=[BASH]),
                                      dict()),
    "headers, time-out, max tokens": (dict(headers={"X-Model": "1", "User-Agent": "pisces-test/1"}), lambda: ctx(),
                                      dict(headers={"x-call": "2"}, timeoutMs=45500, maxTokens=777)),
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
async def test_the_direct_request_is_the_sdks_request(server, monkeypatch, shape):
    model_kw, make_ctx, options_kw = SHAPES[shape]
    model = make_model(server, **model_kw)
    seen = []
    for transport in ("sdk", "direct"):
        monkeypatch.setenv("PISCES_PROVIDER_TRANSPORT", transport)
        server.push(_reply())
        events = await collect(model, make_ctx(), opts(**options_kw))
        assert kinds(events)[-1] == "done", final(events).errorMessage
        seen.append(server.requests[-1])
    via_sdk, via_direct = seen
    assert "google.genai" in sys.modules  # the SDK really sent the first one
    assert (via_direct.method, via_direct.path) == (via_sdk.method, via_sdk.path)
    assert via_direct.raw == via_sdk.raw  # the body, byte for byte
    assert via_direct.headers == via_sdk.headers


async def test_a_payload_the_converter_does_not_know_goes_through_the_sdk(server, monkeypatch):
    monkeypatch.delenv("PISCES_PROVIDER_TRANSPORT", raising=False)
    opened = []
    real_open = google_direct.open_stream

    async def counting_open(*args, **kw):
        opened.append(args[0])
        return await real_open(*args, **kw)

    monkeypatch.setattr(google_direct, "open_stream", counting_open)

    async def add(extra):
        async def hook(payload):
            payload["config"].update(extra)
            return payload
        return hook

    sent = []
    for extra in ({"safety_settings": [{"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_NONE"}],
                   "top_p": 0.9, "stop_sequences": ["END"]},
                  {"labels": {"team": "a"}}):
        server.push(_reply())
        events = await collect(make_model(server), ctx(), opts(onPayload=await add(extra)))
        assert kinds(events)[-1] == "done", final(events).errorMessage
        sent.append(server.requests[-1].body)
    assert len(opened) == 1  # the first went directly, the second (labels) through the SDK
    assert sent[0]["safetySettings"] == [{"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_NONE"}]
    assert sent[0]["generationConfig"]["topP"] == 0.9 and sent[0]["generationConfig"]["stopSequences"] == ["END"]
    assert sent[1]["labels"] == {"team": "a"}


@pytest.mark.parametrize("transport", ["sdk", "direct"])
async def test_retries_follow_the_sdks_policy(server, monkeypatch, transport):
    monkeypatch.setenv("PISCES_PROVIDER_TRANSPORT", transport)
    busy = {"error": {"code": 503, "message": "The model is overloaded.", "status": "UNAVAILABLE"}}
    server.push(Reply.json(503, busy), Reply.json(429, busy), _reply())
    events = await collect(make_model(server), ctx(), opts(maxRetries=2))
    assert kinds(events)[-1] == "done", final(events).errorMessage
    assert len(server.requests) == 3
    server.push(Reply.json(400, {"error": {"code": 400, "message": "Bad.", "status": "INVALID_ARGUMENT"}}))
    events = await collect(make_model(server), ctx(), opts(maxRetries=2))
    assert final(events).errorMessage == "400 Bad." and len(server.requests) == 4  # a 400 is not retried


def test_retry_delays_are_the_sdks():
    for attempt, low in ((1, 1.0), (2, 2.0), (3, 4.0), (7, 60.0)):
        delay = google_direct.retry_delay(attempt)
        assert low <= delay <= min(low + 1.0, 60.0)


@pytest.mark.parametrize("transport", ["sdk", "direct"])
async def test_errors_are_worded_the_same(server, monkeypatch, transport):
    monkeypatch.setenv("PISCES_PROVIDER_TRANSPORT", transport)
    server.push(Reply(502, {"content-type": "text/html"}, ["<html>bad gateway</html>"]))
    events = await collect(make_model(server), ctx(), opts())
    assert final(events).errorMessage == "502 <html>bad gateway</html>"
    server.push(Reply.sse([chunk({"text": "x"}), "not json"]))
    events = await collect(make_model(server), ctx(), opts())
    assert final(events).errorMessage == ("UnknownApiResponseError: Failed to parse response as JSON. "
                                          "Raw response: not json")
    assert final(events).content == [TextContent(text="x")]


_FRESH = r'''
import asyncio, sys
sys.path[:0] = ["tests", "tests/ai"]
from provider_helpers import collect, context_factory, options_factory
from scripted_server import Reply, ScriptedServer
from pisces.ai.types import Model

user, ctx = context_factory("s")
def chunk(text, finish=None):
    c = {"candidates": [{"content": {"role": "model", "parts": [{"text": text}]}, "index": 0}]}
    if finish:
        c["candidates"][0]["finishReason"] = finish
    return c
with ScriptedServer() as srv:
    srv.push(Reply.sse([chunk("hel"), chunk("lo", "STOP")]))
    model = Model(id="gemini-2.5-flash", name="g", api="google-generative-ai", provider="google",
                  baseUrl=srv.url + "/v1beta")
    events = asyncio.run(collect(model, ctx(user("q")), options_factory("k")()))
    print(events[-1].message.content[0].text, events[-1].reason, "google.genai" in sys.modules,
          srv.requests[0].headers["x-goog-api-key"])
'''


@pytest.mark.parametrize("transport, imported", [("auto", "False"), ("sdk", "True")])
def test_a_fresh_interpreter_gets_its_reply_without_importing_the_sdk(transport, imported):
    env = {**os.environ, "PISCES_PROVIDER_TRANSPORT": transport}
    out = subprocess.run([sys.executable, "-c", _FRESH], capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["hello", "stop", imported, "k"]


def test_the_idle_warm_up_imports_no_sdk_for_gemini():
    code = ("import sys; from pisces.ai import providers; providers.prepare('google-generative-ai'); "
            "from pisces.ai.providers import direct; print('google.genai' in sys.modules, len(direct._prebuilt))")
    env = {k: v for k, v in os.environ.items() if k != "PISCES_PROVIDER_TRANSPORT"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "1"]


def test_the_sdks_version_is_read_without_importing_it(monkeypatch):
    code = ("import sys; from pisces.ai.providers import google_direct as g; "
            "print(g.sdk_version(), 'google.genai' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    from google.genai import version

    assert out.stdout.split() == [version.__version__, "False"]
    monkeypatch.delenv("PISCES_PROVIDER_TRANSPORT", raising=False)
    assert google_direct.use_direct()
    monkeypatch.setenv("GOOGLE_GENAI_USE_VERTEXAI", "true")  # the SDK would talk to Vertex: leave it to the SDK
    assert not google_direct.use_direct()
    monkeypatch.setenv("GOOGLE_GENAI_USE_ENTERPRISE", "0")  # which wins over the other
    assert google_direct.use_direct()
    monkeypatch.setenv("PISCES_PROVIDER_TRANSPORT", "sdk")
    assert not google_direct.use_direct()


ODD_REPLIES = {
    "signatures in both alphabets, thinking, a call with an id and NaN": lambda: Reply.sse([
        chunk({"text": "Let me ", "thought": True, "thoughtSignature": "-_-_"}),
        chunk({"text": "see.", "thought": True, "thoughtSignature": "+/+/"}, {"text": "Answer", "unknownField": 1}),
        "data: " + '{"candidates": [{"content": {"role": "model", "parts": [{"functionCall": {"id": "c9", '
        '"name": "bash", "args": {"x": NaN, "y": [1, Infinity]}}, "thoughtSignature": "Q2FsbFNpZw=="}]}, '
        '"index": 0, "finishReason": "STOP"}], "usageMetadata": {"promptTokenCount": 9, '
        '"candidatesTokenCount": 3, "thoughtsTokenCount": 4, "cachedContentTokenCount": 2}}']),
    "blocked prompt": lambda: Reply.sse([{"promptFeedback": {"blockReason": "SAFETY"},
                                          "usageMetadata": {"promptTokenCount": 5}}]),
    "finish with a message": lambda: Reply.sse([chunk({"text": "x"}), {
        "candidates": [{"index": 0, "finishReason": "MALFORMED_FUNCTION_CALL", "finishMessage": "bad call"}]}]),
    "an error sent as plain JSON lines": lambda: Reply(200, {"content-type": "text/event-stream"}, [
        '{\n  "error": {\n    "code": 429,\n    "message": "Quota {exceeded}",\n    "status": "RESOURCE_EXHAUSTED"\n  }\n}\n']),
    "CRLF lines and a data event split over two lines": lambda: Reply(200, {"content-type": "text/event-stream"}, [
        'data: {"candidates": [{"content": {"parts": [{"text": "a"}]}, "index": 0}]}\r\n\r\n',
        'data: {"candidates": [{"content": {"parts": [{"text": "b"}]},\r\ndata:  "index": 0, "finishReason": "STOP"}]}\r\n\r\n']),
}


@pytest.mark.parametrize("reply", sorted(ODD_REPLIES))
async def test_the_reply_is_read_the_same_both_ways(server, monkeypatch, reply):
    results = []
    for transport in ("sdk", "direct"):
        monkeypatch.setenv("PISCES_PROVIDER_TRANSPORT", transport)
        server.push(ODD_REPLIES[reply]())
        events = await collect(make_model(server), ctx(tools=[BASH]), opts())
        message = final(events)
        message.timestamp = 0
        for block in message.content:
            if isinstance(block, ToolCall) and block.id.startswith("bash_"):
                block.id = "generated"
        results.append((kinds(events), msgspec.to_builtins(message)))
    assert results[0] == results[1]


def _hop(*items, token=None, finish=None, usage=None):
    c = chunk(*items, finish=finish, usage=usage)
    if token:
        c["candidates"][0]["continuationToken"] = token
    return c


CONTINUED = {
    "resumed after finish reason CONTINUATION": lambda: [
        Reply.sse([_hop({"text": "a"}), _hop({"text": "b"}, token="dG9rZW4rLw==", finish="CONTINUATION",
                                             usage={"promptTokenCount": 10, "candidatesTokenCount": 2})]),
        Reply.sse([_hop({"text": "c"}, finish="STOP", usage={"promptTokenCount": 10, "candidatesTokenCount": 3})])],
    "resumed after a break past a checkpoint": lambda: [
        Reply.sse([_hop({"text": "a"}, token="Y2hlY2s="), DROP]),
        Reply.sse([_hop({"text": "b"}, finish="STOP", usage=USAGE)])],
    "a break without progress retried from the same token": lambda: [
        Reply.sse([_hop({"text": "a"}, token="Y2hlY2s=")]),
        Reply.sse([DROP]),
        Reply.sse([_hop({"text": "b"}, finish="STOP", usage=USAGE)])],
}


@pytest.mark.parametrize("case", sorted(CONTINUED))
async def test_a_continued_reply_is_followed_as_the_sdk_follows_it(server, monkeypatch, case):
    results = []
    for transport in ("sdk", "direct"):
        monkeypatch.setenv("PISCES_PROVIDER_TRANSPORT", transport)
        first = len(server.requests)
        server.push(*CONTINUED[case]())
        events = await collect(make_model(server), ctx(), opts())
        message = final(events)
        message.timestamp = 0
        results.append((kinds(events), msgspec.to_builtins(message), [r.raw for r in server.requests[first:]]))
    assert results[0][0][-1] == "done"
    assert len(results[0][2]) == len(CONTINUED[case]())
    assert results[0] == results[1]
