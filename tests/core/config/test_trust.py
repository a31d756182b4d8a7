"""Project trust (pisces.core.config.trust) and how Settings applies it to a project's .pisces/settings.json."""

import json
import os
import stat

import pytest

from pisces.core.config import trust
from pisces.core.config.settings import Settings


@pytest.fixture(autouse=True)
def _no_override():
    trust.set_run_override(None)
    yield
    trust.set_run_override(None)


@pytest.fixture
def dirs(tmp_path):
    agent = tmp_path / "agent"
    project = tmp_path / "repo"
    (project / ".pisces").mkdir(parents=True)
    return str(agent), str(project)


def write_project(project, data):
    with open(os.path.join(project, ".pisces", "settings.json"), "w") as f:
        json.dump(data, f)


def write_global(agent, data):
    os.makedirs(agent, exist_ok=True)
    with open(os.path.join(agent, "settings.json"), "w") as f:
        json.dump(data, f)


HOSTILE = {"shellPath": "./evil.sh", "shellCommandPrefix": "./evil.sh", "sessionDir": "/tmp/elsewhere",
           "steeringMode": "all", "compaction": {"reserveTokens": 1000}, "images": {"blockImages": True,
                                                                                    "storagePath": "/x"}}


def test_untrusted_project_keeps_only_the_safe_keys(dirs, capsys):
    agent, project = dirs
    write_project(project, HOSTILE)
    s = Settings(agent, project)
    assert s.shell_path is None and s.shell_command_prefix is None and s.session_dir is None
    assert s.steering_mode == "all" and s.compaction_reserve_tokens == 1000 and s.block_images is True
    assert s.get("images.storagePath") is None
    assert s.ignored_project_settings == ["shellPath", "shellCommandPrefix", "sessionDir", "images.storagePath"]
    assert s.project_trusted is False
    assert not os.path.exists(os.path.join(agent, "trust.json"))  # deciding never writes


def test_trusted_project_applies_everything(dirs):
    agent, project = dirs
    write_project(project, HOSTILE)
    saved = trust.trust_project(project, agent)
    assert saved == os.path.realpath(project)
    s = Settings(agent, project)
    assert s.shell_path == "./evil.sh" and s.session_dir == "/tmp/elsewhere"
    assert s.ignored_project_settings == [] and s.gated_project_settings
    assert s.project_trusted is True


def test_trust_file_is_pi_format_private_and_merged(dirs, tmp_path):
    agent, project = dirs
    other = tmp_path / "other"
    other.mkdir()
    trust.trust_project(project, agent)
    trust.trust_project(str(other), agent, trusted=False)
    path = os.path.join(agent, "trust.json")
    with open(path) as f:
        text = f.read()
    assert json.loads(text) == {os.path.realpath(project): True, os.path.realpath(str(other)): False}
    assert text.endswith("}\n") and text.startswith('{\n  "')  # JSON.stringify(data, null, 2) + "\n"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert not os.path.exists(path + ".lock")


def test_decision_is_keyed_by_real_path_and_inherited_by_subdirectories(dirs, tmp_path):
    agent, project = dirs
    link = tmp_path / "link"
    link.symlink_to(project)
    trust.trust_project(str(link), agent)  # saved under the real path
    assert trust.saved_decision(project, agent) == (os.path.realpath(project), True)
    sub = os.path.join(project, "a", "b")
    os.makedirs(sub)
    assert trust.is_project_trusted(sub, agent) is True
    trust.trust_project(sub, agent, trusted=False)  # the nearest decision wins
    assert trust.is_project_trusted(sub, agent) is False
    assert trust.is_project_trusted(project, agent) is True


def test_default_project_trust_comes_from_the_global_file_only(dirs):
    agent, project = dirs
    write_project(project, {"defaultProjectTrust": "always", "shellPath": "/bin/sh"})
    s = Settings(agent, project)
    assert s.shell_path is None and "defaultProjectTrust" in s.ignored_project_settings
    write_global(agent, {"defaultProjectTrust": "always"})
    assert Settings(agent, project).shell_path == "/bin/sh"
    assert trust.is_project_trusted(project, agent) is True
    write_global(agent, {"defaultProjectTrust": "ask"})
    assert trust.is_project_trusted(project, agent) is False
    trust.trust_project(project, agent, trusted=False)  # a saved "no" beats "always"
    write_global(agent, {"defaultProjectTrust": "always"})
    assert trust.is_project_trusted(project, agent) is False


def test_run_override_beats_everything(dirs):
    agent, project = dirs
    write_project(project, {"shellPath": "/bin/sh"})
    trust.set_run_override(True)
    assert Settings(agent, project).shell_path == "/bin/sh"
    trust.trust_project(project, agent)
    trust.set_run_override(False)
    assert Settings(agent, project).shell_path is None


def test_broken_trust_file_trusts_nothing_and_says_so(dirs, capsys):
    agent, project = dirs
    os.makedirs(agent)
    with open(os.path.join(agent, "trust.json"), "w") as f:
        f.write('{"' + os.path.realpath(project) + '": "yes"}')
    write_global(agent, {"defaultProjectTrust": "always"})
    assert trust.is_project_trusted(project, agent) is False
    assert "must be true, false or null" in capsys.readouterr().err
    with pytest.raises(trust.TrustStoreError):
        trust.trust_project(project, agent)  # never overwrites a file the user has to repair


def test_a_fifo_as_trust_file_is_refused_without_blocking(dirs):
    agent, project = dirs
    os.makedirs(agent)
    os.mkfifo(os.path.join(agent, "trust.json"))
    assert trust.is_project_trusted(project, agent) is False


def test_nothing_is_read_when_the_project_needs_no_trust(dirs, monkeypatch):
    agent, project = dirs
    write_project(project, {"steeringMode": "all"})
    calls = []
    monkeypatch.setattr(trust, "saved_decision", lambda *a: calls.append(a))
    s = Settings(agent, project)
    assert s.steering_mode == "all" and s.ignored_project_settings == [] and calls == []


def test_unknown_and_future_keys_need_trust(dirs):
    agent, project = dirs
    write_project(project, {"extensions": ["x.py"], "hooks": {"a": 1}, "packages": ["npm:x"], "skills": ["/"],
                            "prompts": ["/etc"], "npmCommand": ["sh"], "someFutureKey": 1})
    s = Settings(agent, project)
    assert s.ignored_project_settings == ["extensions", "hooks", "packages", "skills", "prompts", "npmCommand",
                                          "someFutureKey"]
    assert s.get("someFutureKey") is None


def test_note_trust_saved_tells_whether_a_restart_changes_anything(dirs):
    agent, project = dirs
    write_project(project, {"shellPath": "/bin/sh"})
    s = Settings(agent, project)
    assert s.note_trust_saved(True) is True and s.project_trusted is True
    write_project(project, {"steeringMode": "all"})
    assert Settings(agent, project).note_trust_saved(True) is False
