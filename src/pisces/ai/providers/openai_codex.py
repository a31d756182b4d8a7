"""``openai-codex-responses``: the ChatGPT subscription's Codex backend (a Responses-style stream), as pi's
``openai-codex`` provider, through the openai SDK.

The wire facts are pi 0.73.1's: ``POST <base>/codex/responses`` (base ``https://chatgpt.com/backend-api``),
the login's access token as bearer, ``chatgpt-account-id`` (the token's ``chatgpt_account_id`` claim),
``originator: pi``, ``OpenAI-Beta: responses=experimental``, ``session_id``; the body has ``store: false``, the
system prompt as ``instructions`` (not an input item), ``text.verbosity: low``, the encrypted reasoning
included, ``tool_choice: auto``, ``parallel_tool_calls: true`` and no ``max_output_tokens``. The stream is
parsed by ``openai_responses``. The token comes from ``pisces login openai-codex`` (there is no key variable).
This is not a documented public API: OpenAI may change it.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import json
import weakref
from typing import Any, AsyncIterator

import msgspec

from pisces.ai.providers import import_sdk
from pisces.ai.providers._limits import http_client_options
from pisces.ai.providers.openai_completions import ProviderError, open_stream
from pisces.ai.providers.openai_responses import stream as responses_stream
from pisces.ai.types import Context, Model, StreamOptions

DEFAULT_BASE = "https://chatgpt.com/backend-api"
JWT_CLAIM = "https://api.openai.com/auth"


def codex_base(model: Model) -> str:
    """The URL the SDK's ``/responses`` is appended to."""
    base = (model.baseUrl or DEFAULT_BASE).strip().rstrip("/")
    if base.endswith("/codex/responses"):
        return base[: -len("/responses")]
    return base if base.endswith("/codex") else base + "/codex"


def account_id(token: str) -> str | None:
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        claims = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except ValueError:
        return None
    value = (claims.get(JWT_CLAIM) or {}).get("chatgpt_account_id") if isinstance(claims, dict) else None
    return value if isinstance(value, str) and value else None


_clients: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[str, str], Any]]" = (
    weakref.WeakKeyDictionary())


def _client(model: Model, token: str) -> Any:
    openai = import_sdk("openai")
    base = codex_base(model)
    per_loop = _clients.setdefault(asyncio.get_running_loop(), {})
    client = per_loop.get((base, token))
    if client is None:
        client = per_loop[(base, token)] = openai.AsyncOpenAI(
            api_key=token, base_url=base, http_client=openai.DefaultAsyncHttpxClient(**http_client_options()))
    return client


def _codex_body(body: dict[str, Any], system: str) -> dict[str, Any]:
    body.pop("max_output_tokens", None)
    body["store"] = False
    body["instructions"] = system or "You are a helpful assistant."
    body["text"] = {"verbosity": "low"}
    body["include"] = ["reasoning.encrypted_content"]
    body["tool_choice"] = "auto"
    body["parallel_tool_calls"] = True
    for tool in body.get("tools") or ():
        tool.pop("strict", None)
    return body


async def stream(model: Model, context: Context, options: StreamOptions) -> AsyncIterator[Any]:
    system = context.systemPrompt if isinstance(context.systemPrompt, str) else ""
    bare = msgspec.structs.replace(context, systemPrompt="")  # the prompt goes in `instructions`, not the input

    async def open_codex(model: Model, opts: StreamOptions, path: str, body: dict[str, Any]) -> Any:
        token = opts.apiKey or ""
        account = account_id(token)
        if not token:
            raise ProviderError("No credentials for provider openai-codex: run `pisces login openai-codex`")
        if account is None:
            raise ProviderError("Failed to extract accountId from the OpenAI Codex token; run "
                                "`pisces login openai-codex` again")
        headers = {"chatgpt-account-id": account, "originator": "pi", "OpenAI-Beta": "responses=experimental",
                   "accept": "text/event-stream", "User-Agent": "pisces"}
        if opts.sessionId:
            headers["session_id"] = opts.sessionId
            headers["x-client-request-id"] = opts.sessionId
        with_headers = dataclasses.replace(opts, headers={**headers, **(opts.headers or {})})
        return await open_stream(model, with_headers, path, _codex_body(body, system), make_client=_client)

    async for event in responses_stream(model, bare, options, open_response=open_codex):
        yield event
