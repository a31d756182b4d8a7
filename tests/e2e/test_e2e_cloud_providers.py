"""End to end through the real ``pisces --mode rpc`` process: a partial ``--model`` finds the provider that
has credentials; Amazon Bedrock with keys from the AWS chain's environment (boto3 against the scripted
event-stream server named as the provider's baseUrl in models.json); and the ChatGPT (Codex) provider with a
login stored in auth.json, refreshed before it is used (the scripted auth server and backend in one)."""

from __future__ import annotations

import base64
import json

import pytest

from eventstream import CONTENT_TYPE, event
from scripted_server import Reply


def _assistant_end(frames):
    return [f for f in frames if f["type"] == "message_end" and f["message"]["role"] == "assistant"][-1]["message"]


def test_partial_model_prefers_the_provider_with_a_key(home, spawn):
    p = spawn("--model", "sonnet", env=home.env(ANTHROPIC_API_KEY="sk-test"))
    state = p.request({"id": "s", "type": "get_state"})["data"]
    assert state["model"]["provider"] == "anthropic" and "sonnet" in state["model"]["id"]
    assert p.close() == 0


def test_bedrock_reply_through_the_process(home, spawn, server):
    pytest.importorskip("boto3")
    server.push(Reply(status=200, headers={"content-type": CONTENT_TYPE}, chunks=[
        event("messageStart", {"role": "assistant"}),
        event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "Hello from "}}),
        event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "Bedrock."}}),
        event("contentBlockStop", {"contentBlockIndex": 0}),
        event("messageStop", {"stopReason": "end_turn"}),
        event("metadata", {"usage": {"inputTokens": 50, "outputTokens": 4, "totalTokens": 54}}),
    ]))
    home.write_json("models.json", {"providers": {"amazon-bedrock": {"baseUrl": server.url}}})
    env = home.env(AWS_ACCESS_KEY_ID="AKIDE2E", AWS_SECRET_ACCESS_KEY="s", AWS_EC2_METADATA_DISABLED="true")
    for name in ("AWS_PROFILE", "AWS_REGION", "AWS_DEFAULT_REGION"):
        env.pop(name, None)
    p = spawn("--model", "amazon-bedrock/us.anthropic.claude-sonnet-4-5-20250929-v1:0", "--no-session", env=env)
    available = p.request({"id": "m", "type": "get_available_models"})["data"]["models"]
    assert any(m["provider"] == "amazon-bedrock" for m in available)  # the AWS keys count as credentials
    p.send({"id": "p", "type": "prompt", "message": "hi"})
    msg = _assistant_end(p.until_type("agent_settled", 60))
    assert msg["stopReason"] == "stop", msg.get("errorMessage")
    assert msg["content"] == [{"type": "text", "text": "Hello from Bedrock."}]
    assert msg["usage"]["input"] == 50 and msg["usage"]["cost"]["total"] > 0
    assert server.requests[0].headers["authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIDE2E/")
    assert p.close() == 0


def _jwt(claims: dict) -> str:
    enc = lambda o: base64.urlsafe_b64encode(json.dumps(o).encode()).rstrip(b"=").decode()  # noqa: E731
    return f"{enc({'alg': 'none'})}.{enc(claims)}.sig"


def test_codex_with_a_stored_login_refreshed_first(home, spawn, server):
    fresh = _jwt({"https://api.openai.com/auth": {"chatgpt_account_id": "acct-e2e"}})
    sse = [{"type": "response.created", "response": {"id": "r1", "status": "in_progress", "output": []}},
           {"type": "response.output_item.added", "output_index": 0,
            "item": {"id": "m1", "type": "message", "status": "in_progress", "role": "assistant", "content": []}},
           {"type": "response.content_part.added", "item_id": "m1", "output_index": 0, "content_index": 0,
            "part": {"type": "output_text", "text": ""}},
           {"type": "response.output_text.delta", "item_id": "m1", "output_index": 0, "content_index": 0,
            "delta": "Codex here."},
           {"type": "response.output_item.done", "output_index": 0,
            "item": {"id": "m1", "type": "message", "status": "completed", "role": "assistant",
                     "content": [{"type": "output_text", "text": "Codex here."}]}},
           {"type": "response.completed", "response": {"id": "r1", "status": "completed",
                                                       "usage": {"input_tokens": 10, "output_tokens": 3}}}]

    def route(rec):
        if rec.path == "/oauth/token":
            return Reply.json(200, {"access_token": fresh, "refresh_token": "rt-2", "expires_in": 3600})
        if rec.path == "/backend-api/codex/responses":
            return Reply.sse(sse, named=True)
        return Reply.json(404, {"error": {"message": "not found"}})

    server.fallback = route
    home.write_json("auth.json", {"openai-codex": {"type": "oauth", "access": "expired", "refresh": "rt-1",
                                                   "expires": 0, "accountId": "acct-e2e"}})
    home.write_json("models.json", {"providers": {"openai-codex": {"baseUrl": server.url + "/backend-api"}}})
    p = spawn("--model", "openai-codex/gpt-5.1", "--no-session", env=home.env(PISCES_OPENAI_OAUTH_URL=server.url))
    p.send({"id": "p", "type": "prompt", "message": "hi"})
    msg = _assistant_end(p.until_type("agent_settled", 60))
    assert msg["stopReason"] == "stop", msg.get("errorMessage")
    assert msg["content"][0]["text"] == "Codex here."
    token_req = next(r for r in server.requests if r.path == "/oauth/token")
    assert "grant_type=refresh_token" in token_req.raw.decode() and "refresh_token=rt-1" in token_req.raw.decode()
    backend = next(r for r in server.requests if r.path == "/backend-api/codex/responses")
    assert backend.headers["authorization"] == f"Bearer {fresh}" and backend.headers["chatgpt-account-id"] == "acct-e2e"
    saved = home.read_json("auth.json")["openai-codex"]
    assert saved["access"] == fresh and saved["refresh"] == "rt-2"
    assert p.close() == 0
