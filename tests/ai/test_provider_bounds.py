"""Hostile provider endpoints, on each of the four wires through its real SDK (pisces.ai.providers._limits).

What a reply can make pisces read is bounded (an error body, one event line, a whole reply, a compressed body
however far it inflates), a reply whose bytes keep coming is slow, not stalled, and a tool call whose
arguments hold NaN/Infinity is stored and sent again as valid JSON (null, as JSON.stringify writes them).
Every test bounds its own time (``asyncio.wait_for``) and its memory (the server's bodies are generators;
``PISCES_MAX_REPLY_MB`` keeps the limits, and so what the client holds, small).
"""

from __future__ import annotations

import asyncio
import json
import time
import zlib

import pytest
from hostile_wires import SSE_HEADERS, WIRES, Wire
from provider_helpers import collect, final, kinds

from pisces.ai.providers._limits import MAX_ERROR_MESSAGE_CHARS, MB
from pisces.ai.types import Context, StreamOptions, TextContent, ToolCall, ToolResultMessage, UserMessage
from scripted_server import Reply, Stall

TIMEOUT = 60.0


@pytest.fixture(params=sorted(WIRES))
def wire(request) -> Wire:
    return WIRES[request.param]


def opts(**kw) -> StreamOptions:
    kw.setdefault("apiKey", "test-key")
    kw.setdefault("maxRetries", 0)
    return StreamOptions(**kw)


def ctx(*messages) -> Context:
    return Context(systemPrompt="You are a test.", messages=list(messages) or [UserMessage(content="Hi")])


async def run(wire: Wire, server, context: Context | None = None, **kw):
    events = await asyncio.wait_for(collect(wire.model(server.url), context or ctx(), opts(**kw)), TIMEOUT)
    return kinds(events), final(events)


def wait_server_done(server, index: int = -1) -> None:
    """Wait (bounded) until the server's handler finished or noticed the client hang up."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        sent = server.sent[index] if server.sent else None
        if sent is not None and (sent.finished or sent.client_hung_up):
            return
        time.sleep(0.02)
    raise AssertionError("the scripted server never finished its reply")


def text_of(message) -> str:
    return "".join(b.text for b in message.content if isinstance(b, TextContent))


# ------------------------------------------------------------------------------------------------------------
async def test_a_plain_reply_still_works(wire, server):
    server.push(wire.text_reply("Hel", "lo ", "there"))
    types, message = await run(wire, server)
    assert types[-1] == "done", message.errorMessage
    assert text_of(message) == "Hello there"


async def test_a_50_mb_error_body_is_read_only_up_to_its_bound(wire, server):
    total = 50 * MB

    def body():
        yield '{"error": {"message": "'
        piece = "x" * 65536
        for _ in range(total // len(piece)):
            yield piece
        yield '"}}'

    server.push(Reply(400, {"content-type": "application/json", "x-should-retry": "false"}, [body()]))
    types, message = await run(wire, server)
    assert types[-1] == "error" and message.stopReason == "error"
    text = message.errorMessage
    assert "400" in text, text[:300]
    assert len(text) <= MAX_ERROR_MESSAGE_CHARS + 100, f"an error text of {len(text)} characters"
    wait_server_done(server)
    sent = server.sent[-1]
    assert sent.client_hung_up and not sent.finished, "pisces read the whole 50 MB body"
    assert sent.bytes < total // 2


async def test_one_event_line_longer_than_its_bound_ends_the_reply_with_a_readable_error(wire, server, monkeypatch):
    monkeypatch.setenv("PISCES_MAX_REPLY_MB", "1")  # one line may hold a quarter of it: 256 KB
    line_len = 32 * MB  # more than the socket buffers hold: the server sees the client hang up)

    def huge_text():
        for _ in range(line_len // 8192):
            yield "a" * 8192

    server.push(Reply(200, dict(SSE_HEADERS), [*wire.opening(), wire.delta_head(), huge_text(), wire.delta_tail,
                                               *wire.closing()]))
    types, message = await run(wire, server)
    assert types[-1] == "error", f"the {line_len}-byte event was accepted: {types[-3:]}"
    assert message.errorMessage.startswith("The provider sent a single event line longer than 256 KB"), \
        message.errorMessage
    wait_server_done(server)
    assert server.sent[-1].client_hung_up


async def test_an_endless_stream_ends_at_the_reply_bound(wire, server, monkeypatch):
    monkeypatch.setenv("PISCES_MAX_REPLY_MB", "1")
    piece = wire.delta("endless " * 16)

    def forever():
        while True:
            yield piece

    server.push(Reply(200, dict(SSE_HEADERS), [*wire.opening(), forever()]))
    types, message = await run(wire, server)
    assert types[-1] == "error"
    assert message.errorMessage.startswith("The provider sent more than 1 MB in one reply"), message.errorMessage
    assert "PISCES_MAX_REPLY_MB" in message.errorMessage
    assert 0 < len(text_of(message)) < MB, "the partial text is kept, and is below the bound"
    wait_server_done(server)
    assert server.sent[-1].client_hung_up


async def test_a_compressed_reply_is_bounded_by_what_it_inflates_to(wire, server, monkeypatch):
    """16 MB of blank lines, gzipped to a few KB: the bound counts the inflated bytes."""
    monkeypatch.setenv("PISCES_MAX_REPLY_MB", "1")

    def gzipped():
        z = zlib.compressobj(wbits=31)
        for part in wire.opening():
            yield z.compress(part.encode())
        block = b"\n" * 65536  # blank lines: skipped by every SSE reader
        for _ in range(16 * MB // len(block)):
            out = z.compress(block)
            if out:
                yield out
        for part in [wire.delta("done"), *wire.closing()]:
            yield z.compress(part.encode())
        yield z.flush()

    server.push(Reply(200, {**SSE_HEADERS, "content-encoding": "gzip"}, [gzipped()]))
    types, message = await run(wire, server)
    assert types[-1] == "error", "a 16 MB body was read under a 1 MB bound"
    assert message.errorMessage.startswith("The provider sent more than 1 MB in one reply"), message.errorMessage


async def test_a_compressed_reply_within_bounds_is_read(wire, server):
    z = zlib.compressobj(wbits=31)
    body = b"".join([*(z.compress(p.encode()) for p in wire.text_reply("zip", "ped").chunks), z.flush()])
    server.push(Reply(200, {**SSE_HEADERS, "content-encoding": "gzip"}, [iter([body])]))
    types, message = await run(wire, server)
    assert types[-1] == "done", message.errorMessage
    assert text_of(message) == "zipped"


@pytest.mark.parametrize("api", ["anthropic-messages", "google-generative-ai", "openai-completions",
                                 "openai-responses"])
async def test_a_large_reply_in_small_deltas_is_assembled_in_linear_time(api, server):
    """4 MB of text in 64-character deltas (65,536 events). Appending each delta by copying the text so far
    costs 128 GB of copying (minutes); grown in place it takes seconds. The time-out only bounds a hang.
    (google-generative-ai runs here without its SDK, the default: through the SDK, pydantic objects built for
    every chunk, between our appends, often make the allocator move the growing text: docs/providers.md.)"""
    wire = WIRES[api]
    piece = wire.delta("0123456789abcdef" * 4)

    def deltas():
        for _ in range(65536):
            yield piece

    server.push(Reply(200, dict(SSE_HEADERS), [*wire.opening(), deltas(), *wire.closing()]))
    types, message = await run(wire, server)
    assert types[-1] == "done", message.errorMessage
    assert text_of(message) == "0123456789abcdef" * 4 * 65536


# ------------------------------------------------------------------------------------------------------------
# Stall versus slow but progressing. The idle timeout is 1 s; the slow reply sends one event in 40 pieces 0.1 s
# apart, so no event completes for 4 s: only bytes show that the provider is alive. The stalled reply sends
# nothing for 5 s. What is asserted is the outcome (done versus a stall error), not how long anything took.
# ------------------------------------------------------------------------------------------------------------
IDLE_MS = 1000


async def test_a_slow_event_whose_bytes_keep_coming_is_not_a_stall(wire, server):
    def trickle():
        for _ in range(40):
            yield "a" * 10
            yield Stall(0.1)

    server.push(Reply(200, dict(SSE_HEADERS), [*wire.opening(), wire.delta_head(), trickle(), wire.delta_tail,
                                               *wire.closing()]))
    types, message = await run(wire, server, idleTimeoutMs=IDLE_MS)
    assert types[-1] == "done", f"a progressing reply was ended: {message.errorMessage}"
    assert text_of(message) == "a" * 400


async def test_a_reply_that_sends_nothing_is_a_stall(wire, server):
    server.push(Reply(200, dict(SSE_HEADERS), [*wire.opening(), wire.delta_head(), "a" * 10, Stall(5.0),
                                               wire.delta_tail, *wire.closing()]))
    types, message = await run(wire, server, idleTimeoutMs=IDLE_MS)
    assert types[-1] == "error"
    assert message.errorMessage.startswith("Stream stalled"), message.errorMessage


# ------------------------------------------------------------------------------------------------------------
# NaN / Infinity in a tool call's arguments
# ------------------------------------------------------------------------------------------------------------
def _strict(raw: bytes):
    """The request body as strict JSON; and no NaN/Infinity hidden in a string either (the OpenAI wires send
    a tool call's arguments as a JSON text inside the JSON body)."""
    def reject(name):
        raise ValueError(f"{name} in a request body")

    assert b"NaN" not in raw and b"Infinity" not in raw, raw[:800]
    return json.loads(raw, parse_constant=reject)


async def test_non_finite_tool_arguments_are_stored_and_sent_as_null(wire, server):
    server.push(Reply(200, dict(SSE_HEADERS), wire.tool_reply('{"command": "echo hi", "n": NaN, "big": -Infinity}')))
    types, message = await run(wire, server)
    assert types[-1] == "done", message.errorMessage
    call = next(b for b in message.content if isinstance(b, ToolCall))
    assert call.arguments == {"command": "echo hi", "n": None, "big": None}
    # the next request of the session carries that call: it must be sent, as valid JSON
    server.push(wire.text_reply("after"))
    history = ctx(UserMessage(content="run it"), message,
                  ToolResultMessage(toolCallId=call.id, toolName="bash", content=[TextContent(text="hi")]))
    types, after = await run(wire, server, history)
    assert types[-1] == "done", after.errorMessage
    assert text_of(after) == "after"
    body = _strict(server.requests[-1].raw)
    assert '"n": null' in json.dumps(body) or '\\"n\\":null' in json.dumps(body), json.dumps(body)[:800]


async def test_a_stored_history_holding_nan_is_still_sent(wire, server):
    """A history written before the fix (or a tool call an extension built) may hold NaN: the request is sent
    with null in its place instead of failing before it leaves."""
    call = ToolCall(id="call_1", name="bash", arguments={"command": "ls", "n": float("nan"),
                                                         "nested": [{"x": float("inf")}]})
    from pisces.ai.types import AssistantMessage, Usage

    prior = AssistantMessage(content=[call], api=wire.api, provider=wire.model(server.url).provider,
                             model=wire.model(server.url).id, usage=Usage(), stopReason="toolUse", timestamp=1)
    server.push(wire.text_reply("fine"))
    history = ctx(UserMessage(content="go"), prior,
                  ToolResultMessage(toolCallId="call_1", toolName="bash", content=[TextContent(text="ok")]))
    types, message = await run(wire, server, history)
    assert types[-1] == "done", message.errorMessage
    _strict(server.requests[-1].raw)
    assert call.arguments["n"] != call.arguments["n"], "the stored message itself is left as it was"
