"""End to end: errors say what failed and what to do, in pi's shapes where a client can see them.

- an HTTP error before any streamed byte: ``message_start`` already carries ``stopReason:"error"`` and the
  ``errorMessage`` (as pi's does);
- a missing key names the provider and its variable, never pi's ``/login``; ``--api-key`` without a model,
  an unknown provider (faux included in the known ones), a network failure: each says what to do;
- ``-p`` reports retries on stderr while they happen;
- prompt templates are expanded for ``steer`` and ``follow_up`` too (seed 001).
"""

from __future__ import annotations

import os
import subprocess

from e2eproc import PISCES, compact

from scripted_server import Reply


def _chunk(delta: dict | None = None, finish: str | None = None) -> dict:
    return {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "scripted-model",
            "choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish}]}


def _ok(text: str = "Fine.") -> Reply:
    return Reply.sse([_chunk({"role": "assistant", "content": ""}), _chunk({"content": text}), _chunk({}, "stop")],
                     done=True)


def _run(home, *args: str, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([*PISCES, *args], capture_output=True, text=True, env=env or home.env(), cwd=home.cwd,
                          timeout=timeout)


def test_http_error_before_any_byte_is_in_message_start(home, spawn, server):
    server.push(Reply.json(400, {"error": {"message": "Bad request: invalid thing", "type": "invalid_request"}}))
    home.scripted_provider(server.url + "/v1", {"retry": {"enabled": False}})
    p = spawn()
    p.send({"id": "p", "type": "prompt", "message": "hi"})
    frames = p.until_type("agent_settled", 30)
    assert "message_update*" not in compact(frames)
    start = [f for f in frames if f["type"] == "message_start" and f["message"]["role"] == "assistant"][0]
    end = [f for f in frames if f["type"] == "message_end" and f["message"]["role"] == "assistant"][0]
    assert start["message"]["stopReason"] == "error"
    assert start["message"]["errorMessage"] == "400 Bad request: invalid thing" == end["message"]["errorMessage"]
    assert start["message"] == end["message"]
    assert p.close() == 0


def test_a_streamed_reply_still_starts_empty(home, spawn, server):
    server.push(_ok("Hello there"))
    home.scripted_provider(server.url + "/v1")
    p = spawn()
    p.send({"id": "p", "type": "prompt", "message": "hi"})
    frames = p.until_type("agent_settled", 30)
    start = [f for f in frames if f["type"] == "message_start" and f["message"]["role"] == "assistant"][0]
    assert start["message"]["content"] == [] and start["message"]["stopReason"] == "stop"
    assert compact(frames).index("message_start:assistant") < compact(frames).index("message_update*")
    assert p.close() == 0


def test_missing_key_names_the_provider_and_what_to_set(home):
    env = home.env()
    r = _run(home, "--model", "anthropic/claude-sonnet-4-5", "--no-session", "-p", "hi", env=env)
    assert r.returncode == 1
    assert "No API key found for the selected model (anthropic/claude-sonnet-4-5)" in r.stderr
    assert "ANTHROPIC_API_KEY" in r.stderr and "auth.json" in r.stderr
    assert "/login" not in r.stderr and "Traceback" not in r.stderr
    # no model at all: says so, and how to find out which keys are set
    r = _run(home, "--no-session", "-p", "hi", env=env)
    assert r.returncode == 1 and "no model is selected" in r.stderr and "--list-models" in r.stderr


def test_models_json_error_is_named_with_the_missing_key(home):
    with open(os.path.join(home.agent_dir, "models.json"), "w") as f:
        f.write("{not json")
    r = _run(home, "--model", "anthropic/claude-sonnet-4-5", "--no-session", "-p", "hi")
    assert r.returncode == 1
    assert "models.json" in r.stderr and "ANTHROPIC_API_KEY" in r.stderr


def test_api_key_without_a_model_and_unknown_provider(home):
    r = _run(home, "--api-key", "sk-test", "--no-session", "-p", "hi")
    assert r.returncode == 1
    assert "--api-key was given but no model is selected" in r.stderr and "--provider" in r.stderr
    r = _run(home, "--provider", "nope", "--no-session", "-p", "hi")
    assert r.returncode == 1 and 'Unknown provider "nope"' in r.stderr and "faux" in r.stderr
    assert "get_available_models" not in r.stderr  # no RPC command names for a CLI user


def test_network_failure_names_the_host_and_print_mode_shows_the_retries(home):
    home.scripted_provider("http://127.0.0.1:9/v1", {"retry": {"maxRetries": 2, "baseDelayMs": 10}})
    r = _run(home, "--no-session", "-p", "hi")
    assert r.returncode == 1
    lines = [line for line in r.stderr.splitlines() if line.startswith("pisces: ")]
    retries = [line for line in lines if "retrying in" in line]
    assert len(retries) == 2 and "(attempt 1 of 2)" in retries[0] and "(attempt 2 of 2)" in retries[1]
    assert all("could not reach http://127.0.0.1:9/v1" in line for line in retries)
    assert "Connection error: could not reach http://127.0.0.1:9/v1" in lines[-1]


def test_templates_are_expanded_for_steer_and_follow_up(home, spawn):
    prompts = os.path.join(home.agent_dir, "prompts")
    os.makedirs(prompts)
    with open(os.path.join(prompts, "fix.md"), "w") as f:
        f.write("Fix $1 now.")
    p = spawn("--faux-script", home.faux_script([{"text": "x" * 300, "chunkSize": 3, "delayMs": 10},
                                                 {"text": "steered"}, {"text": "followed"}]))
    p.send({"id": "p", "type": "prompt", "message": "start"})
    p.until(lambda f: f.get("type") == "message_update")
    p.ok({"type": "steer", "message": "/fix a.py"})
    assert p.last_events[0]["steering"] == ["Fix a.py now."]
    p.ok({"type": "follow_up", "message": "/fix b.py"})
    p.until_type("agent_settled", 60)
    users = [m["content"][0]["text"] for m in p.ok({"type": "get_messages"})["messages"] if m["role"] == "user"]
    assert users == ["start", "Fix a.py now.", "Fix b.py now."]
    assert p.close() == 0
