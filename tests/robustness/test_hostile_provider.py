"""A hostile provider against the real ``pisces --mode rpc`` process (openai-completions wire).

- A 50 MB error body (a 503, so it is retried): once it was read whole, classified by regexes on the event loop
  for 51 s and emitted three times per attempt. Now each attempt reads 64 KB of it, the error text is bounded,
  and the whole prompt writes a few kilobytes of frames while the process keeps answering.
- An endless stream of deltas: it once wrote gigabytes of snapshots and never ended. Now it ends far past the
  model's maxTokens (64 characters a token), long before the byte cap, and otherwise at the reply
  bound (``PISCES_MAX_REPLY_MB``, 2 here) with one readable error, and what was written stays linear in the
  reply (deltas of a large message are merged).
Every wait is bounded; the server's bodies are generators (nothing is built in memory).
"""

from __future__ import annotations

import json
import time

from robust_harness import Agent, events_of, write_scripted_config

from pisces.ai.providers._limits import MAX_ERROR_MESSAGE_CHARS
from scripted_server import Reply

MB = 1024 * 1024
SETTLE_TIMEOUT = 60.0


def start(tmp_path, server, env: dict | None = None) -> Agent:
    home = str(tmp_path / "home")
    write_scripted_config(home, server.url, max_retries=2, idle_timeout_ms=10_000, base_delay_ms=20)
    agent = Agent([], home=home, cwd=str(tmp_path / "work"), env=env)
    agent.wait_for(lambda f: f.get("type") == "ready")
    return agent


def frame_bytes(frames: list[dict]) -> int:
    return sum(len(json.dumps(f, ensure_ascii=False).encode()) + 1 for f in frames)


def prompt(agent: Agent) -> tuple[list[dict], list[dict]]:
    start_at = agent.count()
    agent.send({"id": "p", "type": "prompt", "message": "hello"})
    agent.wait_for(lambda f: f.get("type") == "agent_settled", start_at, timeout=SETTLE_TIMEOUT)
    messages = agent.request({"id": "m", "type": "get_messages"}, timeout=30)["data"]["messages"]
    return agent.snapshot(start_at), messages


def test_a_50_mb_error_body_costs_kilobytes(tmp_path, server):
    def body():
        yield '{"error": {"message": "'
        piece = "overloaded " * 6000
        for _ in range(50 * MB // len(piece)):
            yield piece
        yield '"}}'

    for _ in range(3):  # the attempt and its two retries
        server.push(Reply(503, {"content-type": "application/json", "x-should-retry": "false"}, [body()]))
    agent = start(tmp_path, server)
    try:
        frames, messages = prompt(agent)
        assert len(events_of(frames, "auto_retry_start")) == 2
        assistants = [m for m in messages if m["role"] == "assistant"]
        assert len(assistants) == 1 and assistants[0]["stopReason"] == "error"
        text = assistants[0]["errorMessage"]
        assert text.startswith("503 ") and len(text) <= MAX_ERROR_MESSAGE_CHARS + 100, text[:200]
        written = frame_bytes(frames)
        assert written < 512 * 1024, f"{written} bytes of frames for one failed prompt"
        # the server's threads notice the hang-up at their next write, which on a busy machine may come after
        # the agent settled: wait for each to end one way or the other
        deadline = time.monotonic() + 30
        while not all(s.client_hung_up or s.finished for s in server.sent) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert all(s.client_hung_up for s in server.sent), "every 50 MB body was read to its end"
        assert agent.request({"id": "s", "type": "get_state"})["data"]["isStreaming"] is False
        assert not agent.violations
    finally:
        agent.cleanup()


def _chunk(delta: dict | None = None, finish: str | None = None) -> str:
    return "data: " + json.dumps({"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "m",
                                  "choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish}]}) + "\n\n"


def test_an_endless_stream_ends_with_one_error_and_linear_output(tmp_path, server):
    piece = _chunk({"content": "endless words " * 8})

    def forever():
        while True:
            yield piece

    server.push(Reply(200, {"content-type": "text/event-stream"}, [_chunk({"role": "assistant", "content": ""}),
                                                                    forever()]))
    agent = start(tmp_path, server)  # the default byte cap (64 MB) is far away: maxTokens stops it first
    try:
        frames, messages = prompt(agent)
        assert not events_of(frames, "auto_retry_start"), "a reply over the bound is not retried"
        assistants = [m for m in messages if m["role"] == "assistant"]
        assert len(assistants) == 1 and assistants[0]["stopReason"] == "error"
        assert assistants[0]["errorMessage"].startswith("The provider kept sending past this model's output limit")
        assert "for maxTokens 4096)" in assistants[0]["errorMessage"]
        text = assistants[0]["content"][0]["text"]
        assert 64 * 4096 < len(text) < 64 * 4096 + 64 * 1024  # stopped right past 64 characters a token
        # every delta is in the frames, in order, however they were merged
        deltas = [f["assistantMessageEvent"]["delta"] for f in events_of(frames, "message_update")
                  if f["assistantMessageEvent"]["type"] == "text_delta"]
        assert "".join(deltas) == text
        written = frame_bytes(frames)
        # one snapshot per delta would be ~len(text)^2/112 (16 GB here, twice over): merged, it stays a
        # small multiple of the text (the bound leaves room for a loaded machine's scheduling gaps)
        assert written < 200 * len(text), f"{written / len(text):.0f}x the reply in frames"
        assert not agent.violations
    finally:
        agent.cleanup()
