"""``pisces --list-models [SEARCH]``: the model catalogue, one model a line, with each provider's key status.

pi's columns (provider, model, context, max-out, thinking, images; sorted by provider, then id), plus a
``key`` column saying where the provider's key comes from, or which variable to set. Unlike pi, models
without a key are listed too (that is what the key column is for). The built-in faux model is listed last:
it needs no key.

Filters may be mixed into SEARCH (the other words are the fuzzy search): ``provider:NAME``, ``is:reasoning``,
``is:images``, ``is:available`` (a key is set), ``context:N`` (at least N tokens; ``200k``, ``1m``),
``max-input:D`` / ``max-output:D`` (at most D dollars per million tokens). A bad filter value is an error.
"""

from __future__ import annotations

import functools
import sys
from typing import Any, Callable

from pisces.ai.models import LOGIN_PROVIDERS, PROVIDER_ENV_KEYS
from pisces.core.config.models_registry import ModelRegistry

HEADERS = ("provider", "model", "context", "max-out", "thinking", "images", "key")


def format_tokens(count: int) -> str:
    """200000 -> 200K, 1000000 -> 1M, 1500 -> 1.5K (pi's display)."""
    for size, unit in ((1_000_000, "M"), (1_000, "K")):
        if count >= size:
            value = count / size
            return f"{int(value)}{unit}" if value == int(value) else f"{value:.1f}{unit}"
    return str(count)


def key_status(registry: Any, provider: str) -> str:
    if provider == "faux":
        return "none needed"
    key, source = registry.auth.lookup(provider, refresh=False)  # a listing never refreshes a login
    if key:
        return {"override": "--api-key"}.get(source or "", source or "set")
    names = PROVIDER_ENV_KEYS.get(provider)
    login = f"pisces login {provider}" if provider in LOGIN_PROVIDERS else ""
    if provider == "amazon-bedrock":
        return "missing: AWS credentials (AWS_PROFILE, AWS_ACCESS_KEY_ID, AWS_BEARER_TOKEN_BEDROCK, ...)"
    if provider == "google-vertex":
        return "missing: set GOOGLE_CLOUD_API_KEY, or ADC with GOOGLE_CLOUD_PROJECT and GOOGLE_CLOUD_LOCATION"
    if names:
        return f"missing: set {names[0]}" + (f" or {login}" if login else "")
    return f"missing: {login}" if login else "missing: add apiKey in models.json or auth.json"


def matches(search: str, text: str) -> bool:
    """Every word of ``search`` is in ``text`` (case-insensitive), or its letters appear in order."""
    text = text.lower()
    words = search.lower().split()
    if all(w in text for w in words):
        return True
    pos = 0
    for ch in search.lower().replace(" ", ""):
        pos = text.find(ch, pos) + 1
        if pos == 0:
            return False
    return True


def _number(text: str, what: str) -> float:
    scale = {"k": 1_000, "m": 1_000_000}.get(text[-1:].lower(), 1)
    try:
        return float(text[:-1] if scale != 1 else text) * scale
    except ValueError:
        raise ValueError(f'{what} needs a number, not "{text}"') from None


def split_filters(search: str | None, registry: Any) -> tuple[str | None, list[Callable[[Any], bool]]]:
    """The fuzzy-search words of SEARCH and a predicate per filter word (see the module docstring)."""
    words: list[str] = []
    preds: list[Callable[[Any], bool]] = []
    for word in (search or "").split():
        key, sep, value = word.partition(":")
        key = key.lower()
        if not sep or key not in ("provider", "is", "context", "max-input", "max-output"):
            words.append(word)
        elif key == "provider":
            want = value.lower()
            preds.append(functools.partial(_provider_is, want))
        elif key == "is":
            kinds = {"reasoning": lambda m: m.reasoning, "thinking": lambda m: m.reasoning,
                     "images": lambda m: "image" in m.input,
                     "available": lambda m: m.provider == "faux" or registry.auth.has_auth(m.provider)}
            if value.lower() not in kinds:
                raise ValueError(f'is: takes {", ".join(kinds)}, not "{value}"')
            preds.append(kinds[value.lower()])
        elif key == "context":
            least = _number(value, key)
            preds.append(functools.partial(_context_at_least, least))
        else:
            field = "input" if key == "max-input" else "output"
            most = _number(value, key)
            preds.append(functools.partial(_price_at_most, field, most))
    return (" ".join(words) or None), preds


def catalogue_lines(registry: Any, search: str | None = None) -> list[str]:
    models = sorted(registry.get_all(), key=lambda m: (m.provider == "faux", m.provider, m.id))
    words, preds = split_filters(search, registry)
    models = [m for m in models if all(p(m) for p in preds)]
    if words:
        models = [m for m in models if matches(words, f"{m.provider} {m.id}")]
    if not models:
        return [f'No models matching "{search}"'] if search else ["No models are configured."]
    statuses: dict[str, str] = {}
    rows = []
    for m in models:
        if m.provider not in statuses:
            statuses[m.provider] = key_status(registry, m.provider)
        rows.append((m.provider, m.id, format_tokens(m.contextWindow), format_tokens(m.maxTokens),
                     "yes" if m.reasoning else "no", "yes" if "image" in m.input else "no", statuses[m.provider]))
    widths = [max(len(HEADERS[i]), *(len(r[i]) for r in rows)) for i in range(len(HEADERS))]
    fmt = lambda r: "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)).rstrip()  # noqa: E731
    return [fmt(HEADERS), *(fmt(r) for r in rows)]


def run_list_models(search: str | None, *, api_key: str | None = None, provider: str | None = None) -> int:
    registry = ModelRegistry(api_key_override=api_key, override_provider=provider, enable_faux=True)
    if registry.load_error:
        sys.stderr.write(f"pisces: {registry.load_error}\n")
    try:
        lines = catalogue_lines(registry, search)
    except ValueError as exc:
        sys.stderr.write(f"pisces: --list-models: {exc}\n")
        return 2
    sys.stdout.write("\n".join(lines) + "\n")
    sys.stdout.flush()
    return 0


def _provider_is(want: str, m: Any) -> bool:
    return bool(m.provider.lower() == want)


def _context_at_least(least: float, m: Any) -> bool:
    return bool(m.contextWindow >= least)


def _price_at_most(field: str, most: float, m: Any) -> bool:
    return bool(getattr(m.cost, field) <= most)

