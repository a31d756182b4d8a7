"""End to end, the first prompt of a process: sent at once after start-up, or a little later while the
transport and SDK warm-ups may be running on their threads, its reply is complete and correct, and so is the
next one (which may go through the SDK once the idle warm-up has imported it). The requests carry the
configured key and model whichever way they were sent."""

from __future__ import annotations

import time

import pytest

from scripted_server import Reply

WORDS = [f"word{i} " for i in range(400)]


def _reply() -> Reply:
    def chunk(delta: dict, finish: str | None = None) -> dict:
        return {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "scripted-model",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    return Reply.sse([chunk({"content": w}) for w in WORDS] + [chunk({}, "stop")], done=True)


def _reply_text(frames: list[dict]) -> str:
    end = [f for f in frames if f.get("type") == "agent_end"][-1]
    assistant = [m for m in end["messages"] if m.get("role") == "assistant"][-1]
    assert assistant.get("stopReason") == "stop", assistant.get("errorMessage")
    return "".join(c["text"] for c in assistant["content"] if c.get("type") == "text")


@pytest.mark.parametrize("delay", [0.0, 0.05, 0.12, 0.3, 1.0])
def test_the_first_prompt_reply_is_complete_whatever_the_import_timing(home, spawn, server, delay):
    home.scripted_provider(server.url + "/v1")
    server.push(_reply(), _reply(), _reply())
    p = spawn()
    p.send({"id": "s", "type": "get_state"})  # not waited for: the prompt may arrive before it is answered
    time.sleep(delay)
    p.send({"id": "p1", "type": "prompt", "message": "first"})
    assert _reply_text(p.until_type("agent_end", 60)) == "".join(WORDS)
    p.send({"id": "p2", "type": "prompt", "message": "second"})  # at once: the idle warm-up may start now
    assert _reply_text(p.until_type("agent_end", 60)) == "".join(WORDS)
    time.sleep(0.3)  # time for the SDK import to start; the third request may go either way
    p.send({"id": "p3", "type": "prompt", "message": "third"})
    assert _reply_text(p.until_type("agent_end", 60)) == "".join(WORDS)
    assert len(server.requests) == 3
    for req, text in zip(server.requests, ("first", "second", "third"), strict=True):
        assert req.headers["authorization"] == "Bearer test-key"
        assert req.body["model"] == "scripted-model" and req.body["stream"] is True
        assert req.body["messages"][-1]["content"] == [{"type": "text", "text": text}]


def _gemini_reply() -> Reply:
    def chunk(text: str, finish: str | None = None) -> dict:
        c: dict = {"candidates": [{"content": {"role": "model", "parts": [{"text": text}]}, "index": 0}]}
        if finish:
            c["candidates"][0]["finishReason"] = finish
        return c

    return Reply.sse([chunk(w) for w in WORDS] + [chunk("", "STOP")])


@pytest.mark.parametrize("delay", [0.0, 0.3])
def test_a_gemini_first_prompt_and_the_next_are_complete(home, spawn, server, delay):
    """google-generative-ai goes without google-genai (google_direct): right after start-up and once the idle
    warm-up has run, the replies are whole and the requests carry the key and the prompt."""
    home.write_json("models.json", {"providers": {"gem": {
        "baseUrl": server.url + "/v1beta", "api": "google-generative-ai", "apiKey": "gem-key",
        "models": [{"id": "gemini-2.5-flash", "name": "Gemini", "reasoning": False, "input": ["text"],
                    "contextWindow": 128000, "maxTokens": 8192}]}}})
    home.write_json("settings.json", {"defaultProvider": "gem", "defaultModel": "gemini-2.5-flash",
                                      "retry": {"provider": {"maxRetries": 0, "idleTimeoutMs": 5000}}})
    server.push(_gemini_reply(), _gemini_reply())
    p = spawn()
    p.send({"id": "s", "type": "get_state"})
    time.sleep(delay)
    p.send({"id": "p1", "type": "prompt", "message": "first"})
    assert _reply_text(p.until_type("agent_end", 60)) == "".join(WORDS)
    time.sleep(0.3)  # the idle warm-up runs: it imports no SDK for this API
    p.send({"id": "p2", "type": "prompt", "message": "second"})
    assert _reply_text(p.until_type("agent_end", 60)) == "".join(WORDS)
    assert [r.path for r in server.requests] == ["/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"] * 2
    for req, text in zip(server.requests, ("first", "second"), strict=True):
        assert req.headers["x-goog-api-key"] == "gem-key"
        assert req.headers["x-goog-api-client"].startswith("google-genai-sdk/")
        assert req.body["contents"][-1] == {"role": "user", "parts": [{"text": text}]}
