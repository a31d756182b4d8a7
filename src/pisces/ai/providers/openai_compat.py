"""What an OpenAI-compatible server accepts: pi's compat flags, detected from the provider and base URL and
overridden by ``model.compat`` (the catalogue's and models.json's), and the request fields they decide.

Guarantees: ``get_compat`` always returns every flag; ``apply_thinking`` sets at most one provider's way of
asking for reasoning; ``resolve_base_url`` fills ``{VAR}`` placeholders (Cloudflare's account and gateway ids)
from the environment or raises ``ValueError`` naming the missing variable. Facts from pi 0.73.1's
openai-completions provider; nothing here imports an SDK.
"""

from __future__ import annotations

import os
import re
from typing import Any

from pisces.ai.types import Model


def get_compat(model: Model) -> dict[str, Any]:
    """pi's compat settings for ``model``: detected, then ``model.compat``'s non-null values on top."""
    provider = model.provider
    base = model.baseUrl or ""
    zai = provider == "zai" or "api.z.ai" in base
    moonshot = provider in ("moonshotai", "moonshotai-cn") or "api.moonshot." in base
    cf_workers = provider == "cloudflare-workers-ai" or "api.cloudflare.com" in base
    cf_gateway = provider == "cloudflare-ai-gateway" or "gateway.ai.cloudflare.com" in base
    grok = provider == "xai" or "api.x.ai" in base
    deepseek = provider == "deepseek" or "deepseek.com" in base
    openrouter = provider == "openrouter" or "openrouter.ai" in base
    mistral = provider == "mistral" or "mistral.ai" in base
    non_standard = (provider in ("cerebras", "xai", "opencode", "opencode-go") or any(
        h in base for h in ("cerebras.ai", "api.x.ai", "chutes.ai", "deepseek.com", "opencode.ai"))
        or deepseek or zai or moonshot or cf_workers or cf_gateway or mistral)  # deepseek: pi knows it by its host only
    compat: dict[str, Any] = {
        "supportsStore": not non_standard,
        "supportsDeveloperRole": not non_standard,
        "supportsReasoningEffort": not (grok or zai or moonshot or cf_gateway),
        "reasoningEffortMap": {},
        "supportsUsageInStreaming": True,
        "maxTokensField": "max_tokens" if ("chutes.ai" in base or moonshot or cf_gateway or mistral)
        else "max_completion_tokens",
        # Mistral's chat completions (earlier pi versions' flags for it, before pi moved it to its own API)
        "requiresToolResultName": mistral,
        "requiresAssistantAfterToolResult": mistral,
        "requiresThinkingAsText": mistral,
        "requiresReasoningContentOnAssistantMessages": deepseek,
        "thinkingFormat": "deepseek" if deepseek else "zai" if zai else "openrouter" if openrouter else "openai",
        "zaiToolStream": False,
        "supportsStrictMode": not (moonshot or cf_gateway),
        "sendSessionAffinityHeaders": False,
    }
    if isinstance(model.compat, dict):
        compat.update({k: v for k, v in model.compat.items() if v is not None})
    return compat


def apply_thinking(body: dict[str, Any], model: Model, effort: str | None, compat: dict[str, Any]) -> None:
    """Ask for reasoning the way the server expects (``effort`` is the mapped level, None when off)."""
    if not model.reasoning:
        return
    fmt = compat.get("thinkingFormat") or "openai"
    tmap = model.thinkingLevelMap if isinstance(model.thinkingLevelMap, dict) else {}
    if fmt in ("zai", "qwen"):
        body["enable_thinking"] = effort is not None
    elif fmt == "qwen-chat-template":
        body["chat_template_kwargs"] = {"enable_thinking": effort is not None, "preserve_thinking": True}
    elif fmt == "deepseek":
        body["thinking"] = {"type": "enabled" if effort else "disabled"}
        if effort:
            body["reasoning_effort"] = effort
    elif fmt == "openrouter":
        if effort:
            body["reasoning"] = {"effort": effort}
        elif "off" not in tmap or tmap["off"] is not None:
            body["reasoning"] = {"effort": tmap.get("off") or "none"}
    elif compat.get("supportsReasoningEffort"):
        if effort:
            effort_map = compat.get("reasoningEffortMap") or {}
            body["reasoning_effort"] = effort_map.get(effort, effort)
        elif isinstance(tmap.get("off"), str):
            body["reasoning_effort"] = tmap["off"]


_PLACEHOLDER = re.compile(r"\{([A-Z_][A-Z0-9_]*)\}")


def resolve_base_url(model: Model) -> str:
    """The base URL with ``{VAR}`` placeholders filled from the environment."""

    def fill(match: re.Match[str]) -> str:
        value = os.environ.get(match.group(1))
        if not value:
            raise ValueError(f"{match.group(1)} is required for provider {model.provider} but is not set")
        return value

    return _PLACEHOLDER.sub(fill, model.baseUrl or "")


def extra_headers(model: Model, api_key: str, session_id: str | None, compat: dict[str, Any]) -> dict[str, str]:
    """Headers some servers need besides the SDK's ``Authorization``."""
    out: dict[str, str] = {}
    if session_id and compat.get("sendSessionAffinityHeaders"):
        out.update({"session_id": session_id, "x-client-request-id": session_id, "x-session-affinity": session_id})
    if model.provider == "cloudflare-ai-gateway":
        out["cf-aig-authorization"] = f"Bearer {api_key}"
    return out
