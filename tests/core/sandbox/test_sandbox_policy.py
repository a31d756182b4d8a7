"""The sandbox policy and its launcher: precedence of flag, command, settings and default; an untrusted
project only tightens; a settings reload never loosens a running session; subagents and verification are
confined by default; and the bash tool confined by the real kernel asks to escalate a blocked command and
re-runs it unconfined only when approved."""

from __future__ import annotations

import asyncio
import os
from types import SimpleNamespace

import pytest

from pisces.ai.abort import AbortSignal
from pisces.core.sandbox import landlock
from pisces.core.sandbox.launch import Sandbox, blocked_by_sandbox, worktree_git_dirs
from pisces.core.sandbox.policy import resolve


class FakeSettings:
    def __init__(self, g=None, p=None, trusted=False) -> None:
        self.g, self.p, self.project_trusted = g or {}, p or {}, trusted

    def global_settings(self):
        return self.g

    def project_settings(self):
        return self.p


def test_the_default_follows_who_approves_and_the_flag_wins():
    s = FakeSettings()
    assert (resolve(s).mode, resolve(s).source) == ("off", "default")
    assert resolve(s, people_approve=True).mode == "workspace-write"
    assert resolve(s, people_approve=True).network is True
    assert (resolve(FakeSettings({"sandbox": {"mode": "read-only"}}), "off").mode,
            resolve(FakeSettings({"sandbox": {"mode": "read-only"}}), "off").source) == ("off", "cli")
    assert resolve(s, "off", command_mode="read-only").source == "command"
    with pytest.raises(ValueError, match="Invalid sandbox mode"):
        resolve(s, "strict")


def test_an_untrusted_project_can_only_tighten():
    g = {"sandbox": {"mode": "workspace-write", "writableRoots": ["/opt/cache"]}}
    loose = {"sandbox": {"mode": "off", "network": True, "writableRoots": ["/"]}}
    tight = {"sandbox": {"mode": "read-only", "network": False}}
    policy = resolve(FakeSettings(g, loose))
    assert (policy.mode, policy.network, policy.writable_roots) == ("workspace-write", True, ("/opt/cache",))
    policy = resolve(FakeSettings({"sandbox": {"network": False}}, loose))
    assert policy.network is False
    policy = resolve(FakeSettings(g, tight))
    assert (policy.mode, policy.network, policy.source) == ("read-only", False, "project")
    policy = resolve(FakeSettings(g, loose, trusted=True))
    assert (policy.mode, policy.writable_roots) == ("off", ("/opt/cache", "/"))


def test_invalid_settings_are_ignored_with_a_warning():
    policy = resolve(FakeSettings({"sandbox": {"mode": "strict", "network": "no", "writableRoots": "/x"}}))
    assert policy.mode == "off" and policy.network is True and policy.writable_roots == ()
    assert len(policy.warnings) == 3


def test_a_settings_reload_never_loosens_and_delegated_work_is_confined_by_default():
    s = FakeSettings({"sandbox": {"mode": "read-only", "network": False}})
    box = Sandbox(s)
    s.g = {"sandbox": {"mode": "off", "network": True}}  # rewritten behind the session's back
    assert (box.policy().mode, box.policy().network) == ("read-only", False)
    assert box.set_mode("off")["mode"] == "off"  # a person's command does loosen it
    plain = Sandbox(FakeSettings())
    assert plain.policy().mode == "off" and plain.child().policy().mode == "workspace-write"
    chosen = Sandbox(FakeSettings(), "off")  # a person chose off: subagents too
    assert chosen.child().policy().mode == "off"


def test_the_git_directories_of_a_linked_worktree(tmp_path):
    common = tmp_path / "repo" / ".git"
    gitdir = common / "worktrees" / "wt"
    gitdir.mkdir(parents=True)
    (gitdir / "commondir").write_text("../..\n")
    wt = tmp_path / "wt"
    wt.mkdir()
    (wt / ".git").write_text(f"gitdir: {gitdir}\n")
    assert worktree_git_dirs(str(wt)) == [str(gitdir), str(common / "objects")]
    assert worktree_git_dirs(str(tmp_path)) == []


def test_a_blocked_command_is_recognised_by_its_exit_and_the_kernels_words():
    assert blocked_by_sandbox("sh: 1: cannot create /x: Permission denied\n", 2)
    assert not blocked_by_sandbox("Permission denied", 0)
    assert not blocked_by_sandbox("no such file", 1)
    resolve_failed = "curl: (6) Could not resolve host: example.com\n"
    assert not blocked_by_sandbox(resolve_failed, 6)  # with the network on, a lookup failure is not the sandbox's
    off = SimpleNamespace(policy=SimpleNamespace(network=False))  # a Launch's policy with the network off
    assert blocked_by_sandbox(resolve_failed, 6, off)


@pytest.mark.skipif(landlock.available() < 1, reason="needs Landlock in the kernel")
@pytest.mark.parametrize("approve", [False, True])
def test_the_bash_tool_escalates_only_when_approved(tmp_path, approve):
    from pisces.agent.types import ToolError
    from pisces.core.tools.bash import BashTool

    work, outside = tmp_path / "work", tmp_path / "outside"
    work.mkdir()
    outside.mkdir()
    box = Sandbox(FakeSettings(), "workspace-write")
    asked: list[str] = []

    async def escalate(command, call_id, why, signal):
        asked.append(why)
        return None if approve else "the person said no"

    box.escalate = escalate
    tool = BashTool(str(work), sandbox=box)
    target = outside / "x.txt"

    async def go():
        return await tool.execute("c", {"command": f"echo hi > {target} && echo tmp > $TMPDIR/t && echo in > in.txt"},
                                  AbortSignal(), lambda _u: None)

    if approve:
        asyncio.run(go())
        assert target.read_text() == "hi\n"
    else:
        with pytest.raises(ToolError, match="it was not run outside the sandbox: the person said no"):
            asyncio.run(go())
        assert not target.exists() and not (work / "in.txt").exists()
    assert len(asked) == 1 and "the sandbox blocked this command" in asked[0]
    assert os.path.isdir(box.temp_dir())


def test_an_untrusted_projects_file_reaches_the_policy_only_to_tighten(tmp_path):
    import json

    from pisces.core.config.settings import Settings

    agent, project = tmp_path / "agent", tmp_path / "project"
    (project / ".pisces").mkdir(parents=True)
    agent.mkdir()
    (project / ".pisces" / "settings.json").write_text(json.dumps(
        {"sandbox": {"mode": "read-only", "network": False, "writableRoots": [str(tmp_path)]}}))
    policy = resolve(Settings(str(agent), str(project)), people_approve=True)
    assert (policy.mode, policy.network, policy.writable_roots, policy.source) == ("read-only", False, (), "project")
    (project / ".pisces" / "settings.json").write_text(json.dumps({"sandbox": {"mode": "off"}}))
    policy = resolve(Settings(str(agent), str(project)), people_approve=True)
    assert (policy.mode, policy.source) == ("workspace-write", "default")


def test_a_network_switched_off_in_the_settings_stays_off_after_a_reload():
    s = FakeSettings({"sandbox": {"network": False}})
    box = Sandbox(s, people_approve=lambda: True)
    s.g = {"sandbox": {"network": True, "writableRoots": ["/"]}}
    policy = box.policy()
    assert (policy.mode, policy.network, policy.writable_roots) == ("workspace-write", False, ())
