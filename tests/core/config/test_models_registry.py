import json
import os

import msgspec
import pytest

from pisces.ai.models import BUILTIN_MODELS
from pisces.ai.types import Model
from pisces.core.config.models_registry import UNKNOWN_MODEL, ModelRegistry, next_thinking_level
from pisces.core.config.settings import Settings

# The exact models.json of the pi reference (§11).
PI_MODELS_JSON = """{"providers": {
  "scripted": {"baseUrl": "http://127.0.0.1:18431/v1", "api": "openai-completions", "apiKey": "scripted-key",
    "models": [
      {"id": "scripted-model", "name": "Scripted Model (OpenAI wire)", "reasoning": false, "input": ["text","image"],
       "contextWindow": 128000, "maxTokens": 16384, "cost": {"input": 3, "output": 15, "cacheRead": 0.3, "cacheWrite": 3.75}},
      {"id": "scripted-reasoning", "reasoning": true, "input": ["text"], "contextWindow": 64000, "maxTokens": 8000,
       "cost": {"input": 1, "output": 2, "cacheRead": 0.1, "cacheWrite": 1}}]},
  "scripted-anthropic": {"baseUrl": "http://127.0.0.1:18431", "api": "anthropic-messages", "apiKey": "scripted-key",
    "models": [{"id": "scripted-claude", "contextWindow": 200000, "maxTokens": 8192, "input": ["text","image"],
       "cost": {"input": 3, "output": 15, "cacheRead": 0.3, "cacheWrite": 3.75}}]}}}"""


@pytest.fixture
def agent(tmp_path):
    d = tmp_path / "agent"
    d.mkdir()
    return str(d)


def write(agent, name, data):
    with open(os.path.join(agent, name), "w") as f:
        f.write(data if isinstance(data, str) else json.dumps(data))


@pytest.fixture
def pi_agent(agent):
    write(agent, "models.json", PI_MODELS_JSON)
    return agent


def ids(models):
    return [m.id for m in models]


def refs(models):
    return [f"{m.provider}/{m.id}" for m in models]


# -- catalogue -------------------------------------------------------------------------------------
def test_pi_models_json_available_without_env_keys(pi_agent):
    reg = ModelRegistry(pi_agent)
    assert reg.load_error is None
    assert ids(reg.get_available()) == ["scripted-model", "scripted-reasoning", "scripted-claude"]


def test_custom_model_fields_and_defaults(pi_agent):
    reg = ModelRegistry(pi_agent)
    m = reg.find("scripted", "scripted-reasoning")
    assert m.name == "scripted-reasoning"  # name defaults to the id
    assert m.api == "openai-completions" and m.baseUrl == "http://127.0.0.1:18431/v1"
    assert m.reasoning is True and m.input == ["text"]
    assert m.contextWindow == 64000 and m.maxTokens == 8000
    c = reg.find("scripted-anthropic", "scripted-claude")
    assert c.name == "scripted-claude" and c.api == "anthropic-messages" and c.reasoning is False
    assert json.loads(msgspec.json.encode(reg.find("scripted", "scripted-model"))) == {
        "id": "scripted-model", "name": "Scripted Model (OpenAI wire)", "api": "openai-completions",
        "provider": "scripted", "baseUrl": "http://127.0.0.1:18431/v1", "reasoning": False,
        "input": ["text", "image"], "cost": {"input": 3, "output": 15, "cacheRead": 0.3, "cacheWrite": 3.75},
        "contextWindow": 128000, "maxTokens": 16384}


def test_all_models_are_builtins_then_custom(pi_agent):
    reg = ModelRegistry(pi_agent)
    all_refs = refs(reg.get_all())
    assert all_refs[:len(BUILTIN_MODELS)] == refs(BUILTIN_MODELS)
    assert all_refs[len(BUILTIN_MODELS):] == [
        "scripted/scripted-model", "scripted/scripted-reasoning", "scripted-anthropic/scripted-claude"]


def test_env_key_adds_builtin_models_before_custom(pi_agent, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    avail = ModelRegistry(pi_agent).get_available()
    anthropic = [m for m in BUILTIN_MODELS if m.provider == "anthropic"]
    assert refs(avail) == refs(anthropic) + [
        "scripted/scripted-model", "scripted/scripted-reasoning", "scripted-anthropic/scripted-claude"]


def test_auth_json_makes_provider_available(agent):
    write(agent, "auth.json", {"openai": {"type": "api_key", "key": "sk"}})
    reg = ModelRegistry(agent)
    assert {m.provider for m in reg.get_available()} == {"openai"}
    assert reg.get_api_key(reg.find("openai", "gpt-5")) == "sk"


def test_no_models_json_no_keys_nothing_available(agent):
    reg = ModelRegistry(agent)
    assert reg.load_error is None
    assert reg.get_available() == []
    assert len(reg.get_all()) == len(BUILTIN_MODELS)


def test_faux_only_when_enabled(agent):
    assert ModelRegistry(agent).find("faux", "faux") is None
    reg = ModelRegistry(agent, enable_faux=True)
    assert refs(reg.get_available()) == ["faux/faux", "faux/faux-reasoning"]
    assert reg.get_api_key(reg.find("faux", "faux"))


def test_faux_comes_after_custom(pi_agent):
    reg = ModelRegistry(pi_agent, enable_faux=True)
    assert ids(reg.get_available()) == ["scripted-model", "scripted-reasoning", "scripted-claude", "faux",
                                        "faux-reasoning"]


@pytest.mark.parametrize("text", [
    "{not json",
    '{"providers": {"x": {"baseUrl": "http://h", "api": "openai-completions", "models": [{"id": "m"}]}}}',
    '{"providers": {"x": {"baseUrl": "http://h", "apiKey": "k", "models": [{"id": "m"}]}}}',
    '{"providers": []}',
])
def test_broken_models_json_drops_all_custom_models(agent, text):
    write(agent, "models.json", text)
    reg = ModelRegistry(agent)
    assert reg.load_error
    assert reg.get_available() == []
    assert len(reg.get_all()) == len(BUILTIN_MODELS)


def test_models_json_allows_comments(agent):
    write(agent, "models.json", '// comment\n' + PI_MODELS_JSON)
    assert ids(ModelRegistry(agent).get_available())[0] == "scripted-model"


def test_custom_model_replaces_builtin_in_place(agent, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    write(agent, "models.json", {"providers": {"openai": {
        "baseUrl": "http://local/v1", "apiKey": "x", "api": "openai-completions",
        "models": [{"id": "gpt-5", "name": "Local GPT-5"}, {"id": "gpt-local"}]}}})
    reg = ModelRegistry(agent)
    all_refs = refs(reg.get_all())
    builtin_refs = refs(BUILTIN_MODELS)
    assert all_refs.index("openai/gpt-5") == builtin_refs.index("openai/gpt-5")
    assert all_refs.count("openai/gpt-5") == 1
    assert all_refs[-1] == "openai/gpt-local"
    m = reg.find("openai", "gpt-5")
    assert m.name == "Local GPT-5" and m.api == "openai-completions" and m.baseUrl == "http://local/v1"


def test_provider_override_without_models(agent, monkeypatch):
    monkeypatch.setenv("PROXY_TOKEN", "secret")
    write(agent, "models.json", {"providers": {"anthropic": {
        "baseUrl": "http://proxy", "apiKey": "anthropic-from-models-json",
        "headers": {"X-Proxy": "PROXY_TOKEN", "X-Lit": "literal"},
        "modelOverrides": {"claude-sonnet-4-5": {"name": "Proxied Sonnet", "cost": {"input": 1},
                                                  "input": ["text"], "contextWindow": 1000}}}}})
    reg = ModelRegistry(agent)
    sonnet = reg.find("anthropic", "claude-sonnet-4-5")
    assert sonnet.baseUrl == "http://proxy"
    assert sonnet.name == "Proxied Sonnet"
    assert sonnet.cost.input == 1 and sonnet.cost.output == 15
    assert sonnet.input == ["text"] and sonnet.contextWindow == 1000
    assert reg.headers(sonnet) == {"X-Proxy": "secret", "X-Lit": "literal"}
    assert reg.find("anthropic", "claude-opus-4-5").baseUrl == "http://proxy"
    assert reg.get_api_key(sonnet) == "anthropic-from-models-json"
    assert "anthropic" in {m.provider for m in reg.get_available()}
    # the module-level catalogue is untouched
    assert next(m for m in BUILTIN_MODELS if m.id == "claude-sonnet-4-5").baseUrl == "https://api.anthropic.com"


def test_headers_resolution_and_auth_header(agent, monkeypatch):
    monkeypatch.setenv("HDR_VAL", "from-env")
    write(agent, "models.json", {"providers": {"p": {
        "baseUrl": "http://h/v1", "api": "openai-completions", "apiKey": "!echo cmd-key", "authHeader": True,
        "headers": {"A": "HDR_VAL", "B": "!echo run", "C": "lit"},
        "models": [{"id": "m", "headers": {"C": "model-level"}}]}}})
    reg = ModelRegistry(agent)
    m = reg.find("p", "m")
    assert reg.headers(m) == {"A": "from-env", "B": "run", "C": "model-level", "Authorization": "Bearer cmd-key"}
    assert reg.get_api_key(m) == "cmd-key"
    assert reg.headers(reg.find("openai", "gpt-5")) == {}


def test_api_key_override_for_provider(agent):
    reg = ModelRegistry(agent, api_key_override="cli-key", override_provider="openai")
    assert {m.provider for m in reg.get_available()} == {"openai"}
    assert reg.get_api_key(reg.find("openai", "gpt-5")) == "cli-key"


def test_unknown_model_placeholder():
    assert isinstance(UNKNOWN_MODEL, Model)
    assert json.loads(msgspec.json.encode(UNKNOWN_MODEL)) == {
        "id": "unknown", "name": "unknown", "api": "unknown", "provider": "unknown", "baseUrl": "",
        "reasoning": False, "input": [], "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
        "contextWindow": 0, "maxTokens": 0}


# -- --model -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("provider,pattern,expected,level", [
    (None, "scripted/scripted-model", "scripted/scripted-model", None),
    (None, "scripted-claude", "scripted-anthropic/scripted-claude", None),
    (None, "SCRIPTED-CLAUDE", "scripted-anthropic/scripted-claude", None),
    (None, "scripted-reasoning:high", "scripted/scripted-reasoning", "high"),
    (None, "scripted/scripted-reasoning:minimal", "scripted/scripted-reasoning", "minimal"),
    ("scripted", "scripted-reasoning", "scripted/scripted-reasoning", None),
    ("scripted", "scripted/scripted-reasoning", "scripted/scripted-reasoning", None),
    ("Scripted", "reasoning", "scripted/scripted-reasoning", None),
    # partial, no credentials at all: the highest alias in localeCompare order among the models of an API pisces
    # speaks wins, over the whole catalogue (pi 0.73.1's data; tests/core/config/test_startup_catalogue.py has
    # the rule that prefers providers with credentials)
    (None, "sonnet", "amazon-bedrock/us.anthropic.claude-sonnet-4-6", None),
    (None, "opus:low", "amazon-bedrock/us.anthropic.claude-opus-4-7", "low"),
    ("anthropic", "sonnet", "anthropic/claude-sonnet-4-6", None),
    (None, "Scripted Model (OpenAI", "scripted/scripted-model", None),  # matches the name too
    ("openai", "gpt-5-mini", "openai/gpt-5-mini", None),
    (None, "openai/gpt-5-mini", "openai/gpt-5-mini", None),
    (None, "openrouter/openai/gpt-5-mini", "openrouter/openai/gpt-5-mini", None),
    ("anthropic", "haiku", "anthropic/claude-haiku-4-5", None),
    (None, "gemini-2.5-flash", "google/gemini-2.5-flash", None),  # exact beats partial
])
def test_resolve_cli_model(pi_agent, provider, pattern, expected, level):
    model, lvl = ModelRegistry(pi_agent).resolve_cli_model(provider, pattern)
    assert f"{model.provider}/{model.id}" == expected
    assert lvl == level


def test_resolve_cli_model_considers_models_without_keys(pi_agent):
    model, _ = ModelRegistry(pi_agent).resolve_cli_model(None, "anthropic/claude-opus-4-1")
    assert model.id == "claude-opus-4-1"


def test_resolve_cli_model_nothing_given(pi_agent):
    assert ModelRegistry(pi_agent).resolve_cli_model(None, None) == (None, None)


def test_resolve_cli_provider_only_gives_provider_default(pi_agent):
    reg = ModelRegistry(pi_agent)
    assert reg.resolve_cli_model("anthropic", None)[0].id == "claude-opus-4-5"
    assert reg.resolve_cli_model("scripted", None)[0].id == "scripted-model"


def test_resolve_cli_model_unknown_pattern_lists_close_matches(pi_agent):
    with pytest.raises(ValueError) as exc:
        ModelRegistry(pi_agent).resolve_cli_model(None, "scripted-modle")
    msg = str(exc.value)
    assert msg.startswith('Model "scripted-modle" not found.')
    assert "scripted/scripted-model" in msg


def test_resolve_cli_model_invalid_thinking_suffix_is_an_error(pi_agent):
    with pytest.raises(ValueError, match="not found"):
        ModelRegistry(pi_agent).resolve_cli_model(None, "scripted-claude:turbo")


def test_resolve_cli_model_unknown_provider(pi_agent):
    with pytest.raises(ValueError) as exc:
        ModelRegistry(pi_agent).resolve_cli_model("nope", "x")
    assert 'Unknown provider "nope"' in str(exc.value)
    assert "scripted-anthropic" in str(exc.value)


def test_resolve_cli_model_unknown_id_for_known_provider_uses_custom_id(pi_agent):
    reg = ModelRegistry(pi_agent)
    model, level = reg.resolve_cli_model(None, "anthropic/claude-future-9:high")
    assert (model.provider, model.id, model.name, level) == ("anthropic", "claude-future-9", "claude-future-9", "high")
    assert model.api == "anthropic-messages"
    assert any("claude-future-9" in w for w in reg.warnings)
    assert reg.find("anthropic", "claude-future-9") is None  # not added to the catalogue


def test_resolve_cli_model_ambiguous_bare_id_falls_back_to_partial(agent):
    write(agent, "models.json", {"providers": {
        "a": {"baseUrl": "http://a", "apiKey": "k", "api": "openai-completions", "models": [{"id": "same"}]},
        "b": {"baseUrl": "http://b", "apiKey": "k", "api": "openai-completions", "models": [{"id": "same"}]}}})
    reg = ModelRegistry(agent)
    assert reg.resolve_cli_model(None, "b/same")[0].provider == "b"
    assert reg.resolve_cli_model(None, "same")[0].id == "same"


def test_dated_versions_lose_to_alias(agent):
    write(agent, "models.json", {"providers": {"p": {
        "baseUrl": "http://a", "apiKey": "k", "api": "openai-completions",
        "models": [{"id": "foo-20240101"}, {"id": "foo-20250101"}, {"id": "foo-x"}]}}})
    reg = ModelRegistry(agent)
    assert reg.resolve_cli_model("p", "foo")[0].id == "foo-x"
    write(agent, "models.json", {"providers": {"p": {
        "baseUrl": "http://a", "apiKey": "k", "api": "openai-completions",
        "models": [{"id": "foo-20240101"}, {"id": "foo-20250101"}]}}})
    reg.refresh()
    assert reg.resolve_cli_model("p", "foo")[0].id == "foo-20250101"


def test_model_ids_with_colons(agent):
    write(agent, "models.json", {"providers": {"p": {
        "baseUrl": "http://a", "apiKey": "k", "api": "openai-completions",
        "models": [{"id": "m:exacto"}]}}})
    reg = ModelRegistry(agent)
    assert reg.resolve_cli_model(None, "m:exacto") == (reg.find("p", "m:exacto"), None)
    assert reg.resolve_cli_model(None, "m:exacto:high") == (reg.find("p", "m:exacto"), "high")


# -- initial selection -----------------------------------------------------------------------------
def settings_for(agent, tmp_path, data=None):
    if data is not None:
        write(agent, "settings.json", data)
    return Settings(agent, str(tmp_path))


def test_initial_model_from_settings(pi_agent, tmp_path):
    s = settings_for(pi_agent, tmp_path, {"defaultProvider": "scripted-anthropic", "defaultModel": "scripted-claude"})
    model, level = ModelRegistry(pi_agent).select_initial_model(s)
    assert (model.provider, model.id, level) == ("scripted-anthropic", "scripted-claude", None)


def test_initial_model_cli_wins(pi_agent, tmp_path):
    s = settings_for(pi_agent, tmp_path, {"defaultProvider": "scripted", "defaultModel": "scripted-model"})
    model, level = ModelRegistry(pi_agent).select_initial_model(s, cli_model="scripted-reasoning:low")
    assert (model.id, level) == ("scripted-reasoning", "low")


def test_initial_model_settings_default_without_key_is_skipped(pi_agent, tmp_path):
    s = settings_for(pi_agent, tmp_path, {"defaultProvider": "anthropic", "defaultModel": "claude-sonnet-4-5"})
    model, _ = ModelRegistry(pi_agent).select_initial_model(s)
    assert model.id == "scripted-model"


def test_initial_model_prefers_provider_default(agent, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    monkeypatch.setenv("GEMINI_API_KEY", "k")
    model, _ = ModelRegistry(agent).select_initial_model(settings_for(agent, tmp_path))
    assert (model.provider, model.id) == ("openai", "gpt-5.1")


def test_initial_model_none_when_nothing_available(agent, tmp_path):
    assert ModelRegistry(agent).select_initial_model(settings_for(agent, tmp_path)) == (None, None)


def test_initial_model_faux(agent, tmp_path):
    model, _ = ModelRegistry(agent, enable_faux=True).select_initial_model(settings_for(agent, tmp_path))
    assert model.provider == "faux"


def test_initial_model_from_scope(pi_agent, tmp_path):
    s = settings_for(pi_agent, tmp_path, {"enabledModels": ["scripted-claude", "scripted-reasoning:high"]})
    model, level = ModelRegistry(pi_agent).select_initial_model(s)
    assert (model.id, level) == ("scripted-claude", None)
    s = settings_for(pi_agent, tmp_path, {"enabledModels": ["scripted-claude", "scripted-reasoning:high"],
                                          "defaultProvider": "scripted", "defaultModel": "scripted-reasoning"})
    model, level = ModelRegistry(pi_agent).select_initial_model(s)
    assert (model.id, level) == ("scripted-reasoning", "high")
    model, _ = ModelRegistry(pi_agent).select_initial_model(s, scope=["scripted-model"])
    assert model.id == "scripted-model"


def test_pending_api_key_binds_to_selected_model(agent, tmp_path):
    reg = ModelRegistry(agent, api_key_override="cli-key")
    assert reg.get_available() == []
    model, _ = reg.select_initial_model(settings_for(agent, tmp_path), cli_model="anthropic/claude-haiku-4-5")
    assert model.id == "claude-haiku-4-5"
    assert reg.get_api_key(model) == "cli-key"
    assert {m.provider for m in reg.get_available()} == {"anthropic"}


# -- cycling ---------------------------------------------------------------------------------------
def test_next_model_wraps(pi_agent):
    reg = ModelRegistry(pi_agent)
    a, b, c = reg.get_available()
    assert reg.next_model(a) == b
    assert reg.next_model(b) == c
    assert reg.next_model(c) == a
    assert reg.next_model(UNKNOWN_MODEL) == b  # unknown current counts as the first


def test_next_model_none_with_one_or_no_model(agent):
    write(agent, "models.json", {"providers": {"p": {
        "baseUrl": "http://a", "apiKey": "k", "api": "openai-completions", "models": [{"id": "only"}]}}})
    reg = ModelRegistry(agent)
    assert reg.next_model(reg.find("p", "only")) is None
    assert ModelRegistry(str(os.path.join(agent, "empty"))).next_model(None) is None


def test_next_model_in_scope(pi_agent):
    reg = ModelRegistry(pi_agent)
    claude = reg.find("scripted-anthropic", "scripted-claude")
    model, level, scoped = reg.next_in_scope(claude, ["scripted-claude", "scripted-reasoning:high"])
    assert (model.id, level, scoped) == ("scripted-reasoning", "high", True)
    assert reg.next_model(model, ["scripted-claude", "scripted-reasoning:high"]) == claude
    assert reg.next_in_scope(claude, ["scripted-claude"]) is None  # one model in scope
    model, level, scoped = reg.next_in_scope(claude, ["no-such-model"])  # empty scope → all available
    assert (model.id, scoped) == ("scripted-model", False)


def test_scope_globs(pi_agent, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    reg = ModelRegistry(pi_agent)
    assert ids(s.model for s in reg.resolve_scope(["scripted/*"])) == ["scripted-model", "scripted-reasoning"]
    assert ids(s.model for s in reg.resolve_scope(["*claude*"]))[-1] == "scripted-claude"
    scoped = reg.resolve_scope(["anthropic/claude-opus-*:high", "claude-opus-4-5"])
    opus = [m.id for m in reg.get_all() if m.provider == "anthropic" and m.id.startswith("claude-opus-")]
    assert "claude-opus-4-5" in opus and "claude-opus-4-1" in opus
    assert [(s.model.id, s.thinking_level) for s in scoped] == [(mid, "high") for mid in opus]
    assert reg.resolve_scope(["SCRIPTED-[cm]*"]) and reg.resolve_scope(["zzz*"]) == []
    assert any("zzz*" in w for w in reg.warnings)


def test_scope_only_lists_models_with_keys(pi_agent):
    reg = ModelRegistry(pi_agent)
    assert reg.resolve_scope(["claude-opus-4-5", "scripted-model"])[0].model.id == "scripted-model"


def test_scope_invalid_suffix_is_ignored_with_warning(pi_agent):
    reg = ModelRegistry(pi_agent)
    scoped = reg.resolve_scope(["scripted-reasoning:turbo"])
    assert [(s.model.id, s.thinking_level) for s in scoped] == [("scripted-reasoning", None)]
    assert any("turbo" in w for w in reg.warnings)


def test_thinking_cycle():
    reasoning = Model(id="r", name="r", api="x", provider="p", reasoning=True)
    order = ["off"]
    for _ in range(5):
        order.append(next_thinking_level(reasoning, order[-1]))
    assert order == ["off", "minimal", "low", "medium", "high", "off"]
    assert next_thinking_level(reasoning, "xhigh") == "off"  # unsupported current level restarts
    xhigh = Model(id="x", name="x", api="x", provider="p", reasoning=True, thinkingLevelMap={"xhigh": "xhigh"})
    assert next_thinking_level(xhigh, "high") == "xhigh"
    assert next_thinking_level(xhigh, "xhigh") == "off"
    hidden = Model(id="h", name="h", api="x", provider="p", reasoning=True, thinkingLevelMap={"minimal": None})
    assert next_thinking_level(hidden, "off") == "low"


def test_thinking_cycle_none_for_non_reasoning(pi_agent):
    reg = ModelRegistry(pi_agent)
    assert reg.next_thinking_level(reg.find("scripted", "scripted-model"), "off") is None
    assert next_thinking_level(UNKNOWN_MODEL, "off") is None
