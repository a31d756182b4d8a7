"""The models a session can use: built-ins, models.json, the faux models; selection and cycling.

Facts follow pi's model registry and model resolver: models.json entries replace a built-in with the same
provider and id and are otherwise appended in file order; a provider entry without models may change a
built-in provider's baseUrl, headers, compat and key, and ``modelOverrides`` patch single models; a
broken models.json drops every custom entry and is reported through ``load_error``. "Available" means a
key is configured for the model's provider.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any, Callable

import msgspec

from pisces.ai.models import (
    CATALOGUE_PROVIDERS,
    FAUX_MODELS,
    _parse_models_config,
    parse_models_json,
    supported_thinking_levels,
)
from pisces.ai.types import THINKING_LEVELS, UNSET, Model, ModelCost
from pisces.core.config import paths
from pisces.core.config.auth import AuthStorage, resolve_value
from pisces.core.safe_open import CONFIG_MAX_BYTES, read_text

# pi's placeholder when nothing is usable: get_state never reports a null model.
UNKNOWN_MODEL = Model(id="unknown", name="unknown", api="unknown", provider="unknown", baseUrl="", reasoning=False,
                      input=[], cost=ModelCost(), contextWindow=0, maxTokens=0)

# The model picked for a provider when nothing more specific is asked for (providers in preference order).
DEFAULT_MODEL_PER_PROVIDER: dict[str, str] = {
    "anthropic": "claude-opus-4-5",
    "openai": "gpt-5.1",
    "google": "gemini-2.5-pro",
}


def models_equal(a: Model | None, b: Model | None) -> bool:
    return a is not None and b is not None and a.provider == b.provider and a.id == b.id


def next_thinking_level(model: Model, level: str | None) -> str | None:
    """The level after ``level`` in off → minimal → low → medium → high (→ xhigh) → off, limited to what
    the model supports; None for a model without reasoning."""
    if not model.reasoning:
        return None
    levels = supported_thinking_levels(model)
    idx = levels.index(level) if level in levels else -1
    return levels[(idx + 1) % len(levels)]


@dataclass
class ScopedModel:
    model: Model
    thinking_level: str | None = None  # set when the pattern carried ":<level>"


# ---------------------------------------------------------------------------------------------
# Pattern matching (pi's --model / --models rules)
# ---------------------------------------------------------------------------------------------
_DATED = re.compile(r"-\d{8}$")


def _is_alias(model_id: str) -> bool:
    """An id without a -YYYYMMDD suffix (or ending in -latest) names the moving alias of a model."""
    return model_id.endswith("-latest") or not _DATED.search(model_id)


def _exact_reference(ref: str, models: list[Model]) -> Model | None:
    """``provider/id`` or a bare id, case-insensitively; an id shared by several providers is no match."""
    ref = ref.strip()
    if not ref:
        return None
    low = ref.lower()
    canonical = [m for m in models if f"{m.provider}/{m.id}".lower() == low]
    if canonical:
        return canonical[0] if len(canonical) == 1 else None
    if "/" in ref:
        prov, _, mid = ref.partition("/")
        prov, mid = prov.strip().lower(), mid.strip().lower()
        if prov and mid:
            hits = [m for m in models if m.provider.lower() == prov and m.id.lower() == mid]
            if hits:
                return hits[0] if len(hits) == 1 else None
    by_id = [m for m in models if m.id.lower() == low]
    return by_id[0] if len(by_id) == 1 else None


def _match_model(pattern: str, models: list[Model], rank: Callable[[Model], int] | None = None) -> Model | None:
    exact = _exact_reference(pattern, models)
    if exact is not None:
        return exact
    low = pattern.lower()
    hits = [m for m in models if low in m.id.lower() or low in (m.name or "").lower()]
    if not hits:
        return None
    if rank is not None:  # e.g. models with a key first (pisces' rule, not pi's: see resolve_cli_model)
        ranks = [rank(m) for m in hits]
        best = max(ranks)
        hits = [m for m, r in zip(hits, ranks, strict=True) if r == best]
    aliases = [m for m in hits if _is_alias(m.id)]
    pool = aliases or hits
    # The highest-sorting id wins: the newest alias, or the latest dated version.
    return max(pool, key=lambda m: _locale_key(m.id))


def _locale_key(text: str) -> tuple[Any, ...]:
    """An approximation of JavaScript's ``localeCompare`` (pi sorts ids with it): punctuation before digits
    before letters, case ignored first; checked against node on pi 0.73.1's ids (tests/core/config)."""
    primary = tuple((0 if not c.isalnum() else 1 if c.isdigit() else 2, c.casefold()) for c in text)
    return primary, tuple(c.isupper() for c in text)


def parse_model_pattern(pattern: str, models: list[Model], *, strict: bool = True,
                        rank: Callable[[Model], int] | None = None) -> tuple[Model | None, str | None, str | None]:
    """(model, thinking level from a ``:level`` suffix, warning). The whole pattern is tried first, so ids
    that contain colons still match. ``strict`` (the --model rule) refuses an unknown suffix instead of
    ignoring it with a warning (the --models rule). ``rank`` orders the partial matches before pi's rules
    (only the highest-ranked are kept)."""
    model = _match_model(pattern, models, rank)
    if model is not None:
        return model, None, None
    head, sep, suffix = pattern.rpartition(":")
    if not sep:
        return None, None, None
    if suffix in THINKING_LEVELS:
        model, _, warning = parse_model_pattern(head, models, strict=strict, rank=rank)
        if model is not None:
            return model, (None if warning else suffix), warning
        return None, None, warning
    if strict:
        return None, None, None
    model, _, warning = parse_model_pattern(head, models, strict=strict, rank=rank)
    if model is not None:
        return model, None, f'Invalid thinking level "{suffix}" in pattern "{pattern}". Using default instead.'
    return None, None, warning


def _glob_regex(glob: str) -> Any:
    """minimatch-style glob: ``*`` and ``?`` stay within one path segment; ``[...]`` is a class. Compiled by
    RE2, whose matching time is linear: ``enabledModels`` may come from a repository's settings, and a
    backtracking regex for ``*a*a*a*a*a*a*a*a*b`` would stall the process. None when it does not compile."""
    import re2  # noqa: PLC0415 - not needed at start-up

    out, i = [], 0
    while i < len(glob):
        c = glob[i]
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            j = glob.find("]", i + 1)
            if j == -1:
                out.append("\\[")
            else:
                body = glob[i + 1:j]
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append("[" + body.replace("\\", "\\\\") + "]")
                i = j
        else:
            out.append(c if c.isalnum() or not c.isascii() or c == "_" else f"\\x{{{ord(c):x}}}")
        i += 1
    options = re2.Options()
    options.case_sensitive = False
    options.log_errors = False
    try:
        return re2.compile("".join(out), options)
    except re2.error:
        return None


def load_models_json(path: str) -> tuple[list[Model], dict[str, dict[str, Any]], str | None]:
    """models.json at ``path``, read through the safe-open rules (a FIFO or a device is refused, the size
    bounded). A missing file is no error."""
    try:
        text = read_text(path, CONFIG_MAX_BYTES)
    except FileNotFoundError:
        return [], {}, None
    except (OSError, ValueError) as exc:
        return [], {}, f"Failed to load {path}: {exc}"
    return parse_models_json(text, path)


# ---------------------------------------------------------------------------------------------
# Overrides from models.json
# ---------------------------------------------------------------------------------------------
def _merge_dict(base: Any, extra: Any) -> dict[str, Any] | None:
    merged = {**(base if isinstance(base, dict) else {}), **(extra if isinstance(extra, dict) else {})}
    return merged or None


def _apply_overrides(m: Model, conf: dict[str, Any] | None) -> Model:
    """A copy of a built-in model with its provider's models.json settings applied."""
    changes: dict[str, Any] = {}
    if conf:
        if isinstance(conf.get("baseUrl"), str) and conf["baseUrl"]:
            changes["baseUrl"] = conf["baseUrl"]
        if isinstance(conf.get("headers"), dict):
            changes["headers"] = _merge_dict(m.headers if m.headers is not UNSET else None, conf["headers"])
        if isinstance(conf.get("compat"), dict):
            changes["compat"] = _merge_dict(m.compat if m.compat is not UNSET else None, conf["compat"])
        per_model = conf.get("modelOverrides")
        ov = per_model.get(m.id) if isinstance(per_model, dict) else None
        if isinstance(ov, dict):
            for key in ("name", "reasoning", "input", "contextWindow", "maxTokens", "thinkingLevelMap"):
                if key in ov:
                    changes[key] = ov[key]
            if isinstance(ov.get("cost"), dict):
                c = m.cost
                changes["cost"] = ModelCost(**{k: ov["cost"].get(k, getattr(c, k))
                                               for k in ("input", "output", "cacheRead", "cacheWrite")})
            if isinstance(ov.get("headers"), dict):
                changes["headers"] = _merge_dict(changes.get("headers", m.headers if m.headers is not UNSET
                                                             else None), ov["headers"])
            if isinstance(ov.get("compat"), dict):
                changes["compat"] = _merge_dict(changes.get("compat", m.compat if m.compat is not UNSET
                                                            else None), ov["compat"])
    for key in ("headers", "compat"):
        if key in changes and changes[key] is None:
            changes[key] = UNSET
    changes.setdefault("input", list(m.input))
    return msgspec.structs.replace(m, **changes)


# ---------------------------------------------------------------------------------------------
# The registry
# ---------------------------------------------------------------------------------------------
class ModelRegistry:
    def __init__(self, agent_dir: str | None = None, *, api_key_override: str | None = None,
                 override_provider: str | None = None, enable_faux: bool = False) -> None:
        self.agent_dir = agent_dir if agent_dir is not None else paths.agent_dir()
        self.models_json_path = os.path.join(self.agent_dir, "models.json")
        self.enable_faux = enable_faux
        self.warnings: list[str] = []  # things worth telling the user (stderr), e.g. unmatched patterns
        self.load_error: str | None = None
        self.provider_configs: dict[str, dict[str, Any]] = {}
        self.extra_providers: dict[str, dict[str, Any]] = {}  # registered by extensions (register_provider)
        self._custom: list[Model] = []
        self._all: list[Model] | None = None  # built on first need (see _assemble)
        self._by_provider: dict[str, list[Model]] = {}
        # --api-key applies to one provider; without --provider it binds to the model selected at start.
        self._pending_override: str | None = api_key_override if api_key_override and not override_provider \
            else None
        self.auth = AuthStorage(self.agent_dir)
        if api_key_override and override_provider:
            self.auth.set_override(override_provider, api_key_override)
        self.refresh()

    def refresh(self) -> None:
        """(Re)read models.json and rebuild the model list."""
        custom, configs, error = load_models_json(self.models_json_path)
        self.load_error = error
        if self.extra_providers:
            extra, extra_configs, _ = _parse_models_config({"providers": self.extra_providers})
            for name, conf in extra_configs.items():  # an extension's provider replaces models.json's models
                if conf.get("models"):
                    custom = [m for m in custom if m.provider != name]
                configs[name] = {**configs.get(name, {}), **conf}
            custom = custom + extra
        self.provider_configs = configs
        self.auth.models_json_keys = {p: c["apiKey"] for p, c in configs.items()
                                      if isinstance(c.get("apiKey"), str) and c["apiKey"]}
        self._custom = custom
        self._all = None
        self._by_provider = {}

    # -- assembling the list (lazily: the catalogue has ~1000 models, start-up needs one) ----------------------
    def _provider_models(self, provider: str) -> list[Model]:
        """One provider's built-ins, with models.json's overrides, a custom model with the same id replacing
        one in place (the catalogue is read for this provider only)."""
        hit = self._by_provider.get(provider)
        if hit is not None:
            return hit
        from pisces.ai import catalogue  # noqa: PLC0415 - the catalogue is read on first need only

        conf = self.provider_configs.get(provider)
        models = [_apply_overrides(m, conf) for m in catalogue.models(provider)]
        login = self.auth.oauth_entry(provider) if provider == "github-copilot" else None
        if login and not (conf or {}).get("baseUrl"):  # a Copilot login names its API host in the token (pi)
            from pisces.core.config.oauth_copilot import base_url_from_token  # noqa: PLC0415 - a login only

            enterprise = login.get("enterpriseUrl")
            base = base_url_from_token(str(login.get("access") or ""), enterprise if isinstance(enterprise, str)
                                       else None)
            models = [msgspec.structs.replace(m, baseUrl=base) for m in models]
        index = {m.id: i for i, m in enumerate(models)}
        for cm in self._custom:
            if cm.provider == provider and cm.id in index:
                models[index[cm.id]] = cm
        self._by_provider[provider] = models
        return models

    def _assemble(self, only: set[str] | None = None) -> list[Model]:
        """The full list (built-ins, then models.json's new models in file order, then faux), or the part of
        it whose provider is in ``only``."""
        if only is None and self._all is not None:
            return self._all
        out = [m for p in CATALOGUE_PROVIDERS if only is None or p in only for m in self._provider_models(p)]
        for cm in self._custom:
            if only is not None and cm.provider not in only:
                continue
            if not any(m.id == cm.id for m in self._provider_models(cm.provider)):
                out.append(cm)
        if self.enable_faux and (only is None or "faux" in only):
            out.extend(msgspec.structs.replace(m, input=list(m.input)) for m in FAUX_MODELS)
        if only is None:
            self._all = out
        return out

    @property
    def _models(self) -> list[Model]:
        return self._assemble()

    def register_provider(self, name: str, config: dict[str, Any]) -> None:
        """A provider in models.json's format, from an extension; a bad one raises and changes nothing."""

        _parse_models_config({"providers": {name: config}})  # validate first
        self.extra_providers[name] = dict(config)
        self.refresh()

    def unregister_provider(self, name: str) -> None:
        if self.extra_providers.pop(name, None) is not None:
            self.refresh()

    # -- queries ----------------------------------------------------------------------------------
    def get_all(self) -> list[Model]:
        return list(self._models)

    def get_available(self) -> list[Model]:
        """Models whose provider has a key: built-ins, then models.json in file order (then faux). Only the
        providers with a key are read from the catalogue."""
        return self._assemble({p for p in self.providers() if self.auth.has_auth(p)})

    def find(self, provider: str, model_id: str) -> Model | None:
        if provider == "faux" or provider not in self.providers():
            return next((m for m in self._assemble({provider}) if m.id == model_id), None)
        hit = next((m for m in self._provider_models(provider) if m.id == model_id), None)
        return hit or next((m for m in self._custom if m.provider == provider and m.id == model_id), None)

    def providers(self) -> list[str]:
        """Providers with at least one model: the catalogue's, then models.json's new ones, then faux."""
        seen: dict[str, None] = dict.fromkeys(CATALOGUE_PROVIDERS)
        for m in self._custom:
            seen.setdefault(m.provider, None)
        if self.enable_faux:
            seen.setdefault("faux", None)
        return list(seen)

    def get_api_key(self, model: Model) -> str | None:
        return self.auth.get_api_key(model.provider)

    def has_auth(self, model: Model) -> bool:
        return self.auth.has_auth(model.provider)

    def headers(self, model: Model) -> dict[str, str]:
        """The model's extra HTTP headers, each value resolved (``!cmd``, env var name, literal)."""
        out: dict[str, str] = {}
        if isinstance(model.headers, dict):
            for name, raw in model.headers.items():
                value = resolve_value(raw)
                if value is not None:
                    out[name] = value
        conf = self.provider_configs.get(model.provider) or {}
        if conf.get("authHeader"):
            key = resolve_value(conf.get("apiKey"))
            if key:
                out["Authorization"] = f"Bearer {key}"
        return out

    def bind_api_key_override(self, provider: str) -> None:
        """Give a pending ``--api-key`` (one given without ``--provider``) to ``provider``."""
        if self._pending_override:
            self.auth.set_override(provider, self._pending_override)
            self._pending_override = None

    # -- --model ----------------------------------------------------------------------------------
    def resolve_cli_model(self, provider: str | None, pattern: str | None) -> tuple[Model | None, str | None]:
        """Resolve ``--provider``/``--model`` as pi does: ``provider/id``, an id, or a partial id or name,
        with an optional ``:<thinking level>`` suffix. All models are candidates, with or without a key,
        so that ``--api-key`` can supply one. Returns (model, thinking level or None); (None, None) when
        neither flag is given. Raises ValueError with a message for the user when nothing matches. A
        provider that exists with an unknown model id gives a model with that id, based on the provider's
        default model, and a warning in ``self.warnings`` (pi's behaviour: the catalogue lags releases).

        One rule differs from pi 0.73.1 (whose ``resolveCliModel`` ranks every partial match alike, so that
        ``sonnet`` picks a Bedrock id for a user with only ``ANTHROPIC_API_KEY``): among partial matches,
        models whose provider has credentials come first, then models of an API pisces speaks, then the rest
        (``partial_match_rank``). Exact ids and ``provider/`` patterns are unaffected.

        Only the providers named are read from the catalogue: ``--provider faux`` does not open it."""
        providers = self.providers()
        if not providers:
            raise ValueError("No models available. Check your installation or add models to models.json.")
        by_lower = {p.lower(): p for p in providers}
        canon = None
        if provider:
            canon = by_lower.get(provider.lower())
            if canon is None:
                known = [*providers, *(["faux"] if "faux" not in providers else [])]
                raise ValueError(f'Unknown provider "{provider}". Known providers: {", ".join(known)} (faux is the '
                                 'built-in scripted model); models.json adds more.')
        if not pattern:
            if canon is None:
                return None, None
            return self._provider_default(canon, self._assemble({canon})), None

        text = pattern
        inferred = False
        if canon is None and "/" in pattern:
            maybe = by_lower.get(pattern.split("/", 1)[0].lower())
            if maybe:
                canon, text, inferred = maybe, pattern.split("/", 1)[1], True
        if canon is None:
            exact = self._exact_full(pattern, self._models)
            if exact is not None:
                return exact, None
        elif not inferred and pattern.lower().startswith(canon.lower() + "/"):
            text = pattern[len(canon) + 1:]

        candidates = self._assemble({canon}) if canon else self._models
        rank = self.partial_match_rank()
        model, level, warning = parse_model_pattern(text, candidates, strict=True, rank=rank)
        if warning:
            self.warnings.append(warning)
        if model is not None:
            return model, level
        if inferred:
            exact = self._exact_full(pattern, self._models)
            if exact is not None:
                return exact, None
            model, level, warning = parse_model_pattern(pattern, self._models, strict=True, rank=rank)
            if model is not None:
                return model, level
        if canon:
            head, sep, suffix = text.rpartition(":")
            new_id, level = (head, suffix) if sep and head and suffix in THINKING_LEVELS else (text, None)
            base = self._provider_default(canon, self._assemble({canon}))
            self.warnings.append(f'Model "{new_id}" not found for provider "{canon}". Using custom model id.')
            return msgspec.structs.replace(base, id=new_id, name=new_id, input=list(base.input)), level
        shown = f"{canon}/{text}" if canon else pattern
        close = self._close_matches(text if canon else pattern, candidates)
        hint = f" Close matches: {', '.join(close)}." if close else ""
        raise ValueError(f'Model "{shown}" not found.{hint} `pisces --list-models` lists the models and which '
                         'keys are set.')

    def partial_match_rank(self) -> Callable[[Model], int]:
        """2 for a model whose provider has credentials and whose API pisces speaks, 1 for one pisces can
        call once given credentials, 0 for the rest (an API not implemented)."""
        from pisces.ai.providers import is_served  # noqa: PLC0415 - the registry of APIs, no SDK; on use only

        auth: dict[str, bool] = {}

        def rank(m: Model) -> int:
            if not is_served(m.api):
                return 0
            if m.provider not in auth:
                auth[m.provider] = self.has_auth(m)
            return 2 if auth[m.provider] else 1

        return rank

    @staticmethod
    def _exact_full(pattern: str, models: list[Model]) -> Model | None:
        low = pattern.lower()
        return next((m for m in models if m.id.lower() == low or f"{m.provider}/{m.id}".lower() == low), None)

    @staticmethod
    def _provider_default(provider: str, models: list[Model]) -> Model:
        own = [m for m in models if m.provider == provider]
        want = DEFAULT_MODEL_PER_PROVIDER.get(provider)
        return next((m for m in own if m.id == want), own[0])

    @staticmethod
    def _close_matches(text: str, models: list[Model], limit: int = 5) -> list[str]:
        import difflib  # noqa: PLC0415 - only needed on the error path

        refs = {f"{m.provider}/{m.id}": m for m in models}
        low = text.lower().split(":")[0]
        picked = [r for r, m in refs.items() if low and (low in m.id.lower() or m.id.lower() in low)]
        by_id = {m.id.lower(): r for r, m in refs.items()}
        for hit in difflib.get_close_matches(low, list(by_id), n=limit, cutoff=0.5):
            picked.append(by_id[hit])
        for hit in difflib.get_close_matches(low, [r.lower() for r in refs], n=limit, cutoff=0.5):
            picked.extend(r for r in refs if r.lower() == hit)
        return list(dict.fromkeys(picked))[:limit]

    # -- initial selection -------------------------------------------------------------------------
    def select_initial_model(self, settings: Any, *, cli_provider: str | None = None, cli_model: str | None = None,
                             scope: list[str] | None = None, is_continuing: bool = False
                             ) -> tuple[Model | None, str | None]:
        """The model a new process starts with, and a thinking level named by the choice itself (a
        ``:level`` suffix on --model or a scope pattern), else None. In order: the CLI flags; the first model
        of the ``--models``/``enabledModels`` scope (the saved default if it is in scope) unless continuing
        a session; the saved defaultProvider/defaultModel if it has a key; the first available model,
        preferring each provider's default model; None (callers show ``UNKNOWN_MODEL``)."""
        if cli_provider or cli_model:
            model, level = self.resolve_cli_model(cli_provider, cli_model)
            if model is not None:
                self.bind_api_key_override(model.provider)
                return model, level
        default_provider = getattr(settings, "default_provider", None) if settings is not None else None
        default_id = getattr(settings, "default_model", None) if settings is not None else None
        saved = self.find(default_provider, default_id) if default_provider and default_id else None
        patterns = scope if scope is not None else (getattr(settings, "enabled_models", None) if settings else None)
        if patterns and not is_continuing:
            scoped = self.resolve_scope(patterns)
            if scoped:
                pick = next((s for s in scoped if models_equal(s.model, saved)), scoped[0])
                self.bind_api_key_override(pick.model.provider)
                return pick.model, pick.thinking_level
        if saved is not None and (self._pending_override or self.has_auth(saved)):
            self.bind_api_key_override(saved.provider)
            return saved, None
        for prov, mid in DEFAULT_MODEL_PER_PROVIDER.items():  # reads only that provider's catalogue line
            hit = self.find(prov, mid) if self.auth.has_auth(prov) else None
            if hit is not None:
                self.bind_api_key_override(hit.provider)
                return hit, None
        available = self.get_available()
        if not available:
            return None, None
        self.bind_api_key_override(available[0].provider)
        return available[0], None

    # -- cycling ----------------------------------------------------------------------------------
    def resolve_scope(self, patterns: list[str]) -> list[ScopedModel]:
        """``--models``/``enabledModels`` patterns → available models, in pattern order, without repeats.
        Globs (``*``, ``?``, ``[``) match ``provider/id`` or the id; other patterns use the --model rules,
        except that an unknown ``:suffix`` is ignored with a warning."""
        available = self.get_available()
        out: list[ScopedModel] = []

        def add(model: Model, level: str | None) -> None:
            if not any(models_equal(s.model, model) for s in out):
                out.append(ScopedModel(model, level))

        for pattern in patterns:
            if any(ch in pattern for ch in "*?["):
                glob, level = pattern, None
                head, sep, suffix = pattern.rpartition(":")
                if sep and suffix in THINKING_LEVELS:
                    glob, level = head, suffix
                rx = _glob_regex(glob)
                hits = [m for m in available if rx is not None
                        and (rx.fullmatch(f"{m.provider}/{m.id}") or rx.fullmatch(m.id))]
                if not hits:
                    self.warnings.append(f'No models match pattern "{pattern}"')
                for m in hits:
                    add(m, level)
                continue
            model, level, warning = parse_model_pattern(pattern, available, strict=False)
            if warning:
                self.warnings.append(warning)
            if model is None:
                self.warnings.append(f'No models match pattern "{pattern}"')
                continue
            add(model, level)
        return out

    def next_in_scope(self, current: Model | None, scope: list[str] | None = None
                      ) -> tuple[Model, str | None, bool] | None:
        """The model after ``current`` (wrapping), its scoped thinking level, and whether a scope was used;
        None when there is at most one model to cycle through. A scope that matches nothing is ignored."""
        scoped = self.resolve_scope(scope) if scope else []
        if scoped:
            pool = [(s.model, s.thinking_level) for s in scoped]
        else:
            pool = [(m, None) for m in self.get_available()]
        if len(pool) <= 1:
            return None
        idx = next((i for i, (m, _) in enumerate(pool) if models_equal(m, current)), 0)
        model, level = pool[(idx + 1) % len(pool)]
        return model, level, bool(scoped)

    def next_model(self, current: Model | None, scope: list[str] | None = None) -> Model | None:
        hit = self.next_in_scope(current, scope)
        return hit[0] if hit else None

    next_thinking_level = staticmethod(next_thinking_level)
