"""Choosing the start-up model keeps the catalogue off the start-up path: ``--provider faux`` never imports
it, a key for one provider reads the index and that provider's line only; and a partial ``--model`` prefers
models whose provider has credentials and that pisces can call (pisces' rule, documented in providers.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from pisces.core.config.models_registry import ModelRegistry

_CLEAN = {k: v for k, v in os.environ.items()
          if not k.endswith(("_API_KEY", "_TOKEN")) and not k.startswith(("AWS_", "GOOGLE_", "GCLOUD_"))}


def _probe(tmp_path, code: str, **env: str) -> dict:
    full = ("import json, sys\nfrom pisces.core.session.build import create_agent_session\n" + code + "\n"
            "c = sys.modules.get('pisces.ai.catalogue')\n"
            "print(json.dumps({'imported': c is not None, 'decoded': sorted(c._decoded) if c else [],"
            " 'model': f'{s.model.provider}/{s.model.id}' if s.model else None}))\n")
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    r = subprocess.run([sys.executable, "-c", full], capture_output=True, text=True, timeout=60, cwd=tmp_path,
                       env={**_CLEAN, "HOME": str(home), "PISCES_CODING_AGENT_DIR": str(home / "agent"), **env})
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_faux_start_up_never_imports_the_catalogue(tmp_path):
    out = _probe(tmp_path, "s = create_agent_session(cwd='.', provider='faux', no_session=True)")
    assert out == {"imported": False, "decoded": [], "model": "faux/faux"}


def test_a_key_for_one_provider_decodes_that_provider_only(tmp_path):
    out = _probe(tmp_path, "s = create_agent_session(cwd='.', no_session=True)", OPENAI_API_KEY="sk-test",
                 GROQ_API_KEY="gsk-test")
    assert out["model"] == "openai/gpt-5.1" and out["decoded"] == ["openai"]


def test_no_key_at_all_reads_no_provider(tmp_path):
    out = _probe(tmp_path, "s = create_agent_session(cwd='.', no_session=True)")
    assert out["decoded"] == [] and out["model"] == "unknown/unknown"


@pytest.fixture
def registry(tmp_path, monkeypatch):
    for k in list(os.environ):
        if k not in _CLEAN:
            monkeypatch.delenv(k)
    return ModelRegistry(str(tmp_path))


def test_partial_model_prefers_a_provider_with_credentials(registry, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    model, _ = registry.resolve_cli_model(None, "sonnet")
    assert model.provider == "anthropic" and "sonnet" in model.id
    model, level = registry.resolve_cli_model(None, "opus:low")
    assert model.provider == "anthropic" and level == "low"


def test_partial_model_with_several_keys_follows_pi_among_them(registry, monkeypatch):
    monkeypatch.setenv("OPENROUTER_API_KEY", "or-test")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    model, _ = registry.resolve_cli_model(None, "sonnet")
    # both have credentials: pi's rule (an alias id, the highest in localeCompare order) picks among them
    assert model.provider in ("anthropic", "openrouter")
    assert model.provider != "amazon-bedrock"


def test_exact_ids_and_named_providers_are_unaffected(registry, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    model, _ = registry.resolve_cli_model(None, "amazon-bedrock/us.anthropic.claude-sonnet-4-6")
    assert model.provider == "amazon-bedrock"
    model, _ = registry.resolve_cli_model("openrouter", "sonnet")
    assert model.provider == "openrouter"


def test_without_any_credentials_a_callable_api_comes_first(registry):
    from pisces.ai.providers import is_served

    model, _ = registry.resolve_cli_model(None, "gpt-5.1-codex")
    assert is_served(model.api), model
