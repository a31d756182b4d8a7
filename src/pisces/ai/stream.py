"""``stream(model, context, options)``: the one entry point to every provider.

Guarantees, whatever the provider does:
- the iterator ends with exactly one ``done`` or ``error`` event and never raises;
- an abort (``options.signal``) ends the stream at once with ``error``/``aborted``, keeping partial content;
- an exception inside the provider becomes ``error`` with a readable ``errorMessage``;
- a stream that goes silent for ``options.idleTimeoutMs`` ends with a retryable timeout error; any byte of the
  reply counts (a slow reply, or one huge event still arriving, is not a stalled one);
- an ``errorMessage`` is at most ``MAX_ERROR_MESSAGE_CHARS`` long (head and tail kept), whatever the provider sent.

The provider runs in the caller's task, so every event is seen the moment it is produced (snapshots of the
partial message are exact). An abort or a stall while the provider waits on the network cancels that wait
(``Task.cancel`` then ``uncancel``), so providers need not watch the signal themselves.
"""

from __future__ import annotations

import asyncio
from typing import AsyncIterator, get_args

from pisces.ai.providers import get_provider, warm
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
# pi's text when the request is aborted before it starts (with a full stop, unlike the mid-stream one)
ABORTED_BEFORE_START_MESSAGE = "Request was aborted."

_KIND = {cls: cls.__struct_config__.tag for cls in get_args(AssistantMessageEvent)}


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
    except Exception as exc:  # unknown api, or the SDK failed to import
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
    # a first request must not time out on our own start-up cost.
    warm(model.api)
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
    last_seen = [loop.time()]  # refreshed per event; the one timer re-arms itself from it (cheap per event)

    def check_stall() -> None:
        left = last_seen[0] + idle_s - loop.time()
        if left > 0:
            timer[0] = loop.call_later(left, check_stall)
        else:
            interrupt_with("stall")

    if idle_s > 0:
        timer[0] = loop.call_later(idle_s, check_stall)

    def progressed() -> None:  # a chunk of the reply arrived (pisces.ai.providers._limits calls it)
        last_seen[0] = loop.time()

    partial: AssistantMessage | None = None
    open_blocks: dict[int, str] = {}  # contentIndex -> kind, for blocks started but not ended
    failure: BaseException | None = None
    try:
        while interrupt[0] is None:
            in_provider[0] = True
            progress_token = PROGRESS.set(progressed if idle_s > 0 else None)
            try:
                item = await gen.__anext__()
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
                    task.uncancel()  # type: ignore[union-attr]
            last_seen[0] = loop.time()
            kind = _KIND[type(item)]
            if partial is None and kind != "start" and isinstance(getattr(item, "partial", None), AssistantMessage):
                partial = item.partial  # a provider that skipped ``start``: never send a late one
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
