"""Retry-After: a 429's header reaches the error text, and pisces' back-off waits at least that long."""

import asyncio

from pisces.ai.stream import complete
from pisces.ai.types import AssistantMessage, Context, Model, StreamOptions, UserMessage
from pisces.core.session.retry import RetryPolicy, retry_after_ms
from scripted_server import Reply


async def test_429_retry_after_header_reaches_the_error_text(server):
    server.push(Reply.json(429, {"error": {"message": "Too many requests"}}, headers={"retry-after": "3"}))
    model = Model(id="m", name="m", api="openai-completions", provider="p", baseUrl=server.url + "/v1")
    msg = await complete(model, Context(messages=[UserMessage(content="hi")]), StreamOptions(apiKey="k", maxRetries=0))
    assert msg.stopReason == "error"
    assert msg.errorMessage == "429 Too many requests (retry-after: 3s)"
    assert retry_after_ms(msg.errorMessage) == 3000


class _Settings:
    retry_enabled = True
    retry_max_retries = 3
    retry_base_delay_ms = 10
    retry_provider_max_retry_delay_ms = 60000


class _Agent:
    def __init__(self, messages):
        self.messages = messages


class _Session:
    def __init__(self, messages):
        self.settings = _Settings()
        self.agent = _Agent(messages)
        self.budget = None  # AgentSession's budget slot: none here
        self.events = []

    def emit(self, event):
        self.events.append(event)


async def test_back_off_waits_for_the_servers_retry_after():
    err = AssistantMessage(content=[], api="a", provider="p", model="m", stopReason="error",
                           errorMessage="429 Too many requests (retry-after: 0.3s)")
    session = _Session([err])
    policy = RetryPolicy(session)
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    assert await policy.handle_error(err) is True
    waited = loop.time() - t0
    start = session.events[0]
    assert start["type"] == "auto_retry_start" and start["delayMs"] == 300  # not the 10 ms base delay
    assert waited >= 0.29
    assert session.agent.messages == []  # the failed reply left the context sent to the model


async def test_a_400_is_never_retried():
    err = AssistantMessage(content=[], api="a", provider="p", model="m", stopReason="error",
                           errorMessage="400 Bad request: invalid thing")
    session = _Session([err])
    assert await RetryPolicy(session).handle_error(err) is False
    assert session.events == [] and session.agent.messages == [err]
