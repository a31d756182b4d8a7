"""The built-in catalogue holds pi 0.73.1's providers and models (tests/ai/data/pi_model_ids.txt, the vendored
snapshot written by dev/gen_catalogue.py from the npm package), is read only on first use, and its facts reach
the Model objects. The comparison with the package itself contacts the npm registry, so it runs only when
asked for (``PISCES_TEST_NPM=1``), never in the ordinary suite."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from pisces.ai import catalogue
from pisces.ai.models import CATALOGUE_PROVIDERS, PROVIDER_ENV_KEYS, calculate_cost
from pisces.ai.types import Usage

ROOT = Path(__file__).resolve().parents[2]
IDS = Path(__file__).parent / "data" / "pi_model_ids.txt"


def _pi_ids() -> list[str]:
    return [line for line in IDS.read_text().splitlines() if line and not line.startswith("#")]


def test_catalogue_holds_every_pi_provider_and_model_id():
    pi = _pi_ids()
    assert len(pi) >= 969 and len({ref.split("/", 1)[0] for ref in pi}) >= 31
    ours = {f"{m.provider}/{m.id}" for m in catalogue.all_models()}
    missing = [ref for ref in pi if ref not in ours]
    assert missing == []
    for provider in ("openrouter", "vercel-ai-gateway", "amazon-bedrock", "groq", "cerebras", "xai", "deepseek",
                     "fireworks", "huggingface", "mistral", "zai", "moonshotai", "minimax", "cloudflare-workers-ai",
                     "opencode", "github-copilot", "azure-openai-responses", "google-vertex"):
        assert catalogue.models(provider), provider
    for ref in ("anthropic/claude-opus-4-6", "anthropic/claude-opus-4-7", "openai/gpt-5.2",
                "google/gemini-3.1-pro-preview"):
        assert ref in ours, ref


def test_facts_reach_the_models():
    by_ref = {f"{m.provider}/{m.id}": m for m in catalogue.all_models()}
    groq = [m for m in by_ref.values() if m.provider == "groq"]
    assert all(m.api == "openai-completions" and m.baseUrl == "https://api.groq.com/openai/v1" for m in groq)
    ds = next(m for m in by_ref.values() if m.provider == "deepseek" and m.reasoning)
    assert ds.compat["thinkingFormat"] == "deepseek" and ds.cost.input > 0 and ds.contextWindow > 0
    opus = by_ref["anthropic/claude-opus-4-6"]
    assert opus.reasoning and "image" in opus.input and opus.maxTokens > 0
    usage = Usage(input=1_000_000, output=1_000_000)
    calculate_cost(opus, usage)
    assert usage.cost.total == opus.cost.input + opus.cost.output > 0
    # a provider whose models use several APIs keeps each model's own
    assert {m.api for m in by_ref.values() if m.provider == "opencode"} >= {"openai-completions",
                                                                           "anthropic-messages"}


def test_key_variables_match_pi():
    env = catalogue.env_keys()
    for provider, names in env.items():
        if provider == "anthropic":  # pi's ANTHROPIC_OAUTH_TOKEN (a subscription token) is left out
            names = [n for n in names if n != "ANTHROPIC_OAUTH_TOKEN"]
        if not names:
            assert provider in ("amazon-bedrock", "openai-codex"), provider  # AWS chain / login only
            continue
        assert list(PROVIDER_ENV_KEYS[provider][:len(names)]) == names, provider


def test_catalogue_is_not_read_at_import():
    code = ("import pisces.ai.models, pisces.core.config.models_registry, pisces.ai.catalogue as c;"
            "print(c._index is None)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split()[0] == "True"


def test_finding_one_model_decodes_one_provider():
    code = ("import tempfile; from pisces.core.config.models_registry import ModelRegistry;"
            "import pisces.ai.catalogue as c; r = ModelRegistry(tempfile.mkdtemp());"
            "m = r.find('groq', 'llama-3.3-70b-versatile'); print(m.id, sorted(c._decoded))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "llama-3.3-70b-versatile ['groq']"


def test_provider_table_matches_the_catalogue():
    assert list(CATALOGUE_PROVIDERS) == catalogue.provider_names()


def test_the_file_is_what_the_generator_writes():
    sys.path.insert(0, str(ROOT / "dev"))
    try:
        import gen_catalogue
    finally:
        sys.path.remove(str(ROOT / "dev"))
    raw = catalogue.raw()
    assert gen_catalogue.serialize(raw) == Path(catalogue.PATH).read_bytes()
    ids = sorted(f"{p}/{m['id']}" for p, conf in raw["providers"].items() for m in conf["models"])
    assert ids == sorted(_pi_ids())


@pytest.mark.skipif(os.environ.get("PISCES_TEST_NPM") != "1", reason="contacts the npm registry: PISCES_TEST_NPM=1")
@pytest.mark.skipif(not (shutil.which("npm") and shutil.which("node")), reason="needs npm and node")
def test_generator_output_matches_the_package():
    """Regenerate from the real package (when the registry is reachable) and compare with the committed file."""
    with tempfile.TemporaryDirectory() as tmp:
        pack = subprocess.run(["npm", "pack", "@mariozechner/pi-ai@0.73.1", "--silent"], cwd=tmp,
                              capture_output=True, text=True, timeout=120)
        if pack.returncode != 0:
            pytest.skip(f"npm pack failed (offline?): {pack.stderr.strip()[:200]}")
        subprocess.run(["tar", "xzf", next(Path(tmp).glob("*.tgz")).name], cwd=tmp, check=True)
        sys.path.insert(0, str(ROOT / "dev"))
        try:
            import gen_catalogue
        finally:
            sys.path.remove(str(ROOT / "dev"))
        data = gen_catalogue._dump(Path(tmp) / "package" / "dist")
    assert gen_catalogue.build(data, "0.73.1") == catalogue.raw()


def test_every_catalogue_api_is_served():
    from pisces.ai.providers import NOT_IMPLEMENTED, known_apis

    apis = {m.api for m in catalogue.all_models()}
    assert apis <= set(known_apis()) and NOT_IMPLEMENTED == {}
