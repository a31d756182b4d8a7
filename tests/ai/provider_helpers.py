"""Helpers shared by the provider tests: build the options and the context of a request, drive
``pisces.ai.stream.stream`` and summarise the events it yields.

Each provider test keeps its own defaults (API key, system prompt) by calling the factories once::

    opts = options_factory("test-key")
    user, ctx = context_factory("You are terse.", user_timestamp=1, default_prompt="Hi")
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable

import msgspec

from pisces.ai.stream import stream
from pisces.ai.types import AssistantMessage, Context, Model, StreamOptions, TextContent, Usage, UserMessage, event_type

# A 1x1 PNG, base64.
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
ZERO_USAGE = msgspec.to_builtins(Usage())


def options_factory(api_key: str) -> Callable[..., StreamOptions]:
    """``opts(**kw)``: StreamOptions with ``api_key`` and no SDK retries, unless ``kw`` says otherwise."""

    def opts(**kw) -> StreamOptions:
        kw.setdefault("apiKey", api_key)
        kw.setdefault("maxRetries", 0)
        return StreamOptions(**kw)

    return opts


def context_factory(system: str, *, user_timestamp: int | None = None,
                    default_prompt: str | None = None) -> tuple[Callable[..., UserMessage], Callable[..., Context]]:
    """``(user, ctx)`` for a provider's tests.

    ``user(text)`` is a user turn with one text block (stamped ``user_timestamp`` when given, else now).
    ``ctx(*messages, system=system, tools=None)`` is the request context: ``system=None`` leaves the system prompt
    unset, and with no messages it holds ``user(default_prompt)`` when a default prompt is given.
    """
    stamp = {} if user_timestamp is None else {"timestamp": user_timestamp}

    def user(text: str) -> UserMessage:
        return UserMessage(content=[TextContent(text=text)], **stamp)

    def ctx(*messages, system: str | None = system, tools=None) -> Context:
        if not messages and default_prompt is not None:
            messages = (user(default_prompt),)
        c = Context(messages=list(messages))
        if system is not None:
            c.systemPrompt = system
        if tools is not None:
            c.tools = tools
        return c

    return user, ctx


async def collect(model: Model, context: Context, options: StreamOptions,
                  on_event: Callable[[Any, list], Any] | None = None) -> list:
    """Every event of one stream; ``on_event(event, events so far)`` runs after each one."""
    events: list = []
    async for ev in stream(model, context, options):
        events.append(ev)
        if on_event is not None:
            on_event(ev, events)
    return events


def kinds(events: list) -> list[str]:
    return [event_type(e) for e in events]


def final(events: list) -> AssistantMessage:
    """The message the terminal event carries (``done`` or ``error``)."""
    last = events[-1]
    return last.message if event_type(last) == "done" else last.error


def brief(events: list) -> list[dict]:
    """The comparable part of each update (no partial), as the conformance notes recommend."""
    out = []
    for e in events[1:-1]:
        d = msgspec.to_builtins(e)
        d.pop("partial", None)
        out.append(d)
    return out


async def run_summary(model: Model, context: Context, options: StreamOptions) -> tuple[list[str], list,
                                                                                         AssistantMessage]:
    """One stream as ``(kinds, events, final message)``."""
    events = await collect(model, context, options)
    return kinds(events), events, final(events)


async def abort_soon_after_text_deltas(model: Model, context: Context, options: StreamOptions, signal,
                                       delay: float = 0.05) -> tuple[list[str], Any]:
    """Stream, calling ``signal.abort`` ``delay`` seconds after each text delta; ``(kinds, last event)``."""
    types: list[str] = []
    last = None
    async for ev in stream(model, context, options):
        types.append(event_type(ev))
        if types[-1] == "text_delta":
            asyncio.get_running_loop().call_later(delay, signal.abort)
        last = ev
    return types, last
