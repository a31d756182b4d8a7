"""Helpers shared by the agent tests: messages, an event recorder with readable labels, a prompt driven to an
action once an event matches, and the wait at the heart of the slow fake tools."""

from __future__ import annotations

import asyncio
from typing import Callable

from pisces.agent.agent import Agent
from pisces.agent.types import MessageUpdateEvent
from pisces.ai.types import TextContent, UserMessage, event_type


def user(text: str) -> UserMessage:
    return UserMessage(content=[TextContent(text=text)])


def text_of(message) -> str:
    return "".join(b.text for b in message.content if isinstance(b, TextContent))


def label(ev, *, user_text: bool = False) -> str:
    """A short name for an agent event, e.g. ``update:text_delta``, ``message_end:assistant``,
    ``tool_execution_start:call_1``; with ``user_text`` a user message's text is added (``message_start:user:hi``)."""
    t = event_type(ev)
    if t == "message_update":
        return f"update:{event_type(ev.assistantMessageEvent)}"
    if t in ("message_start", "message_end"):
        m = ev.message
        return f"{t}:{event_type(m)}" + (f":{text_of(m)}" if user_text and event_type(m) == "user" else "")
    if t.startswith("tool_execution"):
        return f"{t}:{ev.toolCallId}"
    return t


class Recorder:
    """Every event the agent emits, in order; ``when(pred)`` is a future for the first later event matching ``pred``."""

    user_text = False  # label user messages with their text (see ``label``)

    def __init__(self, agent: Agent) -> None:
        self.events: list = []
        self._waiters: list[tuple] = []
        agent.subscribe(self._on)

    def _on(self, ev) -> None:
        self.events.append(ev)
        for pred, fut in list(self._waiters):
            if not fut.done() and pred(ev):
                fut.set_result(ev)

    def when(self, pred) -> asyncio.Future:
        fut = asyncio.get_running_loop().create_future()
        self._waiters.append((pred, fut))
        return fut

    def labels(self) -> list[str]:
        return [label(e, user_text=self.user_text) for e in self.events]

    def of(self, cls) -> list:
        return [e for e in self.events if isinstance(e, cls)]

    def deltas(self, kind: str = "text_delta") -> str:
        """The streamed deltas of one kind, joined."""
        return "".join(e.assistantMessageEvent.delta for e in self.events
                       if isinstance(e, MessageUpdateEvent) and event_type(e.assistantMessageEvent) == kind)


async def run_with(agent: Agent, rec: Recorder, prompt: str, *, pred, action: Callable[[], object],
                   timeout: float = 5.0) -> list:
    """Start a prompt, run ``action`` once ``pred`` matches an event, and finish the run."""
    hit = rec.when(pred)
    task = asyncio.create_task(agent.prompt([user(prompt)]))
    await asyncio.wait_for(hit, 2.0)
    action()
    return await asyncio.wait_for(task, timeout)


async def sleep_unless_aborted(signal, seconds: float) -> bool:
    """Wait ``seconds``, or until ``signal`` aborts; True when it aborted."""
    woke = asyncio.Event()
    remove = signal.add_listener(woke.set)
    try:
        await asyncio.wait_for(woke.wait(), seconds)
    except asyncio.TimeoutError:
        return False
    finally:
        remove()
    return True
