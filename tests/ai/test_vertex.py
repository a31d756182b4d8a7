"""Google Vertex AI (``google-vertex``) through the real SDKs against the scripted server: Gemini through
google-genai (``vertexai=True``) and Claude through anthropic's AsyncAnthropicVertex, both authenticated by
application default credentials as google-auth finds them on a Compute Engine machine: the metadata server
(``GCE_METADATA_HOST``/``GCE_METADATA_IP`` point google-auth at the scripted server, which answers the ping
and hands out an access token: no service-account key, no network). Then a Vertex API key (express mode),
the project and location rules, an HTTP error, and pi's rule for when ADC counts as credentials."""

from __future__ import annotations

import json

import msgspec
import pytest
from provider_helpers import collect, context_factory, final, kinds
from test_anthropic_family import MSG_STOP, block_start, block_stop, msg_delta, msg_start, text_delta
from test_google import chunk

from pisces.ai import catalogue
from pisces.ai.providers import vertex
from pisces.ai.types import Model, ModelCost, StreamOptions, TextContent, Tool, ToolCall
from scripted_server import Reply

user, ctx = context_factory("You are a test.", default_prompt="Hi")
TOOL = Tool(name="bash", description="Run", parameters={"type": "object", "properties": {"cmd": {"type": "string"}}})
TOKEN = {"access_token": "ya29.scripted-token", "expires_in": 3600, "token_type": "Bearer"}


def opts(**kw) -> StreamOptions:
    kw.setdefault("maxRetries", 0)
    kw.setdefault("apiKey", "<authenticated>")  # what pisces' auth lookup hands over for ADC
    return StreamOptions(**kw)


class Metadata:
    """Routes the metadata server's paths; every other request takes the next queued model reply."""

    def __init__(self) -> None:
        self.model_replies: list[Reply] = []
        self.tokens = 0

    def __call__(self, rec) -> Reply:
        flavor = {"metadata-flavor": "Google"}
        if rec.path == "/":
            return Reply(200, {**flavor, "content-type": "text/plain"}, ["ok"])
        if rec.path.startswith("/computeMetadata/v1/project/project-id"):
            return Reply(200, {**flavor, "content-type": "text/plain"}, ["proj-from-metadata"])
        if "/service-accounts/default/token" in rec.path:
            self.tokens += 1
            return Reply.json(200, TOKEN, headers=flavor)
        if "/service-accounts/default" in rec.path:
            return Reply.json(200, {"email": "vm@proj.iam.gserviceaccount.com", "aliases": ["default"],
                                    "scopes": [vertex.SCOPE]}, headers=flavor)
        if self.model_replies:
            return self.model_replies.pop(0)
        return Reply.json(500, {"error": {"message": "no reply queued"}})


@pytest.fixture
def adc(monkeypatch, server):
    for name in ("GOOGLE_CLOUD_API_KEY", "GCLOUD_PROJECT", "GOOGLE_API_KEY", "GEMINI_API_KEY",
                 "GOOGLE_APPLICATION_CREDENTIALS", "CLOUDSDK_CONFIG", "NO_GCE_CHECK"):
        monkeypatch.delenv(name, raising=False)
    host = f"127.0.0.1:{server.port}"
    monkeypatch.setenv("GCE_METADATA_HOST", host)
    monkeypatch.setenv("GCE_METADATA_IP", host)
    from google.auth.compute_engine import _metadata

    # google-auth reads GCE_METADATA_HOST once, when this module is first imported (by an earlier test, with
    # an earlier server's port): set what it read, as the variable would have at a fresh import
    monkeypatch.setattr(_metadata, "_GCE_METADATA_HOST", host)
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "proj-1")
    monkeypatch.setenv("GOOGLE_CLOUD_LOCATION", "us-central1")
    monkeypatch.setattr(vertex, "_adc", [])
    meta = Metadata()
    server.fallback = meta
    return meta


def model_requests(server):
    return [r for r in server.requests if "/computeMetadata/" not in r.path and r.path != "/"]


def gemini(server) -> Model:
    model = next(m for m in catalogue.models("google-vertex") if m.id == "gemini-2.5-flash")
    return msgspec.structs.replace(model, baseUrl=server.url, input=list(model.input))


def claude(server) -> Model:
    return Model(id="claude-sonnet-4-5@20250929", name="Claude Sonnet 4.5 (Vertex)", api="google-vertex",
                 provider="google-vertex", baseUrl=server.url + "/v1", reasoning=True, input=["text", "image"],
                 cost=ModelCost(input=3, output=15, cacheRead=0.3, cacheWrite=3.75), contextWindow=200000,
                 maxTokens=64000)


async def test_gemini_on_vertex_with_application_default_credentials(adc, server):
    adc.model_replies.append(Reply.sse([
        chunk({"text": "Let me run it."}),
        chunk({"functionCall": {"name": "bash", "args": {"cmd": "ls"}}}, finish="STOP",
              usage={"promptTokenCount": 1000, "candidatesTokenCount": 20, "cachedContentTokenCount": 400}),
    ]))
    model = gemini(server)
    events = await collect(model, ctx(tools=[TOOL]), opts())
    msg = final(events)
    assert kinds(events)[-1] == "done", msg.errorMessage
    assert [type(b) for b in msg.content] == [TextContent, ToolCall]
    assert msg.content[1].arguments == {"cmd": "ls"} and msg.stopReason == "toolUse"
    assert (msg.usage.input, msg.usage.cacheRead, msg.usage.output) == (600, 400, 20) and msg.usage.cost.total > 0
    [req] = model_requests(server)
    assert adc.tokens == 1
    assert req.path.endswith("/projects/proj-1/locations/us-central1/publishers/google/models/"
                             "gemini-2.5-flash:streamGenerateContent?alt=sse")
    assert req.headers["authorization"] == "Bearer ya29.scripted-token"
    assert req.body["contents"][0]["parts"][0]["text"] == "Hi"
    assert req.body["tools"][0]["functionDeclarations"][0]["name"] == "bash"


async def test_claude_on_vertex_through_anthropic_vertex(adc, server):
    adc.model_replies.append(Reply.sse([msg_start(input_tokens=100, cache_read=50, model="claude-sonnet-4-5"),
                           block_start(0, {"type": "text", "text": ""}), text_delta(0, "Hello from Vertex"),
                           block_stop(0), msg_delta(output_tokens=7), MSG_STOP], named=True))
    events = await collect(claude(server), ctx(), opts())
    msg = final(events)
    assert kinds(events)[-1] == "done", msg.errorMessage
    assert msg.content[0].text == "Hello from Vertex" and msg.usage.output == 7 and msg.usage.cost.total > 0
    [req] = model_requests(server)
    assert adc.tokens == 1
    assert req.path == ("/v1/projects/proj-1/locations/us-central1/publishers/anthropic/models/"
                        "claude-sonnet-4-5@20250929:streamRawPredict")
    assert req.headers["authorization"] == "Bearer ya29.scripted-token"
    assert req.body["anthropic_version"] and "model" not in req.body  # the SDK moves the model into the path
    assert req.body["messages"][0]["content"][0]["text"] == "Hi"


async def test_express_mode_api_key_needs_no_project(adc, server, monkeypatch):
    monkeypatch.delenv("GOOGLE_CLOUD_PROJECT")
    monkeypatch.setenv("GOOGLE_CLOUD_API_KEY", "vertex-key")
    adc.model_replies.append(Reply.sse([chunk({"text": "ok"}, finish="STOP",
                                              usage={"promptTokenCount": 3, "candidatesTokenCount": 1})]))
    events = await collect(gemini(server), ctx(), opts(apiKey=None))
    assert kinds(events)[-1] == "done", final(events).errorMessage
    [req] = model_requests(server)
    assert adc.tokens == 0
    assert req.headers.get("x-goog-api-key") == "vertex-key" and "authorization" not in req.headers
    assert "gemini-2.5-flash:streamGenerateContent" in req.path


async def test_missing_project_or_location_and_an_http_error(adc, server, monkeypatch):
    monkeypatch.delenv("GOOGLE_CLOUD_LOCATION")
    msg = final(await collect(gemini(server), ctx(), opts()))
    assert msg.errorMessage == ("Vertex AI requires a location. Set GOOGLE_CLOUD_LOCATION or pass location in "
                                "options.")
    monkeypatch.setenv("GOOGLE_CLOUD_LOCATION", "us-central1")
    monkeypatch.delenv("GOOGLE_CLOUD_PROJECT")
    msg = final(await collect(claude(server), ctx(), opts()))
    assert msg.errorMessage.startswith("Vertex AI requires a project ID. Set GOOGLE_CLOUD_PROJECT")
    assert server.requests == []
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "proj-1")
    adc.model_replies.append(Reply.json(429, {"error": {"code": 429, "message": "Quota exceeded", "status": "RESOURCE_EXHAUSTED"}}))
    msg = final(await collect(gemini(server), ctx(), opts()))
    assert msg.stopReason == "error" and msg.errorMessage.startswith("429") and "Quota exceeded" in msg.errorMessage


def test_adc_counts_as_credentials_only_with_project_and_location(adc, tmp_path, monkeypatch):
    from pisces.core.config.auth import AuthStorage

    auth = AuthStorage(str(tmp_path))
    assert auth.lookup("google-vertex") == (None, None)  # pi looks for a file only, not the metadata server
    creds = tmp_path / "adc.json"
    creds.write_text(json.dumps({"type": "authorized_user", "client_id": "c", "client_secret": "s",
                                 "refresh_token": "r"}))
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(creds))
    assert auth.lookup("google-vertex") == ("<authenticated>", f"adc:{creds}")
    monkeypatch.delenv("GOOGLE_CLOUD_LOCATION")
    assert auth.lookup("google-vertex") == (None, None)
    monkeypatch.setenv("GOOGLE_CLOUD_LOCATION", "us-central1")
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "missing.json"))
    assert auth.lookup("google-vertex") == (None, None)
