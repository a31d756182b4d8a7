"""Azure OpenAI (``azure-openai-responses``) through the openai SDK's AsyncAzureOpenAI against the scripted
server: deployment names, api-version, the api-key header, the endpoint rules, reasoning, tool calls,
usage and cost, errors and a 429 with retry-after."""

from __future__ import annotations

import msgspec
import pytest
from provider_helpers import collect, context_factory, final, kinds, options_factory
from test_openai_responses import completed, created, function_call_item, message_item, reasoning_item

from pisces.ai import catalogue
from pisces.ai.models import calculate_cost
from pisces.ai.providers.azure_openai import endpoint
from pisces.ai.types import TextContent, ThinkingContent, Tool, ToolCall, Usage
from scripted_server import Reply

user, ctx = context_factory("You are a test.", default_prompt="Hi")
TOOL = Tool(name="bash", description="Run", parameters={"type": "object", "properties": {}})


@pytest.fixture
def azure(monkeypatch, server):
    for name in ("AZURE_OPENAI_BASE_URL", "AZURE_OPENAI_RESOURCE_NAME", "AZURE_OPENAI_API_VERSION",
                 "AZURE_OPENAI_DEPLOYMENT_NAME_MAP"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", "az-key")
    monkeypatch.setenv("AZURE_OPENAI_BASE_URL", server.url + "/openai/v1")
    model = next(m for m in catalogue.models("azure-openai-responses") if m.reasoning and m.cost.input > 0)
    return msgspec.structs.replace(model, input=list(model.input))


async def test_stream_with_deployment_map_and_api_version(azure, server, monkeypatch):
    monkeypatch.setenv("AZURE_OPENAI_DEPLOYMENT_NAME_MAP", f"other=x, {azure.id}=my-deploy")
    monkeypatch.setenv("AZURE_OPENAI_API_VERSION", "2025-04-01-preview")
    server.push(Reply.sse([created(), *reasoning_item(), *message_item(["Running."], index=1),
                           *function_call_item(['{"cmd":', '"ls"}'], index=2), completed(1000, 50, cached=200)],
                          named=True))
    events = await collect(azure, ctx(tools=[TOOL]), options_factory(None)(reasoning="high"))
    assert kinds(events)[-1] == "done", final(events).errorMessage
    msg = final(events)
    assert [type(b) for b in msg.content] == [ThinkingContent, TextContent, ToolCall]
    assert msg.content[2].arguments == {"cmd": "ls"} and msg.stopReason == "toolUse"
    expected = Usage(input=800, output=50, cacheRead=200)
    calculate_cost(azure, expected)
    assert (msg.usage.input, msg.usage.cacheRead) == (800, 200) and msg.usage.cost.total == expected.cost.total > 0
    req = server.requests[0]
    assert req.path == "/openai/v1/responses?api-version=2025-04-01-preview"
    assert req.headers.get("api-key") == "az-key"
    assert req.body["model"] == "my-deploy" and req.body["stream"] is True


async def test_default_api_version_and_model_id_as_deployment(azure, server):
    server.push(Reply.sse([created(), *message_item(["ok"]), completed(10, 2)], named=True))
    assert kinds(await collect(azure, ctx(), options_factory(None)()))[-1] == "done"
    assert server.requests[0].path == "/openai/v1/responses?api-version=v1"
    assert server.requests[0].body["model"] == azure.id


async def test_rate_limit_and_missing_settings(azure, server, monkeypatch):
    server.push(Reply.json(429, {"error": {"message": "Rate limit is exceeded", "code": "429"}},
                           headers={"retry-after": "12"}))
    events = await collect(azure, ctx(), options_factory(None)())
    assert final(events).errorMessage == "429 Rate limit is exceeded (retry-after: 12s)"
    monkeypatch.delenv("AZURE_OPENAI_BASE_URL")
    events = await collect(azure, ctx(), options_factory(None)())
    assert final(events).errorMessage.startswith("Azure OpenAI base URL is required")
    monkeypatch.delenv("AZURE_OPENAI_API_KEY")
    events = await collect(azure, ctx(), options_factory(None)())
    assert "AZURE_OPENAI_API_KEY" in final(events).errorMessage
    assert len(server.requests) == 1


def test_endpoint_rules(monkeypatch, azure):
    monkeypatch.delenv("AZURE_OPENAI_BASE_URL")
    monkeypatch.setenv("AZURE_OPENAI_RESOURCE_NAME", "acme")
    assert endpoint(azure) == "https://acme.openai.azure.com/openai/v1"
    monkeypatch.setenv("AZURE_OPENAI_BASE_URL", "https://acme.openai.azure.com/")
    assert endpoint(azure) == "https://acme.openai.azure.com/openai/v1"
    monkeypatch.setenv("AZURE_OPENAI_BASE_URL", "https://proxy.example/az")
    assert endpoint(azure) == "https://proxy.example/az"
