"""Rules and the mode written to settings.json: under the file's lock, re-read first (another process's
rules and keys survive), nothing written when the change is refused or the file cannot be parsed."""

from __future__ import annotations

import json
import os

import pytest

from pisces.core.approval import SessionApproval
from pisces.core.config.settings import Settings, SettingsWriteError


def _gate(agent_dir: str, cwd: str) -> SessionApproval:
    return SessionApproval(Settings(agent_dir, cwd), cwd)


def test_two_processes_adding_rules_keep_both_and_other_keys(tmp_path):
    agent_dir, cwd = str(tmp_path / "agent"), str(tmp_path / "work")
    os.makedirs(agent_dir)
    os.makedirs(cwd)
    with open(os.path.join(agent_dir, "settings.json"), "w") as f:
        json.dump({"defaultModel": "m", "tools": {"somethingElse": 1}}, f)
    first, second = _gate(agent_dir, cwd), _gate(agent_dir, cwd)  # both read the file before either writes
    first.add_rule({"tool": "bash", "match": "make *", "approval": "allow"})
    listed = second.add_rule({"tool": "bash", "match": "rm *", "approval": "deny"})
    assert [r["match"] for r in listed["rules"]] == ["make *", "rm *"]
    with open(os.path.join(agent_dir, "settings.json")) as f:
        saved = json.load(f)
    assert saved["defaultModel"] == "m" and saved["tools"]["somethingElse"] == 1
    assert len(saved["tools"]["approvalRules"]) == 2
    with pytest.raises(ValueError, match="is not the one given"):
        second.remove_rule(0, {"tool": "bash", "match": "rm *", "approval": "deny"})
    removed = second.remove_rule(0, {"tool": "bash", "match": "make *", "approval": "allow"})
    assert removed["removed"]["match"] == "make *"


def test_a_refused_rule_or_a_broken_file_writes_nothing(tmp_path):
    agent_dir, cwd = str(tmp_path / "agent"), str(tmp_path / "work")
    os.makedirs(agent_dir)
    os.makedirs(cwd)
    path = os.path.join(agent_dir, "settings.json")
    gate = _gate(agent_dir, cwd)
    with pytest.raises(ValueError, match="'approval'"):
        gate.add_rule({"tool": "bash", "approval": "perhaps"})
    assert not os.path.exists(path)
    with open(path, "w") as f:
        f.write("{not json")
    broken = _gate(agent_dir, cwd)
    with pytest.raises(SettingsWriteError, match="fix it first"):
        broken.add_rule({"tool": "bash", "approval": "deny"})
    with open(path) as f:
        assert f.read() == "{not json"
    with pytest.raises(SettingsWriteError, match="could not read"):
        gate.save_mode("always-ask")  # this one read the file before it broke: the write re-reads it and refuses
    with open(path) as f:
        assert f.read() == "{not json"
