"""``azure-openai-responses``: OpenAI's Responses API on Azure, through the openai SDK's ``AsyncAzureOpenAI``.

What pi 0.73.1 does, and so this module: the model id is sent as the deployment name unless
``AZURE_OPENAI_DEPLOYMENT_NAME_MAP`` (``model-id=deployment,...``) names another; the endpoint is
``AZURE_OPENAI_BASE_URL``, else ``https://$AZURE_OPENAI_RESOURCE_NAME.openai.azure.com/openai/v1``, else the
model's base URL (an Azure host given without a path gets ``/openai/v1``); ``api-version`` is
``AZURE_OPENAI_API_VERSION`` or ``v1``; the key is ``AZURE_OPENAI_API_KEY`` (sent in Azure's ``api-key``
header by the SDK). The stream itself is the Responses stream of ``openai_responses``.
"""

from __future__ import annotations

import asyncio
import os
import weakref
from typing import Any, AsyncIterator
from urllib.parse import urlsplit, urlunsplit

from pisces.ai.providers import import_sdk
from pisces.ai.providers._limits import http_client_options
from pisces.ai.providers.openai_completions import open_stream
from pisces.ai.providers.openai_responses import stream as responses_stream
from pisces.ai.types import Context, Model, StreamOptions

DEFAULT_API_VERSION = "v1"


def deployment_name(model: Model) -> str:
    for entry in (os.environ.get("AZURE_OPENAI_DEPLOYMENT_NAME_MAP") or "").split(","):
        mid, sep, dep = entry.strip().partition("=")
        if sep and mid.strip() == model.id and dep.strip():
            return dep.strip()
    return model.id


def endpoint(model: Model) -> str:
    base = (os.environ.get("AZURE_OPENAI_BASE_URL") or "").strip()
    if not base and os.environ.get("AZURE_OPENAI_RESOURCE_NAME"):
        base = f"https://{os.environ['AZURE_OPENAI_RESOURCE_NAME']}.openai.azure.com/openai/v1"
    base = base or model.baseUrl
    if not base:
        raise ValueError("Azure OpenAI base URL is required. Set AZURE_OPENAI_BASE_URL or "
                         "AZURE_OPENAI_RESOURCE_NAME, or give the model a baseUrl in models.json")
    parts = urlsplit(base.rstrip("/"))
    if not parts.scheme or not parts.netloc:
        raise ValueError(f"Invalid Azure OpenAI base URL: {base}")
    host = parts.hostname or ""
    if host.endswith((".openai.azure.com", ".cognitiveservices.azure.com")) and parts.path in ("", "/", "/openai"):
        parts = parts._replace(path="/openai/v1", query="")
    return urlunsplit(parts).rstrip("/")


_clients: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[str, str, str], Any]]" = (
    weakref.WeakKeyDictionary())


def _client(model: Model, api_key: str) -> Any:
    openai = import_sdk("openai")
    base, version = endpoint(model), os.environ.get("AZURE_OPENAI_API_VERSION") or DEFAULT_API_VERSION
    per_loop = _clients.setdefault(asyncio.get_running_loop(), {})
    client = per_loop.get((base, version, api_key))
    if client is None:
        client = openai.AsyncAzureOpenAI(api_key=api_key, api_version=version, base_url=base,
                                         http_client=openai.DefaultAsyncHttpxClient(**http_client_options()))
        per_loop[(base, version, api_key)] = client
    return client


async def _open(model: Model, options: StreamOptions, path: str, body: dict[str, Any]) -> Any:
    body["model"] = deployment_name(model)
    return await open_stream(model, options, path, body, make_client=_client)


async def stream(model: Model, context: Context, options: StreamOptions) -> AsyncIterator[Any]:
    async for event in responses_stream(model, context, options, open_response=_open):
        yield event
