"""``stream(model, context, options)``: the one entry point to every provider.

Guarantees, whatever the provider does:
- the iterator ends with exactly one ``done`` or ``error`` event and never raises;
- an abort (``options.signal``) ends the stream at once with ``error``/``aborted``, keeping partial content;
- an exception inside the provider becomes ``error`` with a readable ``errorMessage``;
- a stream that goes silent for ``options.idleTimeoutMs`` ends with a retryable timeout error.

The provider runs in its own task feeding a queue, so an abort or a stall can cancel its network read
immediately without the provider having to cooperate.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import AsyncIterator

from pisces.ai.providers import get_provider
from pisces.ai.types import (
    AssistantMessage,
    AssistantMessageEvent,
    Context,
    DoneEvent,
    ErrorEvent,
    Model,
    StartEvent,
    StreamOptions,
    Usage,
    now_ms,
)

ABORTED_MESSAGE = "Request was aborted"

_END = object()


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
        out.errorMessage = ABORTED_MESSAGE
        yield ErrorEvent(reason="aborted", error=out)
        return

    loop = asyncio.get_running_loop()
    buf: deque = deque()
    waiter: list[asyncio.Future | None] = [None]
    state = {"stalled": False}

    def wake() -> None:
        fut = waiter[0]
        if fut is not None and not fut.done():
            fut.set_result(None)

    async def produce() -> None:
        try:
            async for ev in provider.stream(model, context, options):
                buf.append(ev)
                wake()
        except asyncio.CancelledError:
            buf.append(_END)
            wake()
            raise
        except BaseException as exc:  # noqa: BLE001 - converted to an error event below
            buf.append(exc)
        buf.append(_END)
        wake()

    task = loop.create_task(produce())
    remove_listener = signal.add_listener(lambda: (task.cancel(), wake())) if signal is not None else None

    idle_s = (options.idleTimeoutMs or 0) / 1000
    timer: list[asyncio.TimerHandle | None] = [None]

    def on_stall() -> None:
        state["stalled"] = True
        task.cancel()
        wake()

    def arm() -> None:
        if idle_s > 0:
            if timer[0] is not None:
                timer[0].cancel()
            timer[0] = loop.call_later(idle_s, on_stall)

    partial: AssistantMessage | None = None
    terminal_sent = False
    try:
        arm()
        while True:
            if not buf:
                if signal is not None and signal.aborted or state["stalled"]:
                    break
                fut = loop.create_future()
                waiter[0] = fut
                await fut
                waiter[0] = None
                continue
            item = buf.popleft()
            if item is _END:
                break
            if isinstance(item, BaseException):
                out = partial or _empty_output(model)
                if partial is None:
                    yield StartEvent(partial=out)
                out.stopReason = "error"
                out.errorMessage = _describe(item)
                terminal_sent = True
                yield ErrorEvent(reason="error", error=out)
                return
            arm()
            if isinstance(item, StartEvent):
                partial = item.partial
            elif isinstance(item, (DoneEvent, ErrorEvent)):
                terminal_sent = True
                yield item
                return
            yield item
        # the loop ended without a terminal event: aborted, stalled, or the provider just stopped
        out = partial or _empty_output(model)
        if signal is not None and signal.aborted:
            out.stopReason = "aborted"
            out.errorMessage = ABORTED_MESSAGE
            terminal_sent = True
            if partial is None:
                yield StartEvent(partial=out)
            yield ErrorEvent(reason="aborted", error=out)
            return
        if partial is None:
            yield StartEvent(partial=out)
        out.stopReason = "error"
        if state["stalled"]:
            out.errorMessage = (f"Stream stalled: the provider sent nothing for {idle_s:g} s (request timed out)")
        else:
            out.errorMessage = "Provider stream ended without a final message (connection lost)"
        terminal_sent = True
        yield ErrorEvent(reason="error", error=out)
    finally:
        if timer[0] is not None:
            timer[0].cancel()
        if remove_listener is not None:
            remove_listener()
        if not task.done():
            task.cancel()
        _ = terminal_sent


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
