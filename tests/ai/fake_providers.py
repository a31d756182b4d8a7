"""Misbehaving providers for the stream-wrapper tests.

One provider module serves the API ``fake-test``; the model's ``id`` picks the behaviour. Register it with
``pisces.ai.providers.register_provider(API, fake_providers.__name__)`` and use ``model(kind)``.
"""

from __future__ import annotations

import asyncio
from typing import Any, AsyncIterator

from pisces.ai.types import (
    AssistantMessage,
    DoneEvent,
    ErrorEvent,
    Model,
    StartEvent,
    TextContent,
    TextDeltaEvent,
    TextEndEvent,
    TextStartEvent,
    ThinkingContent,
    ThinkingDeltaEvent,
    ThinkingStartEvent,
    ToolCall,
    ToolCallDeltaEvent,
    ToolCallStartEvent,
    Usage,
)

API = "fake-test"

# What each provider run saw, for assertions: kind -> list of notes ("closed", "cancelled", ...).
LOG: dict[str, list[str]] = {}


def model(kind: str) -> Model:
    return Model(id=kind, name=f"fake {kind}", api=API, provider="fake")


def _out(m: Model) -> AssistantMessage:
    return AssistantMessage(content=[], api=m.api, provider=m.provider, model=m.id, usage=Usage(),
                            stopReason="stop", timestamp=0)


def _text(out: AssistantMessage, text: str) -> list[Any]:
    """Events for a complete text block appended to ``out``."""
    idx = len(out.content)
    out.content.append(TextContent(text=""))
    events: list[Any] = [TextStartEvent(contentIndex=idx, partial=out)]
    out.content[idx].text = text
    events.append(TextDeltaEvent(contentIndex=idx, delta=text, partial=out))
    events.append(TextEndEvent(contentIndex=idx, content=text, partial=out))
    return events


class ProviderBoom(RuntimeError):
    pass


class SilentError(Exception):
    """An exception with no message: the wrapper must still give a readable errorMessage."""


async def stream(m: Model, context: Any, options: Any) -> AsyncIterator[Any]:
    kind = m.id
    log = LOG.setdefault(kind, [])
    out = _out(m)
    try:
        if kind == "raise-before-start":
            raise ProviderBoom("connection refused by fake host")
        if kind == "raise-silent":
            raise SilentError()
        if kind == "no-start":
            # skips ``start``: the wrapper still ends with exactly one terminal event
            out.content.append(TextContent(text="x"))
            yield TextStartEvent(contentIndex=0, partial=out)
            return
        if kind == "no-start-slow":
            out.content.append(TextContent(text="y"))
            yield TextStartEvent(contentIndex=0, partial=out)
            await asyncio.sleep(30)
            return
        yield StartEvent(partial=out)
        if kind == "ok":
            for ev in _text(out, "fine"):
                yield ev
            yield DoneEvent(reason="stop", message=out)
            return
        if kind == "raise-mid":
            for ev in _text(out, "partial before the crash"):
                yield ev
            await asyncio.sleep(0)
            raise ProviderBoom("socket reset mid-stream")
        if kind == "no-terminal":
            for ev in _text(out, "then nothing"):
                yield ev
            return
        if kind == "no-terminal-empty":
            return
        if kind == "error-event":
            for ev in _text(out, "half"):
                yield ev
            out.stopReason = "error"
            out.errorMessage = "overloaded_error: Overloaded"
            yield ErrorEvent(reason="error", error=out)
            return
        if kind == "double-terminal":
            for ev in _text(out, "one"):
                yield ev
            yield DoneEvent(reason="stop", message=out)
            log.append("after-first-terminal")  # must never run: the wrapper stops reading
            yield DoneEvent(reason="stop", message=out)
            yield ErrorEvent(reason="error", error=out)
            return
        if kind == "stall":
            # some text, then silence: the idle timeout must end the stream
            for ev in _text(out, "before the stall"):
                yield ev
            await asyncio.sleep(30)
            yield DoneEvent(reason="stop", message=out)
            return
        if kind == "stall-open-block":
            out.content.append(TextContent(text=""))
            yield TextStartEvent(contentIndex=0, partial=out)
            out.content[0].text = "abc"
            yield TextDeltaEvent(contentIndex=0, delta="abc", partial=out)
            await asyncio.sleep(30)
            return
        if kind == "slow-open-blocks":
            # thinking block and a text block left open, then a long wait (an abort interrupts it)
            out.content.append(ThinkingContent(thinking=""))
            yield ThinkingStartEvent(contentIndex=0, partial=out)
            out.content[0].thinking = "pondering"
            yield ThinkingDeltaEvent(contentIndex=0, delta="pondering", partial=out)
            out.content.append(TextContent(text=""))
            yield TextStartEvent(contentIndex=1, partial=out)
            out.content[1].text = "so far"
            yield TextDeltaEvent(contentIndex=1, delta="so far", partial=out)
            await asyncio.sleep(30)
            yield DoneEvent(reason="stop", message=out)
            return
        if kind == "slow-toolcall":
            tc = ToolCall(id="t1", name="bash", arguments={"command": "ls"})
            out.content.append(tc)
            yield ToolCallStartEvent(contentIndex=0, partial=out)
            yield ToolCallDeltaEvent(contentIndex=0, delta='{"command":"ls"', partial=out)
            await asyncio.sleep(30)
            return
        if kind == "slow-before-anything":
            await asyncio.sleep(30)
            yield DoneEvent(reason="stop", message=out)
            return
        if kind == "steady":
            # a reply every 20 ms for ~200 ms: never silent for 100 ms, so no stall
            idx = 0
            out.content.append(TextContent(text=""))
            yield TextStartEvent(contentIndex=idx, partial=out)
            for i in range(10):
                await asyncio.sleep(0.02)
                out.content[0].text += str(i)
                yield TextDeltaEvent(contentIndex=0, delta=str(i), partial=out)
            yield TextEndEvent(contentIndex=0, content=out.content[0].text, partial=out)
            yield DoneEvent(reason="stop", message=out)
            return
        if kind == "swallow-cancel":
            # converts the cancellation into its own exception, as some network stacks do
            for ev in _text(out, "x"):
                yield ev
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                log.append("cancelled")
                raise ProviderBoom("transport closed") from None
            return
        raise AssertionError(f"unknown fake provider kind {kind!r}")
    except asyncio.CancelledError:
        log.append("cancelled")
        raise
    except GeneratorExit:
        log.append("closed")
        raise
