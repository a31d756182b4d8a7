"""``stream(model, context, options)``: the one entry point to every provider.

Guarantees, whatever the provider does:
- the iterator ends with exactly one ``done`` or ``error`` event and never raises;
- an abort (``options.signal``) ends the stream at once with ``error``/``aborted``, keeping partial content;
- an exception inside the provider becomes ``error`` with a readable ``errorMessage``;
- a stream that goes silent for ``options.idleTimeoutMs`` ends with a retryable timeout error; any byte of the
  reply counts (a slow reply, or one huge event still arriving, is not a stalled one);
- an ``errorMessage`` is at most ``MAX_ERROR_MESSAGE_CHARS`` long (head and tail kept), whatever the provider sent;
- what a reply makes the caller emit grows linearly with the message, not with its square: every event carries
  the whole partial message (pi's ``message_update``), so once a message holds ``COALESCE_FROM_CHARS`` characters,
  deltas of one block that arrive in a burst are merged (see ``_Coalescer``). Below that, every delta is its own
  event, as in pi.

The provider runs in the caller's task, so every event is seen the moment it is produced (snapshots of the
partial message are exact). An abort or a stall while the provider waits on the network cancels that wait
(``Task.cancel`` then ``uncancel``), so providers need not watch the signal themselves.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, AsyncIterator, get_args

import msgspec

from pisces.ai.providers import get_provider, warm_for_request
from pisces.ai.providers._limits import PROGRESS, bound_message
from pisces.ai.types import (
    AssistantMessage,
    AssistantMessageEvent,
    Context,
    DoneEvent,
    ErrorEvent,
    Model,
    StartEvent,
    StreamOptions,
    TextContent,
    TextEndEvent,
    ThinkingContent,
    ThinkingEndEvent,
    ToolCall,
    ToolCallEndEvent,
    Usage,
    now_ms,
)

ABORTED_MESSAGE = "Request was aborted"
# A reply is stopped once its streamed characters pass this many per token of the model's maxTokens: a
# token is about 4 characters, so this is 16 times the longest reply the model may legitimately send.
OVERRUN_CHARS_PER_TOKEN = 64
# pi's text when the request is aborted before it starts (with a full stop, unlike the mid-stream one)
ABORTED_BEFORE_START_MESSAGE = "Request was aborted."

_KIND = {cls: cls.__struct_config__.tag for cls in get_args(AssistantMessageEvent)}
_DELTA_KINDS = frozenset({"text_delta", "thinking_delta", "toolcall_delta"})

COALESCE_FROM_CHARS = 16 * 1024  # a message smaller than this gets every delta as its own event
SNAPSHOT_CHARS_PER_S = 32 * 1024 * 1024  # past it, a stream this slow still gets every delta at once
COALESCE_GROWTH = 8  # otherwise one event per 1/8 of growth: the snapshots of a burst sum to ~9x the message


class _Coalescer:
    """Merges consecutive deltas of one block that arrive in a burst, once the message is large.

    Each event carries a snapshot of the whole message, so a reply of N characters in tiny deltas costs N^2/2
    bytes downstream (an endless or hostile stream: gigabytes). Below ``COALESCE_FROM_CHARS`` every delta is
    its own event, as in pi. Past it, a delta still goes out at once when it came at least
    ``size / SNAPSHOT_CHARS_PER_S`` seconds after the provider's previous event (a stream that slow costs at
    most that many snapshot characters a second; at 16 KB, a gap of 0.5 ms; at 1 MB, 31 ms). A delta arriving faster is
    held and merged with those that follow until they add 1/8 of the message, or a slow gap comes; any other event
    (the block's end, the next block, done, error) sends the held delta first. No text is lost or reordered;
    a held delta waits for the provider's next event, which in a burst comes at once."""

    __slots__ = ("size", "held", "parts", "held_chars", "prev")

    def __init__(self) -> None:
        self.size = 0
        self.held: AssistantMessageEvent | None = None
        self.parts: list[str] = []
        self.held_chars = 0
        self.prev = 0.0  # when the provider's previous event came

    def delta(self, item: Any, now: float) -> tuple[AssistantMessageEvent, ...]:
        n = len(item.delta)
        self.size += n
        slow = now - self.prev >= self.size / SNAPSHOT_CHARS_PER_S
        self.prev = now
        out: tuple[AssistantMessageEvent, ...] = ()
        held: Any = self.held
        if held is not None and (type(held) is not type(item)
                                 or held.contentIndex != item.contentIndex):  # another block: send what is held
            out = (self.flush(),)
            held = None
        if held is None:
            if self.size < COALESCE_FROM_CHARS or slow:
                return (*out, item)
            self.held, self.parts, self.held_chars = item, [item.delta], n
            return out
        self.parts.append(item.delta)
        self.held_chars += n
        if slow or self.held_chars * COALESCE_GROWTH >= self.size:
            return (*out, self.flush())
        return out

    def flush(self) -> AssistantMessageEvent:
        held, self.held = self.held, None
        assert held is not None
        merged = held if len(self.parts) == 1 else msgspec.structs.replace(held, delta="".join(self.parts))
        self.parts = []
        self.held_chars = 0
        return merged


def _empty_output(model: Model) -> AssistantMessage:
    return AssistantMessage(content=[], api=model.api, provider=model.provider, model=model.id, usage=Usage(),
                            stopReason="stop", timestamp=now_ms())


def _describe(exc: BaseException) -> str:
    text = str(exc).strip()
    name = type(exc).__name__
    if not text:
        return name
    return text


async def stream(model: Model, context: Context, options: StreamOptions | None = None
                 ) -> AsyncIterator[AssistantMessageEvent]:
    options = options or StreamOptions()
    signal = options.signal
    try:
        provider = get_provider(model.api)
    except Exception as exc:  # noqa: BLE001 - unknown api, or the SDK failed to import: an error reply
        out = _empty_output(model)
        yield StartEvent(partial=out)
        out.stopReason = "error"
        out.errorMessage = _describe(exc)
        yield ErrorEvent(reason="error", error=out)
        return

    if signal is not None and signal.aborted:
        out = _empty_output(model)
        out.stopReason = "aborted"
        out.errorMessage = ABORTED_BEFORE_START_MESSAGE
        yield ErrorEvent(reason="aborted", error=out)
        return

    # The SDK's first import (up to a second, blocking the loop) happens here, before the idle clock starts:
    # a first request must not time out on our own start-up cost. Where the request can go without the SDK
    # (providers.direct), it does not wait for the SDK at all.
    warm_for_request(model.api)
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    gen = provider.stream(model, context, options)
    # Why the stream was interrupted ("abort" or "stall"), and whether we are suspended inside the
    # provider right now: only then is cancelling our own task the way to break its network read.
    interrupt: list[str | None] = [None]
    in_provider = [False]
    cancel_sent = [False]  # our own cancel, to be matched by exactly one ``uncancel``

    def interrupt_with(kind: str) -> None:
        if interrupt[0] is None:
            interrupt[0] = kind
            if in_provider[0] and task is not None:
                cancel_sent[0] = True
                task.cancel()

    remove_listener = signal.add_listener(lambda: interrupt_with("abort")) if signal is not None else None
    idle_s = (options.idleTimeoutMs or 0) / 1000
    timer: list[asyncio.TimerHandle | None] = [None]
    # the loop's clock; asyncio's own is time.monotonic, called directly then (it is read for every event)
    clock = time.monotonic if getattr(loop.time, "__func__", None) is asyncio.BaseEventLoop.time else loop.time
    last_seen = [clock()]  # refreshed per event; the one timer re-arms itself from it (cheap per event)

    def check_stall() -> None:
        left = last_seen[0] + idle_s - loop.time()
        if left > 0:
            timer[0] = loop.call_later(left, check_stall)
        else:
            interrupt_with("stall")

    if idle_s > 0:
        timer[0] = loop.call_later(idle_s, check_stall)

    def progressed() -> None:  # a chunk of the reply arrived (pisces.ai.providers._limits calls it)
        last_seen[0] = clock()

    partial: AssistantMessage | None = None
    open_blocks: dict[int, str] = {}  # contentIndex -> kind, for blocks started but not ended
    # A reply far past the model's own output limit comes from a broken provider (an endless stream): it is
    # stopped there, long before the byte cap, so the client is not sent hundreds of MB first.
    max_tokens = max(int(model.maxTokens or 0), int(getattr(options, "maxTokens", 0) or 0))
    overrun_at = max_tokens * OVERRUN_CHARS_PER_TOKEN if max_tokens > 0 else 0
    streamed = 0
    failure: BaseException | None = None
    coalescer = _Coalescer()
    progress = progressed if idle_s > 0 else None
    next_item = gen.__anext__
    try:
        while interrupt[0] is None:
            in_provider[0] = True
            progress_token = PROGRESS.set(progress)
            try:
                item = await next_item()
            except StopAsyncIteration:
                break
            except asyncio.CancelledError:
                if not cancel_sent[0]:
                    raise
                break
            except Exception as exc:  # noqa: BLE001 - becomes an error event
                failure = exc
                break
            finally:
                PROGRESS.reset(progress_token)
                in_provider[0] = False
                if cancel_sent[0]:
                    # our cancel reached the provider, which re-raised it or turned it into something else:
                    # either way the caller's task must not stay marked as cancelling
                    cancel_sent[0] = False
                    if task is not None:  # always: a stream is consumed by a task
                        task.uncancel()
            now = last_seen[0] = clock()
            kind = _KIND[type(item)]
            if partial is None and kind != "start" and isinstance(getattr(item, "partial", None), AssistantMessage):
                partial = item.partial  # a provider that skipped ``start``: never send a late one
            if kind in _DELTA_KINDS:
                n = len(item.delta)
                streamed += n
                if coalescer.held is None and coalescer.size + n < COALESCE_FROM_CHARS:
                    # a small message: every delta goes out as it came (what ``delta`` would do, one call less)
                    coalescer.size += n
                    coalescer.prev = now
                    yield item
                else:
                    for ev in coalescer.delta(item, now):
                        yield ev
                if overrun_at and streamed > overrun_at:
                    interrupt[0] = "overrun"
                    break
                continue
            coalescer.prev = now
            if coalescer.held is not None:
                yield coalescer.flush()
            if kind == "start":
                partial = item.partial
            elif kind == "done" or kind == "error":
                if kind == "error" and isinstance(item.error.errorMessage, str):
                    item.error.errorMessage = bound_message(item.error.errorMessage)
                yield item
                return
            elif kind.endswith("_start"):
                open_blocks[item.contentIndex] = kind[:-6]
            elif kind.endswith("_end"):
                open_blocks.pop(item.contentIndex, None)
            yield item
        # no terminal event from the provider: aborted, stalled, failed, or it just stopped
        if coalescer.held is not None:
            yield coalescer.flush()
        out = partial or _empty_output(model)
        if partial is None:
            yield StartEvent(partial=out)
        if interrupt[0] == "abort":
            for ev in _close_blocks(out, open_blocks):
                yield ev
            out.stopReason = "aborted"
            out.errorMessage = ABORTED_MESSAGE
            yield ErrorEvent(reason="aborted", error=out)
            return
        out.stopReason = "error"
        if failure is not None:
            out.errorMessage = bound_message(_describe(failure))
        elif interrupt[0] == "overrun":
            for ev in _close_blocks(out, open_blocks):
                yield ev
            out.errorMessage = (f"The provider kept sending past this model's output limit ({streamed} characters "
                                f"for maxTokens {max_tokens}): pisces stopped the reply (a broken or endless "
                                "stream)")
        elif interrupt[0] == "stall":
            out.errorMessage = f"Stream stalled: the provider sent nothing for {idle_s:g} s (request timed out)"
        else:
            out.errorMessage = "Provider stream ended without a final message (connection lost)"
        yield ErrorEvent(reason="error", error=out)
    finally:
        if timer[0] is not None:
            timer[0].cancel()
        if remove_listener is not None:
            remove_listener()
        try:
            await gen.aclose()
        except Exception:  # noqa: BLE001 - closing a broken provider stream must not mask the result
            pass


def _close_blocks(out: AssistantMessage, open_blocks: dict[int, str]) -> list[AssistantMessageEvent]:
    """End events for blocks an interrupted stream left open, in content order (as pi emits them)."""
    events: list[AssistantMessageEvent] = []
    for idx in sorted(open_blocks):
        if idx >= len(out.content):
            continue
        block = out.content[idx]
        if isinstance(block, TextContent):
            events.append(TextEndEvent(contentIndex=idx, content=block.text, partial=out))
        elif isinstance(block, ThinkingContent):
            events.append(ThinkingEndEvent(contentIndex=idx, content=block.thinking, partial=out))
        elif isinstance(block, ToolCall):
            events.append(ToolCallEndEvent(contentIndex=idx, toolCall=block, partial=out))
    open_blocks.clear()
    return events


async def complete(model: Model, context: Context, options: StreamOptions | None = None) -> AssistantMessage:
    """Run a stream to its end and return the final message (``done.message`` or ``error.error``)."""
    final: AssistantMessage | None = None
    async for ev in stream(model, context, options):
        if isinstance(ev, DoneEvent):
            final = ev.message
        elif isinstance(ev, ErrorEvent):
            final = ev.error
    assert final is not None
    return final
