"""End to end, auto-retry: the real ``pisces --mode rpc`` against the scripted OpenAI-compatible server.

Transient errors (5xx, 429, in-stream overloaded errors, a dropped connection, a stalled stream) are retried
with exponential back-off and pi's ``auto_retry_start``/``auto_retry_end`` events; the failed attempt leaves
the context sent to the model but stays in the session file; ``abort_retry`` cancels the wait; a 400 is never
retried. The scripted server sends ``x-should-retry: false`` and settings turn the SDK's own retries off
(``retry.provider.maxRetries: 0``), so one scripted failure is one pisces-level failure.
"""

from __future__ import annotations

import json
import time

import pytest
from e2eproc import compact

from scripted_server import DROP, Reply, Stall


def chunk(delta: dict | None = None, finish: str | None = None) -> dict:
    return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0, "model": "scripted-model",
            "choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish}]}


def usage(prompt: int, completion: int) -> dict:
    return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0, "model": "scripted-model",
            "choices": [], "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                                     "total_tokens": prompt + completion}}


def ok_reply(text: str = "Recovered.") -> Reply:
    return Reply.sse([chunk({"role": "assistant", "content": ""}), chunk({"content": text}), chunk({}, "stop"),
                      usage(100, 3)], done=True)


def status(code: int, message: str, kind: str = "server_error", headers: dict | None = None) -> Reply:
    return Reply.json(code, {"error": {"message": message, "type": kind}}, headers)


def overloaded_in_stream() -> Reply:
    return Reply.sse([chunk({"role": "assistant", "content": ""}), chunk({"content": "partial text "}),
                      chunk({"content": "bef"}), {"error": {"message": "Overloaded", "type": "overloaded_error"}}])


S503 = "503 Service Unavailable"
FAILED_RUN = ["response:prompt", "agent_start", "turn_start", "message_start:user", "message_end:user",
              "message_start:assistant", "message_end:assistant", "turn_end", "agent_end"]
RETRY_RUN_OK = ["agent_start", "turn_start", "message_start:assistant", "message_update*", "message_end:assistant",
                "auto_retry_end", "turn_end", "agent_end"]


def start(home, spawn, server, settings: dict | None = None):
    home.scripted_provider(server.url + "/v1", settings)
    return spawn()


def llm_messages(server) -> list[list[dict]]:
    """The messages of every chat request the server got, without the system prompt."""
    return [[m for m in r.body["messages"] if m["role"] != "system"] for r in server.requests]


def file_entries(path: str) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def events_of(frames, kind):
    return [f for f in frames if f.get("type") == kind]


def test_503_then_success(home, spawn, server):
    server.push(status(503, "Service Unavailable"), ok_reply())
    p = start(home, spawn, server)
    p.send({"id": "p", "type": "prompt", "message": "hi"})
    frames = p.until_type("agent_settled", timeout=15)
    seq = compact(frames)
    assert seq == FAILED_RUN + ["auto_retry_start"] + RETRY_RUN_OK + ["agent_settled"]
    failed = events_of(frames, "message_end")[1]["message"]
    assert failed["stopReason"] == "error" and failed["errorMessage"] == S503 and failed["content"] == []
    assert events_of(frames, "agent_end")[0]["messages"][-1] == failed
    assert events_of(frames, "auto_retry_start") == [
        {"type": "auto_retry_start", "attempt": 1, "maxAttempts": 3, "delayMs": 50, "errorMessage": S503}]
    assert events_of(frames, "auto_retry_end") == [{"type": "auto_retry_end", "success": True, "attempt": 1}]
    second_run = frames[seq.index("auto_retry_start") + 1:]
    assert not any(f["type"] == "message_start" and f["message"]["role"] == "user" for f in second_run)
    assert [m["role"] for m in events_of(frames, "agent_end")[1]["messages"]] == ["assistant"]  # no user message
    # the context: the error left it (it is kept in the file)
    msgs = p.ok({"type": "get_messages"})["messages"]
    assert [(m["role"], m.get("stopReason")) for m in msgs] == [("user", None), ("assistant", "stop")]
    assert llm_messages(server) == [[{"role": "user", "content": [{"type": "text", "text": "hi"}]}]] * 2
    session_file = p.ok({"type": "get_state"})["sessionFile"]
    entries = [e for e in file_entries(session_file) if e["type"] == "message"]
    assert [(e["message"]["role"], e["message"].get("stopReason")) for e in entries] == [
        ("user", None), ("assistant", "error"), ("assistant", "stop")]
    assert entries[1]["message"]["errorMessage"] == S503
    assert entries[2]["parentId"] == entries[1]["id"]  # the file keeps the chain through the failure
    assert p.close() == 0


def test_in_stream_overloaded_error_then_success(home, spawn, server):
    server.push(overloaded_in_stream(), ok_reply("Second try."))
    p = start(home, spawn, server)
    p.send({"id": "p", "type": "prompt", "message": "hi"})
    frames = p.until_type("agent_settled", timeout=15)
    seq = compact(frames)
    assert seq == (FAILED_RUN[:6] + ["message_update*"] + FAILED_RUN[6:] + ["auto_retry_start"] + RETRY_RUN_OK
                   + ["agent_settled"])
    failed = events_of(frames, "message_end")[1]["message"]
    assert failed["errorMessage"] == "Overloaded"  # the provider's message as sent
    assert failed["content"] == [{"type": "text", "text": "partial text bef"}]  # the partial text is kept
    assert events_of(frames, "auto_retry_start")[0]["errorMessage"] == "Overloaded"
    # the failed attempt's partial assistant message is not sent back to the model
    assert llm_messages(server)[1] == [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    assert "partial text" not in json.dumps(server.requests[1].body)
    assert p.ok({"type": "get_last_assistant_text"}) == {"text": "Second try."}
    entries = file_entries(p.ok({"type": "get_state"})["sessionFile"])
    kept = [e["message"] for e in entries if e["type"] == "message" and e["message"].get("stopReason") == "error"]
    assert len(kept) == 1 and kept[0]["content"] == [{"type": "text", "text": "partial text bef"}]
    assert p.close() == 0


def test_exhaustion_after_max_retries(home, spawn, server):
    server.push(*[status(503, "Service Unavailable") for _ in range(4)])
    p = start(home, spawn, server)
    p.send({"id": "p", "type": "prompt", "message": "hi"})
    frames = p.until_type("agent_settled", timeout=15)
    seq = compact(frames)
    retry_fail = ["agent_start", "turn_start", "message_start:assistant", "message_end:assistant", "turn_end",
                  "agent_end"]
    assert seq == (FAILED_RUN + ["auto_retry_start"] + retry_fail + ["auto_retry_start"] + retry_fail
                   + ["auto_retry_start"] + retry_fail + ["auto_retry_end", "agent_settled"])
    starts = events_of(frames, "auto_retry_start")
    assert [(s["attempt"], s["maxAttempts"], s["delayMs"]) for s in starts] == [(1, 3, 50), (2, 3, 100), (3, 3, 200)]
    assert events_of(frames, "auto_retry_end") == [
        {"type": "auto_retry_end", "success": False, "attempt": 3, "finalError": S503}]
    assert len(server.requests) == 4
    msgs = p.ok({"type": "get_messages"})["messages"]  # in memory, only the last error is left
    assert [(m["role"], m.get("stopReason")) for m in msgs] == [("user", None), ("assistant", "error")]
    entries = [e for e in file_entries(p.ok({"type": "get_state"})["sessionFile"]) if e["type"] == "message"]
    errors = [e for e in entries if e["message"].get("stopReason") == "error"]
    assert len(errors) == 4  # the file keeps all four, each a child of the previous one
    assert [e["parentId"] for e in errors[1:]] == [e["id"] for e in errors[:-1]]
    # the next prompt starts a fresh sequence at attempt 1
    server.push(status(502, "Bad Gateway"), ok_reply())
    p.send({"id": "p2", "type": "prompt", "message": "again"})
    frames = p.until_type("agent_settled", timeout=15)
    assert [s["attempt"] for s in events_of(frames, "auto_retry_start")] == [1]
    assert events_of(frames, "auto_retry_end") == [{"type": "auto_retry_end", "success": True, "attempt": 1}]
    # the request after the exhausted run: two user messages in a row, none of the errors
    assert llm_messages(server)[-1] == [{"role": "user", "content": [{"type": "text", "text": "hi"}]},
                                        {"role": "user", "content": [{"type": "text", "text": "again"}]}]
    assert p.close() == 0


def test_abort_retry_cancels_the_back_off(home, spawn, server):
    server.push(status(503, "Service Unavailable"), ok_reply())
    p = start(home, spawn, server, {"retry": {"baseDelayMs": 60_000}})
    p.send({"id": "p", "type": "prompt", "message": "hi"})
    frames = p.until_type("auto_retry_start", timeout=30)
    assert frames[-1]["delayMs"] == 60_000
    state = p.ok({"type": "get_state"})
    assert state["isStreaming"] is False  # as pi: not streaming during the back-off
    t0 = time.monotonic()
    p.send({"id": "ar", "type": "abort_retry"})
    frames = p.until_type("agent_settled", timeout=30)
    if not any(f.get("id") == "ar" for f in frames):
        frames += p.until(lambda f: f.get("id") == "ar", timeout=30)
    assert time.monotonic() - t0 < 30  # well before the 60 s back-off would end
    # answered after the auto_retry_end it caused (agent_settled may come before or after the answer)
    assert sorted(compact(frames)) == ["agent_settled", "auto_retry_end", "response:abort_retry"]
    assert compact(frames)[0] == "auto_retry_end"
    assert frames[0] == {"type": "auto_retry_end", "success": False, "attempt": 1, "finalError": "Retry cancelled"}
    assert len(server.requests) == 1
    # nothing else is pending: the next prompt works at once
    p.send({"id": "p2", "type": "prompt", "message": "again"})
    frames = p.until_type("agent_settled", timeout=15)
    assert not events_of(frames, "auto_retry_start") and not events_of(frames, "auto_retry_end")
    assert p.ok({"type": "get_last_assistant_text"}) == {"text": "Recovered."}
    assert p.close() == 0


def test_abort_cancels_the_back_off_too(home, spawn, server):
    server.push(status(500, "Internal error"))
    p = start(home, spawn, server, {"retry": {"baseDelayMs": 60_000}})
    p.send({"id": "p", "type": "prompt", "message": "hi"})
    p.until_type("auto_retry_start", timeout=30)
    t0 = time.monotonic()
    p.send({"id": "a", "type": "abort"})
    frames = p.until(lambda f: f.get("type") == "agent_settled", timeout=30)
    frames += p.until(lambda f: f.get("id") == "a", timeout=30) if not any(f.get("id") == "a" for f in frames) else []
    assert time.monotonic() - t0 < 30  # well before the 60 s back-off would end
    assert sorted(compact(frames)) == sorted(["auto_retry_end", "agent_settled", "response:abort"])
    assert events_of(frames, "auto_retry_end")[0]["finalError"] == "Retry cancelled"
    assert len(server.requests) == 1
    assert p.close() == 0


def test_a_400_is_never_retried(home, spawn, server):
    server.push(status(400, "Bad request: invalid thing", "invalid_request_error"))
    p = start(home, spawn, server)
    p.send({"id": "p", "type": "prompt", "message": "hi"})
    frames = p.until_type("agent_settled", timeout=15)
    assert compact(frames) == FAILED_RUN + ["agent_settled"]
    assert events_of(frames, "message_end")[1]["message"]["errorMessage"] == "400 Bad request: invalid thing"
    time.sleep(0.3)
    assert p.drain(0.1) == [] and len(server.requests) == 1
    msgs = p.ok({"type": "get_messages"})["messages"]
    assert [(m["role"], m.get("stopReason")) for m in msgs] == [("user", None), ("assistant", "error")]
    assert p.close() == 0


def test_retry_disabled_gives_a_plain_error_run(home, spawn, server):
    server.push(status(503, "Service Unavailable"))
    p = start(home, spawn, server)
    p.ok({"type": "set_auto_retry", "enabled": False})
    p.send({"id": "p", "type": "prompt", "message": "hi"})
    frames = p.until_type("agent_settled", timeout=15)
    assert compact(frames) == FAILED_RUN + ["agent_settled"]
    assert len(server.requests) == 1
    assert home.read_json("settings.json")["retry"]["enabled"] is False
    assert p.close() == 0


@pytest.mark.parametrize("failure,message_start", [
    (status(429, "Rate limit reached for requests", "rate_limit_error"), "429 Rate limit reached"),
    (Reply(status=502, headers={"content-type": "text/plain", "x-should-retry": "false"}, chunks=["Bad Gateway"]),
     "502 Bad Gateway"),
    (Reply.sse([chunk({"role": "assistant", "content": ""}), chunk({"content": "Hel"}), DROP]), "Connection lost"),
    (Reply.sse([chunk({"role": "assistant", "content": ""}), chunk({"content": "Hel"}),
                {"error": {"message": "Rate limit exceeded, slow down"}}]), "Rate limit exceeded"),
], ids=["429", "502-text", "connection-reset", "in-stream-rate-limit"])
def test_other_transient_errors_are_retried(home, spawn, server, failure, message_start):
    server.push(failure, ok_reply())
    p = start(home, spawn, server)
    p.send({"id": "p", "type": "prompt", "message": "hi"})
    frames = p.until_type("agent_settled", timeout=15)
    (retry,) = events_of(frames, "auto_retry_start")
    assert retry["errorMessage"].startswith(message_start), retry
    assert events_of(frames, "auto_retry_end") == [{"type": "auto_retry_end", "success": True, "attempt": 1}]
    assert p.ok({"type": "get_last_assistant_text"}) == {"text": "Recovered."}
    assert len(server.requests) == 2
    assert p.close() == 0


def test_a_stalled_stream_times_out_and_is_retried(home, spawn, server):
    """The provider stops sending mid-stream: retry.provider.idleTimeoutMs (3 s here) ends the attempt as a
    retryable error instead of a hang, and the retry succeeds."""
    server.push(ok_reply("warm"),
                Reply.sse([chunk({"role": "assistant", "content": ""}), chunk({"content": "Hal"}), Stall(60),
                           chunk({"content": "never"}), chunk({}, "stop")], done=True), ok_reply())
    p = start(home, spawn, server, {"retry": {"provider": {"idleTimeoutMs": 3000}}})
    p.send({"id": "p0", "type": "prompt", "message": "warm up"})  # the SDK's import is not what is timed here
    p.until_type("agent_settled", timeout=15)
    t0 = time.monotonic()
    p.send({"id": "p", "type": "prompt", "message": "hi"})
    frames = p.until_type("agent_settled", timeout=45)
    assert time.monotonic() - t0 < 45  # well before the 60 s stall would end
    failed = events_of(frames, "message_end")[1]["message"]
    assert failed["stopReason"] == "error" and failed["content"] == [{"type": "text", "text": "Hal"}]
    assert "stalled" in failed["errorMessage"] and "3 s" in failed["errorMessage"]
    (retry,) = events_of(frames, "auto_retry_start")
    assert retry["errorMessage"] == failed["errorMessage"]
    assert events_of(frames, "auto_retry_end") == [{"type": "auto_retry_end", "success": True, "attempt": 1}]
    assert len(server.requests) == 3 and "Hal" not in json.dumps(server.requests[2].body["messages"])
    assert p.close() == 0


def test_retry_after_in_the_error_text_sets_the_wait(home, spawn, server):
    server.push(status(429, "Rate limit reached. Please retry after 1 s", "rate_limit_error"), ok_reply())
    p = start(home, spawn, server)
    p.send({"id": "p", "type": "prompt", "message": "hi"})
    frames = p.until_type("auto_retry_start", timeout=15)
    t0 = time.monotonic()
    assert frames[-1]["delayMs"] == 1000
    p.until_type("agent_settled", timeout=15)
    assert time.monotonic() - t0 >= 0.8
    assert p.close() == 0


def test_the_sdk_honours_retry_after_when_its_own_retries_are_on(home, spawn, server):
    """With the SDK's retries on (its default), a 429 with ``Retry-After: 1`` is retried by the SDK after that
    wait, inside one attempt: no auto_retry events at all."""
    server.push(Reply(status=429, headers={"content-type": "application/json", "retry-after": "1"},
                      chunks=[json.dumps({"error": {"message": "Rate limit reached", "type": "rate_limit_error"}})]),
                ok_reply())
    p = start(home, spawn, server, {"retry": {"provider": {"maxRetries": 2}}})
    t0 = time.monotonic()
    p.send({"id": "p", "type": "prompt", "message": "hi"})
    frames = p.until_type("agent_settled", timeout=15)
    assert time.monotonic() - t0 >= 0.9
    assert not events_of(frames, "auto_retry_start") and not events_of(frames, "auto_retry_end")
    assert len(server.requests) == 2
    assert server.requests[1].headers.get("x-stainless-retry-count") == "1"
    assert p.ok({"type": "get_last_assistant_text"}) == {"text": "Recovered."}
    assert p.close() == 0


def test_retry_after_header_sets_the_wait(home, spawn, server):
    server.push(status(429, "Rate limit reached", "rate_limit_error", headers={"retry-after": "1"}), ok_reply())
    p = start(home, spawn, server)
    p.send({"id": "p", "type": "prompt", "message": "hi"})
    frames = p.until_type("auto_retry_start", timeout=15)
    t0 = time.monotonic()
    assert frames[-1] == {"type": "auto_retry_start", "attempt": 1, "maxAttempts": 3, "delayMs": 1000,
                          "errorMessage": "429 Rate limit reached (retry-after: 1s)"}
    frames = p.until_type("agent_settled", timeout=15)
    assert time.monotonic() - t0 >= 0.8
    assert events_of(frames, "auto_retry_end") == [{"type": "auto_retry_end", "success": True, "attempt": 1}]
    assert len(server.requests) == 2
    assert p.close() == 0


def test_a_prompt_during_the_back_off_is_not_dropped(home, spawn, server):
    server.push(status(503, "Service Unavailable"), ok_reply("first"), ok_reply("second"))
    p = start(home, spawn, server, {"retry": {"baseDelayMs": 400}})
    p.send({"id": "p", "type": "prompt", "message": "one"})
    p.until_type("auto_retry_start", timeout=15)
    r = p.request({"id": "p2", "type": "prompt", "message": "two"})
    assert r == {"id": "p2", "type": "response", "command": "prompt", "success": True}
    frames = p.until(lambda f: f.get("type") == "agent_end" and f["messages"][-1]["content"] == [
        {"type": "text", "text": "second"}], timeout=15)
    assert events_of(frames, "auto_retry_end") == [{"type": "auto_retry_end", "success": True, "attempt": 1}]
    texts = [(m["role"], m["content"][0]["text"]) for m in p.ok({"type": "get_messages"})["messages"]]
    assert texts == [("user", "one"), ("assistant", "first"), ("user", "two"), ("assistant", "second")]
    assert p.close() == 0
