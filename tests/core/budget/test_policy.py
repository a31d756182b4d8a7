"""task.budget.* settings: both spellings, bad values, the project rule (a project that is not trusted may only
make the budget stricter), and the strict set_budget values."""

from __future__ import annotations

import json
import os

import pytest

from pisces.core.budget.policy import BudgetPolicyError, policy_from_request, policy_from_settings
from pisces.core.config.settings import Settings
from pisces.core.config.trust import trust_project


@pytest.fixture
def dirs(tmp_path):
    agent = tmp_path / "agent"
    work = tmp_path / "work"
    (work / ".pisces").mkdir(parents=True)
    agent.mkdir()

    def write(global_data=None, project_data=None):
        if global_data is not None:
            (agent / "settings.json").write_text(json.dumps(global_data))
        if project_data is not None:
            (work / ".pisces" / "settings.json").write_text(json.dumps(project_data))
        return Settings(str(agent), str(work))

    write.agent, write.work = str(agent), str(work)
    return write


def test_no_limit_means_no_policy(dirs):
    assert policy_from_settings(dirs({"steeringMode": "all"})) is None
    assert policy_from_settings(dirs({"task": {"budget": {"warnAtRatio": 0.5}}})) is None  # a ratio is no budget


def test_nested_and_flat_spellings_flat_wins(dirs):
    policy = policy_from_settings(dirs({"task": {"budget": {"maxCostUsd": 5, "maxToolCalls": 3}},
                                        "task.budget.maxCostUsd": 2, "task.budget.abortOnExceeded": True}))
    assert policy.to_wire() == {"maxCostUsd": 2, "maxToolCalls": 3, "warnAtRatio": 0.8, "abortOnExceeded": True}


def test_bad_values_are_ignored_with_a_warning_and_unknown_keys_silently(dirs):
    said = []
    policy = policy_from_settings(dirs({"task": {"budget": {
        "maxCostUsd": "5", "maxToolCalls": -1, "maxSubagents": True, "maxTotalTokens": 1e3, "warnAtRatio": 1.5,
        "abortOnExceeded": "yes", "maxTurns": 4}}}), warn=said.append)
    assert policy.to_wire() == {"maxTotalTokens": 1000, "warnAtRatio": 0.8, "abortOnExceeded": False}
    assert len(said) == 5 and all(s.startswith("ignoring task.budget.") for s in said)
    assert "maxCostUsd must be a number of at least 0, not a string" in said[0]
    assert not any("maxTurns" in s for s in said)


def test_untrusted_project_may_only_tighten(dirs):
    settings = dirs({"task": {"budget": {"maxCostUsd": 5, "maxToolCalls": 10, "warnAtRatio": 0.5}}},
                    {"task": {"budget": {"maxCostUsd": 50, "maxToolCalls": 4, "maxSubagents": 2, "warnAtRatio": 0.9,
                                         "abortOnExceeded": True}, "isolation": {"mode": "worktree"}}})
    assert not settings.project_trusted
    assert settings.ignored_project_settings == ["task.isolation"]  # the budget is not reported as ignored
    policy = policy_from_settings(settings)
    # the user's $5 stays; the project's stricter tool-call cap, new subagent cap and abort apply; the ratio
    # may only go down
    assert policy.to_wire() == {"maxCostUsd": 5, "maxToolCalls": 4, "maxSubagents": 2, "warnAtRatio": 0.5,
                                "abortOnExceeded": True}


def test_untrusted_project_flat_keys_are_kept_and_tightened_too(dirs):
    settings = dirs({"task.budget.maxCostUsd": 5}, {"task.budget.maxCostUsd": 1, "task.budget.maxWallTimeMs": 60000})
    assert settings.ignored_project_settings == []
    assert policy_from_settings(settings).to_wire()["maxCostUsd"] == 1
    assert policy_from_settings(settings).to_wire()["maxWallTimeMs"] == 60000
    raised = dirs({"task.budget.maxCostUsd": 5}, {"task.budget.maxCostUsd": 500})
    assert policy_from_settings(raised).to_wire()["maxCostUsd"] == 5


def test_trusted_project_overrides_like_any_project_setting(dirs):
    trust_project(dirs.work, dirs.agent)
    settings = dirs({"task": {"budget": {"maxCostUsd": 5, "abortOnExceeded": True}}},
                    {"task": {"budget": {"maxCostUsd": 50, "abortOnExceeded": False}}})
    assert settings.project_trusted
    assert policy_from_settings(settings).to_wire() == {"maxCostUsd": 50, "warnAtRatio": 0.8, "abortOnExceeded": False}


def test_project_alone_can_set_a_budget(dirs):
    settings = dirs({}, {"task": {"budget": {"maxToolCalls": 7}}})
    assert policy_from_settings(settings).to_wire() == {"maxToolCalls": 7, "warnAtRatio": 0.8, "abortOnExceeded": False}


def test_set_budget_values_are_strict():
    assert policy_from_request(None) is None
    assert policy_from_request({}) is None
    assert policy_from_request({"maxCostUsd": None, "warnAtRatio": 0.5}) is None  # no limit left: cleared
    policy = policy_from_request({"maxWallTimeMs": 1500.0, "maxSubagents": 0, "abortOnExceeded": True})
    assert policy.to_wire() == {"maxWallTimeMs": 1500, "maxSubagents": 0, "warnAtRatio": 0.8, "abortOnExceeded": True}
    for bad, text in [({"maxCost": 1}, "unknown budget setting 'maxCost': use maxWallTimeMs"),
                      ({"maxToolCalls": "3"}, "maxToolCalls must be a number of at least 0, not a string"),
                      ({"maxToolCalls": -2}, "maxToolCalls must be a number of at least 0, not -2"),
                      ({"warnAtRatio": 0}, "warnAtRatio must be a number above 0 and at most 1, not 0"),
                      ({"abortOnExceeded": 1}, "abortOnExceeded must be true or false, not a number"),
                      ([1], "budget must be an object of limits or null, not an array")]:
        with pytest.raises(BudgetPolicyError) as err:
            policy_from_request(bad)
        assert text in str(err.value)


def test_budget_settings_are_read_only_when_present(dirs, monkeypatch):
    """Start-up without a budget does not import pisces.core.budget at all."""
    import subprocess
    import sys

    code = ("import sys; from pisces.core.session.build import create_agent_session as c; s = c(provider='faux', "
            "no_session=True); print(s.budget is None, 'pisces.core.budget' in sys.modules)")
    env = {**os.environ, "PISCES_CODING_AGENT_DIR": dirs.agent}
    dirs({"task": {"isolation": {"mode": "worktree"}}})
    out = subprocess.run([sys.executable, "-c", code], cwd=dirs.work, env=env, capture_output=True, text=True)
    assert out.stdout.split() == ["True", "False"], out.stderr
    dirs({"task": {"budget": {"maxToolCalls": 3}}})
    out = subprocess.run([sys.executable, "-c", code], cwd=dirs.work, env=env, capture_output=True, text=True)
    assert out.stdout.split() == ["False", "True"], out.stderr
