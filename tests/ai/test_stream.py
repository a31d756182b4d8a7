"""The stream wrapper's guarantees, whatever the provider does.

Exactly one terminal event (``done`` or ``error``), always last; an abort ends the stream at once as
``aborted`` keeping the partial content and closing the blocks left open; a provider exception or a stream
that just stops becomes ``error``; an idle stall becomes ``error``; the wrapper itself never raises.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time

import msgspec
import pytest

sys.path.insert(0, os.path.dirname(__file__))
import fake_providers
from fake_providers import API, LOG, model
from provider_helpers import final, kinds

from pisces.ai.abort import AbortSignal
from pisces.ai.models import FAUX_MODELS
from pisces.ai.providers import get_provider, register_provider
from pisces.ai.stream import ABORTED_BEFORE_START_MESSAGE, ABORTED_MESSAGE, complete, stream
from pisces.ai.types import (
    Context,
    Model,
    StreamOptions,
    TextContent,
    ThinkingContent,
    ToolCall,
    UserMessage,
    event_type,
)

FAUX = FAUX_MODELS[0]
TERMINAL = ("done", "error")


@pytest.fixture(autouse=True)
def _fake_provider():
    register_provider(API, fake_providers.__name__)
    LOG.clear()
    yield
    LOG.clear()


def ctx(text: str = "hi") -> Context:
    return Context(systemPrompt="sys", messages=[UserMessage(content=[TextContent(text=text)])])


async def collect(m: Model, options: StreamOptions | None = None, context: Context | None = None) -> list:
    return [ev async for ev in stream(m, context or ctx(), options)]


def assert_one_terminal(events: list) -> None:
    ks = kinds(events)
    assert sum(k in TERMINAL for k in ks) == 1, ks
    assert ks[-1] in TERMINAL, ks


async def abort_after(signal: AbortSignal, delay: float) -> None:
    await asyncio.sleep(delay)
    signal.abort()


# ---------------------------------------------------------------------------------------------
# Normal streams pass through untouched
# ---------------------------------------------------------------------------------------------
async def test_well_behaved_provider_passes_events_through():
    events = await collect(model("ok"))
    assert kinds(events) == ["start", "text_start", "text_delta", "text_end", "done"]
    msg = final(events)
    assert msg.stopReason == "stop"
    assert msg.content == [TextContent(text="fine")]
    assert msg.errorMessage is msgspec.UNSET


async def test_provider_error_event_is_passed_through_as_the_one_terminal():
    events = await collect(model("error-event"))
    assert kinds(events) == ["start", "text_start", "text_delta", "text_end", "error"]
    err = events[-1]
    assert err.reason == "error"
    assert err.error.errorMessage == "overloaded_error: Overloaded"
    assert err.error.content == [TextContent(text="half")]


async def test_events_after_the_first_terminal_are_never_read():
    events = await collect(model("double-terminal"))
    assert_one_terminal(events)
    assert kinds(events)[-1] == "done"
    assert "after-first-terminal" not in LOG.get("double-terminal", [])


async def test_complete_returns_the_final_message():
    msg = await complete(model("ok"), ctx())
    assert msg.content == [TextContent(text="fine")]
    err = await complete(model("raise-mid"), ctx())
    assert err.stopReason == "error"
    assert err.errorMessage == "socket reset mid-stream"


# ---------------------------------------------------------------------------------------------
# Provider failures
# ---------------------------------------------------------------------------------------------
async def test_exception_before_start_becomes_start_then_error():
    events = await collect(model("raise-before-start"))
    assert kinds(events) == ["start", "error"]
    err = events[-1]
    assert err.reason == "error"
    assert err.error.stopReason == "error"
    assert err.error.errorMessage == "connection refused by fake host"
    assert err.error.content == []
    assert err.error.usage.totalTokens == 0
    assert (err.error.api, err.error.provider, err.error.model) == (API, "fake", "raise-before-start")


async def test_exception_mid_stream_keeps_partial_content():
    events = await collect(model("raise-mid"))
    assert kinds(events) == ["start", "text_start", "text_delta", "text_end", "error"]
    err = events[-1].error
    assert err.stopReason == "error"
    assert err.errorMessage == "socket reset mid-stream"
    assert err.content == [TextContent(text="partial before the crash")]
    # the terminal message is the partial the events carried
    assert err is events[0].partial


async def test_exception_without_text_gets_its_class_name():
    events = await collect(model("raise-silent"))
    assert_one_terminal(events)
    assert events[-1].error.errorMessage == "SilentError"


async def test_stream_that_ends_without_terminal_event_is_an_error():
    events = await collect(model("no-terminal"))
    assert kinds(events) == ["start", "text_start", "text_delta", "text_end", "error"]
    err = events[-1].error
    assert err.stopReason == "error"
    assert err.errorMessage == "Provider stream ended without a final message (connection lost)"
    assert err.content == [TextContent(text="then nothing")]


async def test_stream_that_ends_right_after_start():
    events = await collect(model("no-terminal-empty"))
    assert kinds(events) == ["start", "error"]
    assert events[-1].error.content == []


async def test_provider_that_skips_start_never_gets_a_late_start():
    events = await collect(model("no-start"))
    assert_one_terminal(events)
    ks = kinds(events)
    # a start event, if any, can only come first
    assert "start" not in ks[1:], ks
    assert final(events).stopReason == "error"


async def test_provider_that_skips_start_and_is_aborted_closes_its_block():
    signal = AbortSignal()
    aborter = asyncio.create_task(abort_after(signal, 0.03))
    events = await collect(model("no-start-slow"), StreamOptions(signal=signal))
    await aborter
    assert kinds(events) == ["text_start", "text_end", "error"]
    assert events[1].content == "y"
    err = events[-1].error
    assert err.stopReason == "aborted"
    assert err is events[0].partial  # the provider's own partial, content kept
    assert err.content == [TextContent(text="y")]


async def test_unknown_api_is_an_error_not_an_exception():
    m = Model(id="x", name="x", api="no-such-api", provider="nobody")
    events = await collect(m)
    assert kinds(events) == ["start", "error"]
    assert events[-1].error.errorMessage.startswith("No provider for API 'no-such-api'")


# ---------------------------------------------------------------------------------------------
# Abort
# ---------------------------------------------------------------------------------------------
async def test_abort_before_start_ends_at_once_with_the_full_stop_text(faux):
    signal = AbortSignal()
    signal.abort()
    faux.enqueue({"text": "never sent"})
    events = await collect(FAUX, StreamOptions(signal=signal))
    assert kinds(events) == ["error"]
    err = events[0]
    assert err.reason == "aborted"
    assert err.error.stopReason == "aborted"
    assert err.error.errorMessage == ABORTED_BEFORE_START_MESSAGE == "Request was aborted."
    assert err.error.content == []
    # the provider was never called
    assert faux.requests == [] and len(faux.queue) == 1


async def test_abort_while_provider_waits_closes_open_blocks_in_content_order():
    signal = AbortSignal()
    t0 = time.monotonic()
    aborter = asyncio.create_task(abort_after(signal, 0.05))
    events = await collect(model("slow-open-blocks"), StreamOptions(signal=signal))
    await aborter
    assert time.monotonic() - t0 < 30  # bounds a hang; the events show what ended it
    assert kinds(events) == ["start", "thinking_start", "thinking_delta", "text_start", "text_delta",
                             "thinking_end", "text_end", "error"]
    thinking_end, text_end, err = events[-3:]
    assert (thinking_end.contentIndex, thinking_end.content) == (0, "pondering")
    assert (text_end.contentIndex, text_end.content) == (1, "so far")
    assert err.reason == "aborted"
    assert err.error.stopReason == "aborted"
    assert err.error.errorMessage == ABORTED_MESSAGE == "Request was aborted"
    assert err.error.content == [ThinkingContent(thinking="pondering"), TextContent(text="so far")]
    assert "cancelled" in LOG["slow-open-blocks"]


async def test_abort_mid_toolcall_closes_it_with_toolcall_end():
    signal = AbortSignal()
    aborter = asyncio.create_task(abort_after(signal, 0.03))
    events = await collect(model("slow-toolcall"), StreamOptions(signal=signal))
    await aborter
    assert kinds(events) == ["start", "toolcall_start", "toolcall_delta", "toolcall_end", "error"]
    assert isinstance(events[-2].toolCall, ToolCall)
    assert events[-2].toolCall.name == "bash"
    assert events[-1].reason == "aborted"


async def test_abort_before_any_content_gives_empty_aborted_message():
    signal = AbortSignal()
    t0 = time.monotonic()
    aborter = asyncio.create_task(abort_after(signal, 0.03))
    events = await collect(model("slow-before-anything"), StreamOptions(signal=signal))
    await aborter
    assert time.monotonic() - t0 < 30  # bounds a hang; the events show what ended it
    assert kinds(events) == ["start", "error"]
    assert events[-1].error.stopReason == "aborted"
    assert events[-1].error.errorMessage == "Request was aborted"
    assert events[-1].error.content == []


async def test_abort_of_faux_mid_text_keeps_the_streamed_prefix(faux):
    faux.enqueue({"text": "abcdefghij" * 20, "chunkSize": 5, "delayMs": 10})
    signal = AbortSignal()
    events = []
    t0 = time.monotonic()
    async for ev in stream(FAUX, ctx(), StreamOptions(signal=signal)):
        events.append(ev)
        if kinds(events).count("text_delta") == 3:
            signal.abort()  # from inside the consumer, between two provider reads
    assert time.monotonic() - t0 < 30  # bounds a hang; the events show what ended it
    assert_one_terminal(events)
    assert kinds(events)[-2:] == ["text_end", "error"]
    deltas = "".join(ev.delta for ev in events if event_type(ev) == "text_delta")
    assert deltas == "abcdefghijabcde"
    assert events[-2].content == deltas
    err = events[-1].error
    assert err.stopReason == "aborted"
    assert err.content == [TextContent(text=deltas)]
    assert err.usage.totalTokens == 0  # usage never arrived


async def test_abort_when_provider_converts_cancellation_into_an_exception():
    signal = AbortSignal()
    aborter = asyncio.create_task(abort_after(signal, 0.03))
    events = await collect(model("swallow-cancel"), StreamOptions(signal=signal))
    await aborter
    assert_one_terminal(events)
    assert events[-1].reason == "aborted"
    assert events[-1].error.errorMessage == "Request was aborted"
    assert "cancelled" in LOG["swallow-cancel"]


async def test_abort_does_not_leak_cancellation_into_the_caller():
    signal = AbortSignal()
    aborter = asyncio.create_task(abort_after(signal, 0.03))
    await collect(model("slow-before-anything"), StreamOptions(signal=signal))
    await aborter
    task = asyncio.current_task()
    assert task.cancelling() == 0
    # the caller's task is not cancelled: it can keep awaiting
    await asyncio.sleep(0.01)


async def test_abort_listener_is_removed_when_the_stream_ends():
    signal = AbortSignal()
    events = await collect(model("ok"), StreamOptions(signal=signal))
    assert kinds(events)[-1] == "done"
    assert signal._listeners == []
    signal.abort()  # a late abort touches nothing
    assert signal.aborted


async def test_abort_after_done_changes_nothing():
    signal = AbortSignal()
    events = []
    async for ev in stream(model("ok"), ctx(), StreamOptions(signal=signal)):
        events.append(ev)
    signal.abort()
    assert kinds(events)[-1] == "done"
    assert events[-1].message.stopReason == "stop"


# ---------------------------------------------------------------------------------------------
# Idle timeout
# ---------------------------------------------------------------------------------------------
async def test_stall_ends_the_stream_with_an_error_keeping_partial_content():
    t0 = time.monotonic()
    events = await collect(model("stall"), StreamOptions(idleTimeoutMs=100))
    elapsed = time.monotonic() - t0
    assert 0.09 <= elapsed < 30  # not before the idle timeout; the upper bound only bounds a hang
    assert kinds(events) == ["start", "text_start", "text_delta", "text_end", "error"]
    err = events[-1]
    assert err.reason == "error"
    assert err.error.stopReason == "error"
    assert "stalled" in err.error.errorMessage
    assert "timed out" in err.error.errorMessage
    assert err.error.content == [TextContent(text="before the stall")]
    assert "cancelled" in LOG["stall"]
    assert asyncio.current_task().cancelling() == 0


async def test_stall_before_any_content():
    t0 = time.monotonic()
    events = await collect(model("slow-before-anything"), StreamOptions(idleTimeoutMs=50))
    assert time.monotonic() - t0 < 30  # bounds a hang; the events show what ended it
    assert kinds(events) == ["start", "error"]
    assert events[-1].reason == "error"
    assert events[-1].error.stopReason == "error"


async def test_stall_with_an_open_block_is_still_one_terminal():
    events = await collect(model("stall-open-block"), StreamOptions(idleTimeoutMs=50))
    assert_one_terminal(events)
    assert events[-1].error.stopReason == "error"
    assert events[-1].error.content == [TextContent(text="abc")]


async def test_steady_stream_longer_than_the_idle_timeout_is_not_a_stall():
    t0 = time.monotonic()
    # a chunk every 20 ms for 10 chunks, against an idle timeout of 150 ms: a 7x margin per gap, and the
    # whole stream still outlives the timeout
    events = await collect(model("steady"), StreamOptions(idleTimeoutMs=150))
    assert time.monotonic() - t0 >= 0.15  # the whole stream outlived the timeout
    assert kinds(events)[-1] == "done"
    assert final(events).content == [TextContent(text="0123456789")]


async def test_no_idle_timeout_means_no_stall():
    events = await collect(model("steady"), StreamOptions(idleTimeoutMs=None))
    assert kinds(events)[-1] == "done"


# ---------------------------------------------------------------------------------------------
# The invariant, across every behaviour
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind,abort_at", [
    ("ok", None), ("raise-before-start", None), ("raise-silent", None), ("raise-mid", None),
    ("no-terminal", None), ("no-terminal-empty", None), ("error-event", None), ("double-terminal", None),
    ("no-start", None), ("no-start-slow", 0.02), ("stall", None), ("stall-open-block", None),
    ("slow-open-blocks", 0.02),
    ("slow-toolcall", 0.02), ("slow-before-anything", 0.02), ("swallow-cancel", 0.02), ("steady", 0.05),
    ("ok", 0.0),
])
async def test_exactly_one_terminal_event_always(kind, abort_at):
    signal = AbortSignal()
    aborter = asyncio.create_task(abort_after(signal, abort_at)) if abort_at is not None else None
    t0 = time.monotonic()
    events = await collect(model(kind), StreamOptions(signal=signal, idleTimeoutMs=80))
    if aborter is not None:
        await aborter
    assert time.monotonic() - t0 < 30  # bounds a hang; the events show what ended it
    assert_one_terminal(events)
    ks = kinds(events)
    assert ks.count("start") <= 1
    msg = final(events)
    assert msg.stopReason in ("stop", "length", "toolUse", "error", "aborted")
    if msg.stopReason in ("error", "aborted"):
        assert isinstance(msg.errorMessage, str) and msg.errorMessage
    assert asyncio.current_task().cancelling() == 0


def test_registry_serves_the_registered_module():
    assert get_provider(API) is fake_providers
