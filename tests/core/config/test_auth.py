import json
import os

import pytest

from pisces.core.config.auth import AuthStorage, missing_key_message, no_api_key_rpc_error


@pytest.fixture
def agent(tmp_path):
    d = tmp_path / "agent"
    d.mkdir()
    return str(d)


def write_auth(agent, data):
    with open(os.path.join(agent, "auth.json"), "w") as f:
        f.write(data if isinstance(data, str) else json.dumps(data))


def test_no_key_anywhere(agent):
    auth = AuthStorage(agent)
    assert auth.get_api_key("anthropic") is None
    assert auth.has_auth("anthropic") is False
    assert auth.key_source("anthropic") is None


@pytest.mark.parametrize("provider,var", [
    ("anthropic", "ANTHROPIC_API_KEY"), ("openai", "OPENAI_API_KEY"), ("google", "GEMINI_API_KEY"),
    ("google", "GOOGLE_API_KEY"), ("groq", "GROQ_API_KEY"), ("xai", "XAI_API_KEY"),
    ("openrouter", "OPENROUTER_API_KEY"), ("mistral", "MISTRAL_API_KEY"), ("cerebras", "CEREBRAS_API_KEY"),
])
def test_env_var_names(agent, monkeypatch, provider, var):
    monkeypatch.setenv(var, "k-" + var)
    auth = AuthStorage(agent)
    assert auth.get_api_key(provider) == "k-" + var
    assert auth.key_source(provider) == f"env:{var}"


def test_gemini_key_preferred_over_google_key(agent, monkeypatch):
    monkeypatch.setenv("GOOGLE_API_KEY", "g")
    monkeypatch.setenv("GEMINI_API_KEY", "gem")
    assert AuthStorage(agent).get_api_key("google") == "gem"


def test_env_var_of_other_provider_does_not_count(agent, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "o")
    assert AuthStorage(agent).get_api_key("anthropic") is None


def test_empty_env_var_is_unset(agent, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "")
    assert AuthStorage(agent).has_auth("anthropic") is False


def test_auth_json_api_key(agent):
    write_auth(agent, {"anthropic": {"type": "api_key", "key": "from-file"}})
    auth = AuthStorage(agent)
    assert auth.get_api_key("anthropic") == "from-file"
    assert auth.key_source("anthropic") == "auth.json"


def test_auth_json_key_resolves_env_var_name(agent, monkeypatch):
    monkeypatch.setenv("MY_SECRET_HOLDER", "resolved")
    write_auth(agent, {"openai": {"type": "api_key", "key": "MY_SECRET_HOLDER"}})
    assert AuthStorage(agent).get_api_key("openai") == "resolved"


def test_auth_json_key_runs_command(agent):
    write_auth(agent, {"openai": {"type": "api_key", "key": "!echo from-command"}})
    assert AuthStorage(agent).get_api_key("openai") == "from-command"


def test_auth_json_oauth_entry_is_not_a_key(agent):
    write_auth(agent, {"anthropic": {"type": "oauth", "access": "x", "refresh": "y", "expires": 0}})
    assert AuthStorage(agent).get_api_key("anthropic") is None


def test_env_beats_auth_json(agent, monkeypatch):
    write_auth(agent, {"anthropic": {"type": "api_key", "key": "file"}})
    monkeypatch.setenv("ANTHROPIC_API_KEY", "env")
    assert AuthStorage(agent).get_api_key("anthropic") == "env"


def test_override_beats_everything(agent, monkeypatch):
    write_auth(agent, {"anthropic": {"type": "api_key", "key": "file"}})
    monkeypatch.setenv("ANTHROPIC_API_KEY", "env")
    auth = AuthStorage(agent, models_json_keys={"anthropic": "mj"}, overrides={"anthropic": "cli"})
    assert auth.get_api_key("anthropic") == "cli"
    assert auth.key_source("anthropic") == "override"
    auth2 = AuthStorage(agent)
    auth2.set_override("openai", "cli2")
    assert auth2.get_api_key("openai") == "cli2"


def test_models_json_key_is_last(agent, monkeypatch):
    auth = AuthStorage(agent, models_json_keys={"scripted": "scripted-key", "anthropic": "mj"})
    assert auth.get_api_key("scripted") == "scripted-key"
    assert auth.key_source("scripted") == "models.json"
    write_auth(agent, {"anthropic": {"type": "api_key", "key": "file"}})
    auth.reload()
    assert auth.get_api_key("anthropic") == "file"


def test_models_json_key_through_env(agent, monkeypatch):
    monkeypatch.setenv("SCRIPTED_TOKEN", "tok")
    assert AuthStorage(agent, models_json_keys={"s": "SCRIPTED_TOKEN"}).get_api_key("s") == "tok"


def test_failing_command_means_no_key(agent):
    auth = AuthStorage(agent, models_json_keys={"s": "!exit 3"})
    assert auth.get_api_key("s") is None


def test_faux_needs_no_key(agent):
    auth = AuthStorage(agent)
    assert auth.has_auth("faux")
    assert auth.get_api_key("faux")


@pytest.mark.parametrize("text", ["{bad json", "[]"])
def test_malformed_auth_json_warns(agent, capsys, text):
    write_auth(agent, text)
    auth = AuthStorage(agent)
    assert auth.get_api_key("anthropic") is None
    assert auth.load_error
    assert "auth.json" in capsys.readouterr().err


def test_missing_key_message_names_env_var_and_file(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    agent_dir = str(tmp_path / ".pisces" / "agent")
    assert missing_key_message("anthropic", agent_dir) == (
        "No API key for provider anthropic: set ANTHROPIC_API_KEY or add it to ~/.pisces/agent/auth.json")
    assert "GEMINI_API_KEY (or GOOGLE_API_KEY)" in missing_key_message("google", agent_dir)


def test_missing_key_message_for_custom_provider(tmp_path):
    msg = missing_key_message("scripted", str(tmp_path))
    assert msg.startswith("No API key for provider scripted: add it to ")
    assert "auth.json" in msg and "models.json" in msg


def test_missing_key_message_defaults_to_agent_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("PISCES_CODING_AGENT_DIR", str(tmp_path / "ad"))
    assert str(tmp_path / "ad" / "auth.json") in missing_key_message("openai")


def test_pi_rpc_error_text():
    assert no_api_key_rpc_error("/docs") == (
        "No API key found for the selected model.\n\n"
        "Use /login to log into a provider via OAuth or API key. See:\n"
        "  /docs/providers.md\n"
        "  /docs/models.md")
    default = no_api_key_rpc_error()
    assert default.startswith("No API key found for the selected model.\n\nUse /login")
    assert default.endswith("/docs/models.md")
