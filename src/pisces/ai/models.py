"""Built-in model catalogue, custom models from models.json (pi's format), cost and thinking clamps."""

from __future__ import annotations

import json
import os
import re
import subprocess
from typing import Any

from pisces.ai.types import THINKING_LEVELS, Model, ModelCost, Usage, num

KNOWN_APIS = ("openai-completions", "openai-responses", "anthropic-messages", "google-generative-ai",
              "azure-openai-responses", "mistral-conversations", "bedrock-converse-stream", "google-vertex",
              "openai-codex-responses", "faux")


def builtin_models() -> list[Model]:
    """Every model of the built-in catalogue (pi's list, see ``pisces.ai.catalogue``), read on first use."""
    from pisces.ai import catalogue  # noqa: PLC0415 - the catalogue is read only when a model list is needed

    return catalogue.all_models()


def __getattr__(name: str) -> Any:
    if name == "BUILTIN_MODELS":  # the old constant: now built on first access, never at import
        return builtin_models()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# The scripted model, usable with no key (see pisces.ai.providers.faux).
FAUX_MODELS: list[Model] = [
    Model(id="faux", name="Faux scripted model", api="faux", provider="faux", baseUrl="", reasoning=False,
          input=["text", "image"], contextWindow=128000, maxTokens=16384),
    Model(id="faux-reasoning", name="Faux scripted reasoning model", api="faux", provider="faux", baseUrl="",
          reasoning=True, input=["text"], contextWindow=128000, maxTokens=16384),
]

# The catalogue's providers in its order (tests/ai/test_catalogue.py checks this against catalogue.jsonl): a
# table here so that choosing the start-up model (say the faux one) never opens the catalogue.
CATALOGUE_PROVIDERS: tuple[str, ...] = (
    "amazon-bedrock", "anthropic", "azure-openai-responses", "cerebras", "cloudflare-ai-gateway",
    "cloudflare-workers-ai", "deepseek", "fireworks", "github-copilot", "google", "google-vertex", "groq",
    "huggingface", "kimi-coding", "minimax", "minimax-cn", "mistral", "moonshotai", "moonshotai-cn", "openai",
    "openai-codex", "opencode", "opencode-go", "openrouter", "vercel-ai-gateway", "xai", "xiaomi",
    "xiaomi-token-plan-ams", "xiaomi-token-plan-cn", "xiaomi-token-plan-sgp", "zai",
)

# Environment variables that hold each built-in provider's key, in order of preference.
# (pi 0.73.1's names; tests/ai/test_catalogue.py checks them against the catalogue. A table here, not read
# from catalogue.json, so that checking for a key never reads the catalogue.)
PROVIDER_ENV_KEYS: dict[str, tuple[str, ...]] = {
    "anthropic": ("ANTHROPIC_API_KEY",),  # pi also reads ANTHROPIC_OAUTH_TOKEN: a subscription token, left out
    "openai": ("OPENAI_API_KEY",),
    "google": ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
    "azure-openai-responses": ("AZURE_OPENAI_API_KEY",),
    "google-vertex": ("GOOGLE_CLOUD_API_KEY",),
    "github-copilot": ("COPILOT_GITHUB_TOKEN", "GH_TOKEN", "GITHUB_TOKEN"),
    "deepseek": ("DEEPSEEK_API_KEY",),
    "groq": ("GROQ_API_KEY",),
    "cerebras": ("CEREBRAS_API_KEY",),
    "xai": ("XAI_API_KEY",),
    "openrouter": ("OPENROUTER_API_KEY",),
    "vercel-ai-gateway": ("AI_GATEWAY_API_KEY",),
    "zai": ("ZAI_API_KEY",),
    "mistral": ("MISTRAL_API_KEY",),
    "minimax": ("MINIMAX_API_KEY",),
    "minimax-cn": ("MINIMAX_CN_API_KEY",),
    "moonshotai": ("MOONSHOT_API_KEY",),
    "moonshotai-cn": ("MOONSHOT_API_KEY",),
    "huggingface": ("HF_TOKEN",),
    "fireworks": ("FIREWORKS_API_KEY",),
    "opencode": ("OPENCODE_API_KEY",),
    "opencode-go": ("OPENCODE_API_KEY",),
    "kimi-coding": ("KIMI_API_KEY",),
    "cloudflare-workers-ai": ("CLOUDFLARE_API_KEY",),
    "cloudflare-ai-gateway": ("CLOUDFLARE_API_KEY",),
    "xiaomi": ("XIAOMI_API_KEY",),
    "xiaomi-token-plan-cn": ("XIAOMI_TOKEN_PLAN_CN_API_KEY",),
    "xiaomi-token-plan-ams": ("XIAOMI_TOKEN_PLAN_AMS_API_KEY",),
    "xiaomi-token-plan-sgp": ("XIAOMI_TOKEN_PLAN_SGP_API_KEY",),
}


# Providers with a subscription login (``pisces login``; the flows are pisces.core.config.oauth_*): named here so
# that the no-key messages of every layer can point to the login.
LOGIN_PROVIDERS: tuple[str, ...] = ("github-copilot", "openai-codex")


# ---------------------------------------------------------------------------------------------
# Cost
# ---------------------------------------------------------------------------------------------
def calculate_cost(model: Model, usage: Usage) -> None:
    """Fill ``usage.cost`` from the model's per-million prices, as pi does (IEEE doubles, unrounded)."""
    c = usage.cost
    mc = model.cost
    c.input = num((mc.input / 1_000_000) * usage.input)
    c.output = num((mc.output / 1_000_000) * usage.output)
    c.cacheRead = num((mc.cacheRead / 1_000_000) * usage.cacheRead)
    c.cacheWrite = num((mc.cacheWrite / 1_000_000) * usage.cacheWrite)
    c.total = num(c.input + c.output + c.cacheRead + c.cacheWrite)


# ---------------------------------------------------------------------------------------------
# Thinking levels
# ---------------------------------------------------------------------------------------------
def supported_thinking_levels(model: Model) -> list[str]:
    """Levels a model accepts: only ``off`` without reasoning; ``xhigh`` only when the map names it."""
    if not model.reasoning:
        return ["off"]
    tmap = model.thinkingLevelMap if isinstance(model.thinkingLevelMap, dict) else {}
    levels = []
    for level in THINKING_LEVELS:
        if level in tmap and tmap[level] is None:
            continue  # a null entry hides the level
        if level == "xhigh" and not tmap.get("xhigh"):
            continue
        levels.append(level)
    return levels


def clamp_thinking_level(model: Model, level: str) -> str:
    """The nearest supported level at or below ``level`` (then above), ``off`` for non-reasoning models."""
    levels = supported_thinking_levels(model)
    if level in levels:
        return level
    if level not in THINKING_LEVELS:
        return levels[0]
    idx = THINKING_LEVELS.index(level)
    for candidate in reversed(THINKING_LEVELS[:idx]):
        if candidate in levels:
            return candidate
    for candidate in THINKING_LEVELS[idx:]:
        if candidate in levels:
            return candidate
    return "off"


# ---------------------------------------------------------------------------------------------
# models.json
# ---------------------------------------------------------------------------------------------
class ModelsConfigError(ValueError):
    pass


_COMMENT_RE = re.compile(r'("(?:\\.|[^"\\])*")|//[^\n]*|/\*.*?\*/', re.S)


def strip_json_comments(text: str) -> str:
    return _COMMENT_RE.sub(lambda m: m.group(1) or "", text)


_command_cache: dict[str, str] = {}


def resolve_config_value(value: str) -> str:
    """``!cmd`` runs a shell command (cached); a name of a set environment variable gives its value;
    anything else is used literally."""
    if value.startswith("!"):
        if value not in _command_cache:
            out = subprocess.run(value[1:], shell=True, capture_output=True, text=True, timeout=30)
            _command_cache[value] = out.stdout.strip()
        return _command_cache[value]
    env = os.environ.get(value)
    if env:
        return env
    return value


def parse_models_json(text: str, path: str) -> tuple[list[Model], dict[str, dict[str, Any]], str | None]:
    """Parse the text of models.json (read by the caller). Returns (custom models, provider configs, error).
    Any error drops all custom models, as pi does; the error text says what is wrong."""
    try:
        data = json.loads(strip_json_comments(text))
        models, configs, _ = _parse_models_config(data)
        return models, configs, None
    except (ValueError, ModelsConfigError) as exc:
        return [], {}, f"Failed to load {path}: {exc}"


def _parse_models_config(data: Any) -> tuple[list[Model], dict[str, dict[str, Any]], None]:
    if not isinstance(data, dict):
        raise ModelsConfigError("the top level must be an object")
    providers = data.get("providers", {})
    if not isinstance(providers, dict):
        raise ModelsConfigError("'providers' must be an object")
    builtin_providers = set(CATALOGUE_PROVIDERS)
    models: list[Model] = []
    configs: dict[str, dict[str, Any]] = {}
    for pname, pconf in providers.items():
        if not isinstance(pconf, dict):
            raise ModelsConfigError(f"provider '{pname}' must be an object")
        configs[pname] = pconf
        pmodels = pconf.get("models") or []
        if not isinstance(pmodels, list):
            raise ModelsConfigError(f"provider '{pname}': 'models' must be an array")
        if pmodels and pname not in builtin_providers:
            for key in ("baseUrl", "apiKey"):
                if not pconf.get(key):
                    raise ModelsConfigError(f"provider '{pname}' needs '{key}'")
        for raw in pmodels:
            if not isinstance(raw, dict) or not isinstance(raw.get("id"), str):
                raise ModelsConfigError(f"provider '{pname}': every model needs a string 'id'")
            api = raw.get("api") or pconf.get("api")
            if not api:
                raise ModelsConfigError(f"provider '{pname}' model '{raw['id']}' needs 'api'")
            if api not in KNOWN_APIS:
                raise ModelsConfigError(f"provider '{pname}' model '{raw['id']}': unknown api '{api}'")
            cost = raw.get("cost") or {}
            headers = {**(pconf.get("headers") or {}), **(raw.get("headers") or {})}
            compat = {**(pconf.get("compat") or {}), **(raw.get("compat") or {})}
            m = Model(
                id=raw["id"], name=raw.get("name") or raw["id"], api=api, provider=pname,
                baseUrl=raw.get("baseUrl") or pconf.get("baseUrl") or "",
                reasoning=bool(raw.get("reasoning", False)),
                input=list(raw.get("input") or ["text"]),
                cost=ModelCost(input=cost.get("input", 0), output=cost.get("output", 0),
                               cacheRead=cost.get("cacheRead", 0), cacheWrite=cost.get("cacheWrite", 0)),
                contextWindow=int(raw.get("contextWindow", 128000)),
                maxTokens=int(raw.get("maxTokens", 16384)),
            )
            if "thinkingLevelMap" in raw and isinstance(raw["thinkingLevelMap"], dict):
                m.thinkingLevelMap = raw["thinkingLevelMap"]
            if headers:
                m.headers = headers
            if compat:
                m.compat = compat
            models.append(m)
    return models, configs, None
