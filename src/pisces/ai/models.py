"""Built-in model catalogue, custom models from models.json (pi's format), cost and thinking clamps."""

from __future__ import annotations

import json
import os
import re
import subprocess
from typing import Any

from msgspec import UNSET

from pisces.ai.types import THINKING_LEVELS, Model, ModelCost, Usage, num

KNOWN_APIS = ("openai-completions", "openai-responses", "anthropic-messages", "google-generative-ai", "faux")


def _m(provider: str, api: str, base: str, id: str, name: str, *, reasoning: bool, window: int, max_tokens: int,
       cost: tuple[float, float, float, float], images: bool = True, xhigh: bool = False) -> Model:
    return Model(
        id=id, name=name, api=api, provider=provider, baseUrl=base, reasoning=reasoning,
        thinkingLevelMap={"xhigh": "xhigh"} if xhigh else UNSET,
        input=["text", "image"] if images else ["text"],
        cost=ModelCost(input=cost[0], output=cost[1], cacheRead=cost[2], cacheWrite=cost[3]),
        contextWindow=window, maxTokens=max_tokens,
    )

_A = ("anthropic", "anthropic-messages", "https://api.anthropic.com")
_O = ("openai", "openai-responses", "https://api.openai.com/v1")
_G = ("google", "google-generative-ai", "https://generativelanguage.googleapis.com/v1beta")

# Prices are US dollars per million tokens: input, output, cache read, cache write.
BUILTIN_MODELS: list[Model] = [
    _m(*_A, "claude-opus-4-5", "Claude Opus 4.5", reasoning=True, window=200000, max_tokens=64000,
       cost=(5, 25, 0.5, 6.25)),
    _m(*_A, "claude-sonnet-4-5", "Claude Sonnet 4.5", reasoning=True, window=200000, max_tokens=64000,
       cost=(3, 15, 0.3, 3.75)),
    _m(*_A, "claude-haiku-4-5", "Claude Haiku 4.5", reasoning=True, window=200000, max_tokens=64000,
       cost=(1, 5, 0.1, 1.25)),
    _m(*_A, "claude-opus-4-1", "Claude Opus 4.1", reasoning=True, window=200000, max_tokens=32000,
       cost=(15, 75, 1.5, 18.75)),
    _m(*_A, "claude-sonnet-4-0", "Claude Sonnet 4", reasoning=True, window=200000, max_tokens=64000,
       cost=(3, 15, 0.3, 3.75)),
    _m(*_A, "claude-3-5-haiku-latest", "Claude Haiku 3.5", reasoning=False, window=200000, max_tokens=8192,
       cost=(0.8, 4, 0.08, 1)),
    _m(*_O, "gpt-5.1", "GPT-5.1", reasoning=True, window=400000, max_tokens=128000, cost=(1.25, 10, 0.125, 0)),
    _m(*_O, "gpt-5", "GPT-5", reasoning=True, window=400000, max_tokens=128000, cost=(1.25, 10, 0.125, 0)),
    _m(*_O, "gpt-5-mini", "GPT-5 mini", reasoning=True, window=400000, max_tokens=128000,
       cost=(0.25, 2, 0.025, 0)),
    _m(*_O, "gpt-5-nano", "GPT-5 nano", reasoning=True, window=400000, max_tokens=128000,
       cost=(0.05, 0.4, 0.005, 0)),
    _m(*_O, "gpt-4.1", "GPT-4.1", reasoning=False, window=1047576, max_tokens=32768, cost=(2, 8, 0.5, 0)),
    _m(*_O, "gpt-4.1-mini", "GPT-4.1 mini", reasoning=False, window=1047576, max_tokens=32768,
       cost=(0.4, 1.6, 0.1, 0)),
    _m(*_O, "gpt-4o", "GPT-4o", reasoning=False, window=128000, max_tokens=16384, cost=(2.5, 10, 1.25, 0)),
    _m(*_O, "gpt-4o-mini", "GPT-4o mini", reasoning=False, window=128000, max_tokens=16384,
       cost=(0.15, 0.6, 0.075, 0)),
    _m(*_O, "o3", "o3", reasoning=True, window=200000, max_tokens=100000, cost=(2, 8, 0.5, 0)),
    _m(*_O, "o4-mini", "o4-mini", reasoning=True, window=200000, max_tokens=100000, cost=(1.1, 4.4, 0.275, 0)),
    _m(*_G, "gemini-2.5-pro", "Gemini 2.5 Pro", reasoning=True, window=1048576, max_tokens=65536,
       cost=(1.25, 10, 0.31, 0)),
    _m(*_G, "gemini-2.5-flash", "Gemini 2.5 Flash", reasoning=True, window=1048576, max_tokens=65536,
       cost=(0.3, 2.5, 0.075, 0)),
    _m(*_G, "gemini-2.5-flash-lite", "Gemini 2.5 Flash-Lite", reasoning=True, window=1048576, max_tokens=65536,
       cost=(0.1, 0.4, 0.025, 0)),
    _m(*_G, "gemini-2.0-flash", "Gemini 2.0 Flash", reasoning=False, window=1048576, max_tokens=8192,
       cost=(0.1, 0.4, 0.025, 0)),
]

# The scripted model, usable with no key (see pisces.ai.providers.faux).
FAUX_MODELS: list[Model] = [
    Model(id="faux", name="Faux scripted model", api="faux", provider="faux", baseUrl="", reasoning=False,
          input=["text", "image"], contextWindow=128000, maxTokens=16384),
    Model(id="faux-reasoning", name="Faux scripted reasoning model", api="faux", provider="faux", baseUrl="",
          reasoning=True, input=["text"], contextWindow=128000, maxTokens=16384),
]

# Environment variables that hold each built-in provider's key, in order of preference.
PROVIDER_ENV_KEYS: dict[str, tuple[str, ...]] = {
    "anthropic": ("ANTHROPIC_API_KEY",),
    "openai": ("OPENAI_API_KEY",),
    "google": ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
    "groq": ("GROQ_API_KEY",),
    "xai": ("XAI_API_KEY",),
    "openrouter": ("OPENROUTER_API_KEY",),
    "mistral": ("MISTRAL_API_KEY",),
    "cerebras": ("CEREBRAS_API_KEY",),
}


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
    builtin_providers = {m.provider for m in BUILTIN_MODELS}
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
