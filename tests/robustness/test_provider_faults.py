"""Provider faults from the scripted server, through the real process and the openai-completions wire.

Every fault ends in a bounded time in one of two clean ways, never a hang or a crash:
- a retry: ``auto_retry_start`` per failed attempt, then ``auto_retry_end{success:true}`` and a good reply;
- exactly one error: the run's last assistant message has ``stopReason:"error"`` and a non-empty
  ``errorMessage``, and it is the only assistant message left in the context (``get_messages``).
Each attempt is one ``agent_start``/``agent_end`` pair (pi's shape: a retry is a new ``continue()`` run), each
prompt exactly one ``agent_settled``, each attempt exactly one request to the server, and every assistant
``message_start`` has exactly one ``message_end``.

Settings: ``retry.maxRetries`` 2, ``retry.baseDelayMs`` 20, SDK retries off. The idle timeout is set so that
it cannot fire on a healthy stream however busy the machine is (a short one made a slow machine's normal reply
look stalled: one extra request, a test failing on timing alone): 120 s, except for the stall fault, which
needs it to fire and gets 3 s (its server stalls for 30 s).
"""

from __future__ import annotations

import json

import pytest
from robust_harness import Agent, events_of, write_scripted_config

from scripted_server import DROP, Reply, Stall

MAX_RETRIES = 2
SETTLE_TIMEOUT = 90.0  # bounds a hang only
STALL_S = 30.0  # longer than the stall fault's idle timeout: only that timeout can end a stalled stream
STALL_IDLE_MS = 3000  # the stall fault's idle timeout
IDLE_MS = 120_000  # every other test: never fires on a stream that is flowing, however slowly


# ------------------------------------------------------------------------------------------------
# The wire
# ------------------------------------------------------------------------------------------------
def chunk(delta: dict | None = None, finish: str | None = None, usage: dict | None = None) -> dict:
    c: dict = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "scripted-model",
               "choices": [] if delta is None and finish is None else
               [{"index": 0, "delta": delta or {}, "finish_reason": finish}]}
    if usage:
        c["usage"] = usage
    return c


USAGE = {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15}


def good_reply(text: str = "Recovered fine.") -> Reply:
    pieces = [text[i:i + 5] for i in range(0, len(text), 5)]
    return Reply.sse([chunk({"role": "assistant", "content": ""}), *[chunk({"content": p}) for p in pieces],
                      chunk(finish="stop"), chunk(usage=USAGE)], done=True)


def tool_call_chunks(arguments: str) -> list[dict]:
    head = {"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                            "function": {"name": "read", "arguments": ""}}]}
    parts = [arguments[i:i + 7] for i in range(0, len(arguments), 7)]
    return [chunk({"role": "assistant", "content": None}), chunk(head),
            *[chunk({"tool_calls": [{"index": 0, "function": {"arguments": p}}]}) for p in parts]]


def http_error(status: int, message: str, kind: str, headers: dict | None = None) -> Reply:
    return Reply.json(status, {"error": {"message": message, "type": kind}}, headers)


FAULTS = {
    "429 with Retry-After": lambda: http_error(429, "Rate limit reached for requests", "rate_limit_error",
                                               {"retry-after": "1", "retry-after-ms": "1000"}),
    "529 overloaded": lambda: http_error(529, "Overloaded", "overloaded_error"),
    "500 server error": lambda: http_error(500, "The server had an error while processing your request",
                                           "server_error"),
    "reset mid-stream": lambda: Reply.sse([chunk({"role": "assistant", "content": ""}), chunk({"content": "Par"}),
                                           chunk({"content": "tial"}), DROP]),
    "stall mid-stream": lambda: Reply.sse([chunk({"role": "assistant", "content": ""}), chunk({"content": "Wait"}),
                                           Stall(STALL_S), chunk({"content": "too late"})]),
    "tool arguments cut off": lambda: Reply.sse(tool_call_chunks('{"path": "notes.txt", "lim')),
}


# ------------------------------------------------------------------------------------------------
# Running one prompt
# ------------------------------------------------------------------------------------------------
def start(tmp_path, server, fault: str = "") -> Agent:
    home = str(tmp_path / "home")
    idle = STALL_IDLE_MS if fault == "stall mid-stream" else IDLE_MS
    write_scripted_config(home, server.url, max_retries=MAX_RETRIES, idle_timeout_ms=idle, base_delay_ms=20)
    agent = Agent([], home=home, cwd=str(tmp_path / "work"))
    agent.wait_for(lambda f: f.get("type") == "ready")
    return agent


def run_prompt(agent: Agent, text: str = "Say something.") -> tuple[list[dict], list[dict]]:
    """Send one prompt, wait (bounded) for its one ``agent_settled``; returns (frames, messages in context)."""
    start = agent.count()
    agent.send({"id": "p", "type": "prompt", "message": text})
    agent.wait_for(lambda f: f.get("type") == "agent_settled", start, timeout=SETTLE_TIMEOUT)
    messages = agent.request({"id": "m", "type": "get_messages"})["data"]["messages"]
    return agent.snapshot(start), messages


def check_common(agent: Agent, frames: list[dict], attempts: int, server) -> None:
    responses = [f for f in frames if f.get("type") == "response" and f.get("id") == "p"]
    assert len(responses) == 1 and responses[0]["success"] is True, responses
    assert len(events_of(frames, "agent_settled")) == 1
    starts, ends = events_of(frames, "agent_start"), events_of(frames, "agent_end")
    assert len(starts) == attempts and len(ends) == attempts, (
        f"{attempts} attempt(s) must give {attempts} agent_start/agent_end pair(s), got "
        f"{len(starts)}/{len(ends)}: {[f['type'] for f in frames if f['type'] != 'message_update']}")
    kinds = [f["type"] for f in frames if f["type"] in ("agent_start", "agent_end")]
    assert kinds == ["agent_start", "agent_end"] * attempts, f"runs interleave: {kinds}"
    a_starts = [f for f in events_of(frames, "message_start") if f["message"]["role"] == "assistant"]
    a_ends = [f for f in events_of(frames, "message_end") if f["message"]["role"] == "assistant"]
    assert len(a_starts) == len(a_ends), "every assistant message_start has its message_end"
    assert len(server.requests) == sum(
        1 for f in a_ends), f"one request per assistant message: {len(server.requests)} requests, {len(a_ends)} replies"
    assert agent.alive() and not agent.violations, agent.describe("the agent died or wrote a non-frame")


def finish(agent: Agent) -> None:
    agent.close_stdin()
    code = agent.wait_exit(5)
    assert code == 0, agent.describe(f"stdin EOF must end the process with 0, got {code}")
    agent.wait_until(lambda: agent.eof, timeout=5, what="stdout EOF")
    assert not agent.violations, agent.describe("stdout carried something that is not a frame")


# ------------------------------------------------------------------------------------------------
# Tests
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_transient_fault_is_retried_then_succeeds(tmp_path, server, fault):
    server.push(FAULTS[fault](), good_reply())
    agent = start(tmp_path, server, fault)
    try:
        frames, messages = run_prompt(agent)
        check_common(agent, frames, attempts=2, server=server)
        retry_starts = events_of(frames, "auto_retry_start")
        assert len(retry_starts) == 1 and retry_starts[0]["attempt"] == 1 and retry_starts[0]["errorMessage"]
        assert events_of(frames, "auto_retry_end") == [{"type": "auto_retry_end", "success": True, "attempt": 1}]
        roles = [(m["role"], m.get("stopReason")) for m in messages]
        assert roles == [("user", None), ("assistant", "stop")], f"context after the retry: {roles}"
        assert messages[-1]["content"] == [{"type": "text", "text": "Recovered fine."}]
        finish(agent)
    finally:
        agent.cleanup()


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_persistent_fault_ends_in_exactly_one_error(tmp_path, server, fault):
    server.push(*[FAULTS[fault]() for _ in range(MAX_RETRIES + 1)])
    agent = start(tmp_path, server, fault)
    try:
        frames, messages = run_prompt(agent)
        check_common(agent, frames, attempts=MAX_RETRIES + 1, server=server)
        assert [f["attempt"] for f in events_of(frames, "auto_retry_start")] == list(range(1, MAX_RETRIES + 1))
        retry_ends = events_of(frames, "auto_retry_end")
        assert len(retry_ends) == 1 and retry_ends[0]["success"] is False and retry_ends[0]["finalError"]
        assistants = [m for m in messages if m["role"] == "assistant"]
        assert len(assistants) == 1, f"exactly one error left in the context, got {len(assistants)}"
        assert assistants[0]["stopReason"] == "error"
        assert isinstance(assistants[0].get("errorMessage"), str) and assistants[0]["errorMessage"].strip()
        assert assistants[0]["errorMessage"] == retry_ends[0]["finalError"]
        # the agent is usable afterwards
        server.push(good_reply("Back again."))
        frames, messages = run_prompt(agent, "Again?")
        assert messages[-1]["stopReason"] == "stop" and len(events_of(frames, "agent_end")) == 1
        finish(agent)
    finally:
        agent.cleanup()


MALFORMED = {
    "not JSON": "data: this is not json\n\n",
    "truncated JSON": 'data: {"id": "chatcmpl-1", "choices": [{"delta": {"content": "oo\n\n',
    "trailing comma": 'data: {"id": "chatcmpl-1", "choices": [],}\n\n',
    "JSON array": "data: [1, 2, 3]\n\n",
}


@pytest.mark.parametrize("kind", sorted(MALFORMED))
def test_malformed_sse_ends_in_a_retry_or_one_clean_error(tmp_path, server, kind):
    """Whether a malformed event is worth a retry depends on its error text (pi's pattern: a JSON error saying
    "Unterminated" matches "terminated"); either way the run ends cleanly, once."""
    server.push(Reply.sse([chunk({"role": "assistant", "content": ""}), chunk({"content": "Fine so far"}),
                           MALFORMED[kind], chunk({"content": " and on"}), chunk(finish="stop")], done=True),
                good_reply())
    agent = start(tmp_path, server)
    try:
        frames, messages = run_prompt(agent)
        retried = bool(events_of(frames, "auto_retry_start"))
        check_common(agent, frames, attempts=2 if retried else 1, server=server)
        if retried:
            assert events_of(frames, "auto_retry_end") == [{"type": "auto_retry_end", "success": True, "attempt": 1}]
            assert [(m["role"], m.get("stopReason")) for m in messages] == [("user", None), ("assistant", "stop")]
        elif kind == "JSON array":  # not an object: skipped, the stream goes on to its end
            assert [(m["role"], m.get("stopReason")) for m in messages] == [("user", None), ("assistant", "stop")]
            assert messages[-1]["content"] == [{"type": "text", "text": "Fine so far and on"}]
        else:
            assert not events_of(frames, "auto_retry_end")
            assert [(m["role"], m.get("stopReason")) for m in messages] == [("user", None), ("assistant", "error")]
            assert messages[-1]["errorMessage"].strip(), "the error says what went wrong"
        finish(agent)
    finally:
        agent.cleanup()


def test_truncated_tool_arguments_give_one_tool_error_and_the_run_goes_on(tmp_path, server):
    """The stream finishes normally but the tool call's JSON arguments are cut off."""
    server.push(Reply.sse([*tool_call_chunks('{"pa'), chunk(finish="tool_calls"), chunk(usage=USAGE)], done=True),
                good_reply("Could not read it."))
    agent = start(tmp_path, server)
    try:
        frames, messages = run_prompt(agent)
        check_common(agent, frames, attempts=1, server=server)
        tool_ends = events_of(frames, "tool_execution_end")
        assert len(tool_ends) == 1 and tool_ends[0]["isError"] is True, tool_ends
        assert json.dumps(tool_ends[0]["result"]).strip(), "the tool error has a text"
        assert [(m["role"], m.get("stopReason")) for m in messages] == [
            ("user", None), ("assistant", "toolUse"), ("toolResult", None), ("assistant", "stop")]
        assert not events_of(frames, "auto_retry_start")
        finish(agent)
    finally:
        agent.cleanup()
