"""``google-vertex``: Google Vertex AI, Gemini through google-genai (``vertexai=True``) and Claude through
anthropic's ``AsyncAnthropicVertex`` (a model whose id starts with ``claude``, added in models.json).

Guarantees:
- credentials, in pi's order: an API key (``GOOGLE_CLOUD_API_KEY`` or ``--api-key``, Vertex express mode,
  Gemini only), else application default credentials (``GOOGLE_APPLICATION_CREDENTIALS``, gcloud's
  ``application_default_credentials.json``, or the metadata server), loaded once per process with the
  cloud-platform scope and refreshed by the SDKs;
- the project is ``GOOGLE_CLOUD_PROJECT`` (or ``GCLOUD_PROJECT``) and the location ``GOOGLE_CLOUD_LOCATION``; a
  request without them ends with pi's sentence naming the variable;
- the model's base URL is used only when it is not the catalogue's ``https://{location}-aiplatform…`` template
  (a proxy, a test server); otherwise each SDK builds the regional endpoint itself;
- the request, the events and the errors are those of ``google.py`` and ``anthropic.py`` (one parser each).
"""

from __future__ import annotations

import asyncio
import os
from typing import Any, AsyncIterator

from pisces.ai.providers import anthropic as anthropic_provider
from pisces.ai.providers import google as google_provider
from pisces.ai.providers import import_sdk
from pisces.ai.providers._limits import genai_client_args, http_client_options
from pisces.ai.providers._shared import cached_client, new_output
from pisces.ai.types import Context, ErrorEvent, Model, StartEvent, StreamOptions

SCOPE = "https://www.googleapis.com/auth/cloud-platform"
MARKER = "<authenticated>"  # the key pisces' auth lookup hands over for application default credentials
_adc: list[Any] = []  # [credentials] once loaded


def _api_key(options: StreamOptions) -> str | None:
    key = (options.apiKey or os.environ.get("GOOGLE_CLOUD_API_KEY") or "").strip()
    if not key or key == MARKER or (key.startswith("<") and key.endswith(">")):
        return None
    return key


def _project() -> str | None:
    return os.environ.get("GOOGLE_CLOUD_PROJECT") or os.environ.get("GCLOUD_PROJECT") or None


def _location() -> str | None:
    return os.environ.get("GOOGLE_CLOUD_LOCATION") or None


def _custom_base(model: Model) -> str | None:
    base = (model.baseUrl or "").strip()
    return base if base and "{location}" not in base else None


def is_claude(model: Model) -> bool:
    return model.id.lower().startswith("claude")


def _credentials() -> Any:
    """Application default credentials (file read once; the token is fetched by the SDK when needed)."""
    if not _adc:
        auth = import_sdk("google.auth")
        creds, _project_id = auth.default(scopes=[SCOPE])
        _adc.append(creds)
    return _adc[0]


def _headers(model: Model, options: StreamOptions) -> dict[str, str]:
    return {**(model.headers if isinstance(model.headers, dict) else {}), **(options.headers or {})}


def _problem(model: Model, options: StreamOptions) -> str | None:
    """Why the request cannot be sent (pi's sentences), or None."""
    if _api_key(options) and not is_claude(model):
        return None
    if not _project():
        return "Vertex AI requires a project ID. Set GOOGLE_CLOUD_PROJECT/GCLOUD_PROJECT or pass project in options."
    if not _location():
        return "Vertex AI requires a location. Set GOOGLE_CLOUD_LOCATION or pass location in options."
    return None


async def _gemini_client(model: Model, options: StreamOptions, genai: Any, types: Any) -> Any:
    key = _api_key(options)
    headers = _headers(model, options)
    base = _custom_base(model)
    creds = None if key else await asyncio.to_thread(_credentials)
    cache_key = ("vertex-gemini", key, id(creds), _project(), _location(), base, tuple(sorted(headers.items())),
                 options.maxRetries, options.timeoutMs)

    def make() -> Any:
        http: dict[str, Any] = {"async_client_args": genai_client_args()}
        if base:
            http["base_url"] = base
        if headers:
            http["headers"] = headers
        if options.timeoutMs:
            http["timeout"] = int(options.timeoutMs)
        if hasattr(types, "HttpRetryOptions"):
            http["retry_options"] = types.HttpRetryOptions(attempts=max(1, options.maxRetries + 1))
        if key:
            return genai.Client(vertexai=True, api_key=key, http_options=types.HttpOptions(**http))
        return genai.Client(vertexai=True, project=_project(), location=_location(), credentials=creds,
                            http_options=types.HttpOptions(**http))

    return cached_client(cache_key, make)


async def _claude_client(model: Model, options: StreamOptions, sdk: Any) -> Any:
    creds = await asyncio.to_thread(_credentials)
    headers = anthropic_provider._headers(model, options)
    base = _custom_base(model)
    timeout = options.timeoutMs / 1000 if options.timeoutMs else None
    cache_key = ("vertex-claude", id(creds), _project(), _location(), base, tuple(sorted(headers.items())),
                 options.maxRetries, timeout)

    def make() -> Any:
        kwargs: dict[str, Any] = {"region": _location(), "project_id": _project(), "credentials": creds,
                                  "default_headers": headers, "max_retries": options.maxRetries}
        if base:
            kwargs["base_url"] = base
        if timeout is not None:
            kwargs["timeout"] = timeout
        return sdk.AsyncAnthropicVertex(**kwargs, http_client=sdk.DefaultAsyncHttpxClient(**http_client_options()))

    return cached_client(cache_key, make)


async def stream(model: Model, context: Context, options: StreamOptions) -> AsyncIterator[Any]:
    problem = _problem(model, options)
    if problem is not None:
        out = new_output(model)
        yield StartEvent(partial=out)
        out.stopReason = "error"
        out.errorMessage = problem
        yield ErrorEvent(reason="error", error=out)
        return
    if is_claude(model):
        async def claude(sdk: Any) -> Any:
            return await _claude_client(model, options, sdk)

        async for ev in anthropic_provider.stream(model, context, options, make_client=claude):
            yield ev
        return

    async def gemini(genai: Any, types: Any) -> Any:
        return await _gemini_client(model, options, genai, types)

    async for ev in google_provider.stream(model, context, options, make_client=gemini):
        yield ev
