"""``LiveState``: what a browser joining mid-reply is given as the streaming message."""

from __future__ import annotations

from pisces.agent.types import MessageEndEvent, MessageStartEvent
from pisces.ai.types import AssistantMessage, UserMessage
from pisces.modes.host.replay import LiveState


def _assistant() -> AssistantMessage:
    return AssistantMessage(content=[], api="faux", provider="faux", model="m")


def test_an_assistant_message_streams_from_its_start_before_any_delta():
    live = LiveState()
    reply = _assistant()
    live.observe(MessageStartEvent(message=reply))
    assert live.streaming is reply
    live.observe(MessageEndEvent(message=reply))
    assert live.streaming is None


def test_a_user_message_start_is_not_a_streaming_reply():
    live = LiveState()
    live.observe(MessageStartEvent(message=UserMessage(content="hi")))
    assert live.streaming is None
