import json
import os

import pytest

from pisces.core.config import paths
from pisces.core.config.settings import Settings, deep_merge, dumps_js
from shared_paths import SHARED

PI_SETTINGS_AFTER_SETTERS = os.path.join(SHARED, "conformance", "pi-0.73.1", "01_startup_state", "settings.json")


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(data if isinstance(data, str) else json.dumps(data))


@pytest.fixture
def dirs(tmp_path):
    agent = tmp_path / "agent"
    cwd = tmp_path / "project"
    cwd.mkdir()
    return str(agent), str(cwd)


def global_file(agent):
    return os.path.join(agent, "settings.json")


def project_file(cwd):
    return os.path.join(cwd, ".pisces", "settings.json")


# -- paths -----------------------------------------------------------------------------------------
def test_agent_dir_from_env(monkeypatch, tmp_path):
    monkeypatch.setenv("PISCES_CODING_AGENT_DIR", str(tmp_path / "x"))
    assert paths.agent_dir() == str(tmp_path / "x")


def test_agent_dir_expands_tilde(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("PISCES_CODING_AGENT_DIR", "~/custom")
    assert paths.agent_dir() == os.path.join(str(tmp_path), "custom")


def test_agent_dir_default(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("PISCES_CODING_AGENT_DIR")
    assert paths.agent_dir() == os.path.join(str(tmp_path), ".pisces", "agent")


def test_project_config_dir():
    assert paths.project_config_dir("/a/b") == "/a/b/.pisces"


def test_settings_default_to_env_agent_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("PISCES_CODING_AGENT_DIR", str(tmp_path / "ag"))
    write(str(tmp_path / "ag" / "settings.json"), {"defaultModel": "m"})
    assert Settings(cwd=str(tmp_path)).default_model == "m"


# -- defaults --------------------------------------------------------------------------------------
def test_defaults_without_files(dirs):
    s = Settings(*dirs)
    assert s.default_provider is None and s.default_model is None
    assert s.default_thinking_level is None
    assert s.steering_mode == "one-at-a-time"
    assert s.follow_up_mode == "one-at-a-time"
    assert s.interrupt_mode == "immediate"
    assert s.compaction_enabled is True
    assert s.compaction_reserve_tokens == 16384
    assert s.compaction_keep_recent_tokens == 20000
    assert s.branch_summary_reserve_tokens == 16384
    assert s.retry_enabled is True
    assert s.retry_max_retries == 3
    assert s.retry_base_delay_ms == 2000
    assert s.retry_provider_timeout_ms is None
    assert s.retry_provider_max_retries is None
    assert s.retry_provider_max_retry_delay_ms == 60000
    assert s.shell_path is None and s.shell_command_prefix is None
    assert s.session_dir is None
    assert s.enabled_models is None
    assert s.thinking_budgets is None
    assert s.block_images is False
    assert s.transport == "sse"
    assert not os.path.exists(global_file(dirs[0]))  # reading never creates files


def test_values_read_from_global(dirs):
    agent, cwd = dirs
    write(global_file(agent), {
        "defaultProvider": "anthropic", "defaultModel": "claude-sonnet-4-5", "defaultThinkingLevel": "high",
        "steeringMode": "all", "compaction": {"reserveTokens": 1000, "keepRecentTokens": 10},
        "retry": {"maxRetries": 5, "baseDelayMs": 500, "provider": {"timeoutMs": 9000, "maxRetries": 1}},
        "shellPath": "/bin/zsh", "shellCommandPrefix": "set -e", "enabledModels": ["sonnet", "gpt-5*"],
        "thinkingBudgets": {"low": 1024}, "images": {"blockImages": True}, "branchSummary": {"reserveTokens": 7},
    })
    s = Settings(agent, cwd)
    assert s.default_provider == "anthropic"
    assert s.default_model == "claude-sonnet-4-5"
    assert s.default_thinking_level == "high"
    assert s.steering_mode == "all"
    assert s.compaction_reserve_tokens == 1000
    assert s.compaction_keep_recent_tokens == 10
    assert s.compaction_enabled is True
    assert s.retry_max_retries == 5
    assert s.retry_base_delay_ms == 500
    assert s.retry_provider_timeout_ms == 9000
    assert s.retry_provider_max_retries == 1
    assert s.shell_path == "/bin/zsh"
    assert s.shell_command_prefix == "set -e"
    assert s.enabled_models == ["sonnet", "gpt-5*"]
    assert s.thinking_budgets == {"low": 1024}
    assert s.block_images is True
    assert s.branch_summary_reserve_tokens == 7


def test_wrong_types_fall_back_to_defaults(dirs):
    agent, cwd = dirs
    write(global_file(agent), {"compaction": 5, "retry": {"maxRetries": "many", "enabled": "yes"},
                               "steeringMode": 3, "images": {"blockImages": 1}})
    s = Settings(agent, cwd)
    assert s.compaction_enabled is True
    assert s.compaction_reserve_tokens == 16384
    assert s.retry_max_retries == 3
    assert s.retry_enabled is True
    assert s.steering_mode == "one-at-a-time"
    assert s.block_images is False


# -- merge -----------------------------------------------------------------------------------------
def test_project_overrides_global_with_nested_merge(dirs):
    agent, cwd = dirs
    write(global_file(agent), {"defaultModel": "a", "steeringMode": "all",
                               "compaction": {"enabled": False, "reserveTokens": 100},
                               "retry": {"provider": {"timeoutMs": 5}}})
    write(project_file(cwd), {"defaultModel": "b", "compaction": {"keepRecentTokens": 10},
                              "retry": {"provider": {"maxRetries": 2}}})
    s = Settings(agent, cwd)
    assert s.default_model == "b"
    assert s.steering_mode == "all"
    assert s.compaction_enabled is False
    assert s.compaction_reserve_tokens == 100
    assert s.compaction_keep_recent_tokens == 10
    assert s.retry_provider_timeout_ms == 5
    assert s.retry_provider_max_retries == 2


def test_arrays_are_replaced_not_merged():
    assert deep_merge({"enabledModels": ["a", "b"]}, {"enabledModels": ["c"]}) == {"enabledModels": ["c"]}


def test_project_only(dirs):
    agent, cwd = dirs
    write(project_file(cwd), {"retry": {"enabled": False}})
    assert Settings(agent, cwd).retry_enabled is False


# -- migrations ------------------------------------------------------------------------------------
def test_queue_mode_migrates_to_steering_mode(dirs):
    agent, cwd = dirs
    write(global_file(agent), {"queueMode": "all"})
    s = Settings(agent, cwd)
    assert s.steering_mode == "all"
    assert "queueMode" not in s.as_dict()


def test_queue_mode_does_not_override_steering_mode(dirs):
    agent, cwd = dirs
    write(global_file(agent), {"queueMode": "all", "steeringMode": "one-at-a-time"})
    assert Settings(agent, cwd).steering_mode == "one-at-a-time"


def test_retry_max_delay_migrates(dirs):
    agent, cwd = dirs
    write(global_file(agent), {"retry": {"maxDelayMs": 1234, "enabled": False}})
    s = Settings(agent, cwd)
    assert s.retry_provider_max_retry_delay_ms == 1234
    assert s.retry_enabled is False
    assert "maxDelayMs" not in s.as_dict()["retry"]


def test_migration_written_back_on_save(dirs):
    agent, cwd = dirs
    write(global_file(agent), {"queueMode": "all", "custom": {"x": 1}})
    s = Settings(agent, cwd)
    s.set_follow_up_mode("all")
    data = json.load(open(global_file(agent)))
    assert data == {"custom": {"x": 1}, "steeringMode": "all", "followUpMode": "all"}


# -- malformed files -------------------------------------------------------------------------------
@pytest.mark.parametrize("text", ["{not json", "[1, 2]", "\"str\"", "{\"a\": 1,}"])
def test_malformed_global_is_empty_with_warning(dirs, capsys, text):
    agent, cwd = dirs
    write(global_file(agent), text)
    write(project_file(cwd), {"steeringMode": "all"})
    s = Settings(agent, cwd)
    assert s.steering_mode == "all"
    assert s.default_model is None
    err = capsys.readouterr().err
    assert "Warning" in err and "settings.json" in err
    assert s.load_errors


def test_malformed_project_is_empty_with_warning(dirs, capsys):
    agent, cwd = dirs
    write(global_file(agent), {"defaultModel": "g"})
    write(project_file(cwd), "{{{")
    s = Settings(agent, cwd)
    assert s.default_model == "g"
    assert project_file(cwd) in capsys.readouterr().err


def test_empty_file_is_fine(dirs, capsys):
    agent, cwd = dirs
    write(global_file(agent), "")
    s = Settings(agent, cwd)
    assert s.load_errors == []
    assert capsys.readouterr().err == ""


def test_broken_global_is_never_overwritten(dirs):
    agent, cwd = dirs
    write(global_file(agent), "{broken")
    s = Settings(agent, cwd)
    s.set_steering_mode("all")
    assert s.steering_mode == "all"  # kept in memory
    assert open(global_file(agent)).read() == "{broken"


# -- setters ---------------------------------------------------------------------------------------
@pytest.mark.skipif(not os.path.isfile(PI_SETTINGS_AFTER_SETTERS),
                    reason="needs pi's recorded settings.json from ../shared/conformance beside the repository")
def test_setters_reproduce_pi_output_byte_for_byte(dirs):
    agent, cwd = dirs
    write(global_file(agent), '{\n  "defaultProvider": "scripted",\n  "defaultModel": "scripted-model"\n}\n')
    s = Settings(agent, cwd)
    s.set_default_model("scripted", "scripted-model")
    s.set_steering_mode("all")
    s.set_follow_up_mode("all")
    s.set_compaction_enabled(False)
    s.set_retry_enabled(False)
    s.set_default_thinking_level("medium")
    with open(PI_SETTINGS_AFTER_SETTERS, "rb") as f:
        expected = f.read()
    with open(global_file(agent), "rb") as f:
        assert f.read() == expected


def test_setters_write_only_global(dirs):
    agent, cwd = dirs
    write(project_file(cwd), {"steeringMode": "one-at-a-time", "compaction": {"reserveTokens": 5}})
    before = open(project_file(cwd)).read()
    s = Settings(agent, cwd)
    s.set_steering_mode("all")
    s.set_compaction_enabled(False)
    s.set_default_model("openai", "gpt-5")
    assert open(project_file(cwd)).read() == before
    assert json.load(open(global_file(agent))) == {
        "steeringMode": "all", "compaction": {"enabled": False}, "defaultProvider": "openai",
        "defaultModel": "gpt-5"}
    # the project file still wins in the merged view
    assert s.steering_mode == "one-at-a-time"
    assert s.compaction_enabled is False
    assert s.compaction_reserve_tokens == 5
    assert s.default_model == "gpt-5"


def test_setters_preserve_unknown_and_nested_keys(dirs):
    agent, cwd = dirs
    write(global_file(agent), {"theme": "dark", "compaction": {"reserveTokens": 1, "future": [1, 2]},
                               "packages": ["npm:x"], "unknownKey": {"deep": {"x": None}}})
    s = Settings(agent, cwd)
    s.set_compaction_enabled(False)
    s.set_retry_enabled(True)
    s.set_interrupt_mode("wait")
    data = json.load(open(global_file(agent)))
    assert data == {"theme": "dark", "compaction": {"reserveTokens": 1, "future": [1, 2], "enabled": False},
                    "packages": ["npm:x"], "unknownKey": {"deep": {"x": None}}, "retry": {"enabled": True},
                    "interruptMode": "wait"}
    assert s.interrupt_mode == "wait"


def test_setter_keeps_changes_made_by_another_process(dirs):
    agent, cwd = dirs
    s = Settings(agent, cwd)
    s.set_steering_mode("all")
    data = json.load(open(global_file(agent)))
    data["addedElsewhere"] = True
    write(global_file(agent), data)
    s.set_follow_up_mode("all")
    data = json.load(open(global_file(agent)))
    assert data["addedElsewhere"] is True and data["followUpMode"] == "all"


def test_setters_persist_across_instances(dirs):
    agent, cwd = dirs
    Settings(agent, cwd).set_default_thinking_level("low")
    assert Settings(agent, cwd).default_thinking_level == "low"


def test_write_is_atomic_and_leaves_no_temp_files(dirs):
    agent, cwd = dirs
    s = Settings(agent, cwd)
    for i in range(5):
        s.set_steering_mode("all" if i % 2 else "one-at-a-time")
    assert os.listdir(agent) == ["settings.json"]


def test_setter_creates_agent_dir(dirs):
    agent, cwd = dirs
    assert not os.path.exists(agent)
    Settings(agent, cwd).set_retry_enabled(False)
    assert open(global_file(agent)).read() == '{\n  "retry": {\n    "enabled": false\n  }\n}'


def test_non_ascii_written_unescaped(dirs):
    agent, cwd = dirs
    s = Settings(agent, cwd)
    s.set_default_model("prøvider", "モデル")
    assert "モデル" in open(global_file(agent), encoding="utf-8").read()


# -- JSON writing ------------------------------------------------------------------------------------
@pytest.mark.parametrize("value,expected", [
    (2.0, "2"), (0.5, "0.5"), (1e-7, "1e-7"), (0.00001, "0.00001"), (1e21, "1e+21"), (1e20, "100000000000000000000"),
    (-3.0, "-3"), (123.456, "123.456"), (0.3, "0.3"),
])
def test_numbers_as_javascript(value, expected):
    assert dumps_js(value) == expected


def test_dumps_js_layout():
    assert dumps_js({"a": [], "b": {}, "c": [1, {"d": None}], "e": "x\"y"}) == (
        '{\n  "a": [],\n  "b": {},\n  "c": [\n    1,\n    {\n      "d": null\n    }\n  ],\n  "e": "x\\"y"\n}')
