"""Bringing a patch back into a real repository (plain, three-way past the user's own nearby edits, a conflict
that writes nothing), the per-repository lock, and how ``verify`` resolves against the settings."""

from __future__ import annotations

import asyncio
import os

import pytest
from task_util import git

from pisces.core.task import isolation, merge, verify


def write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def read(path: str) -> str:
    with open(path) as f:
        return f.read()


async def _task_patch(repo: str, tmp: str, edit) -> tuple[bytes, str, str]:
    """Run ``edit(worktree)`` in a real isolated worktree and return (patch, before, after)."""
    r = await isolation.find_repo(repo)
    baseline = await isolation.capture_baseline(r)
    wt = os.path.join(tmp, "wt")
    await isolation.create_worktree(r, baseline, wt)
    try:
        before = await isolation.snapshot(wt)
        edit(wt)
        after = await isolation.snapshot(wt)
        return await isolation.tree_diff(wt, before, after), before, after
    finally:
        await isolation.remove_worktree(r, wt)


async def test_patch_applies_as_is(repo, tmp_path):
    patch, before, after = await _task_patch(repo, str(tmp_path), lambda wt: write(
        os.path.join(wt, "app.txt"), "one\ntwo\nTHREE\nfour\nfive\nsix\nseven\n"))
    out = await merge.apply_patch(await isolation.find_repo(repo), patch, before, after)
    assert out.status == "applied"
    assert read(os.path.join(repo, "app.txt")) == "one\ntwo\nTHREE\nfour\nfive\nsix\nseven\n"


async def test_three_way_merge_past_the_users_nearby_edit(repo, tmp_path):
    patch, before, after = await _task_patch(repo, str(tmp_path), lambda wt: write(
        os.path.join(wt, "app.txt"), "one\ntwo\nTHREE\nfour\nfive\nsix\nseven\n"))
    write(os.path.join(repo, "app.txt"), "one\ntwo\nthree\nfour\nFIVE (user)\nsix\nseven\n")  # in its context
    r = await isolation.find_repo(repo)
    check = await merge.git(["apply", "--check"], repo, input=patch, check=False)
    assert check.code != 0  # the plain patch no longer applies: its context changed
    out = await merge.apply_patch(r, patch, before, after)
    assert out.status == "merged"
    assert read(os.path.join(repo, "app.txt")) == "one\ntwo\nTHREE\nfour\nFIVE (user)\nsix\nseven\n"
    assert git(repo, "diff", "--cached") == ""  # the index is left alone


async def test_a_conflict_writes_none_of_the_tasks_files(repo, tmp_path):
    def edit(wt: str) -> None:
        write(os.path.join(wt, "app.txt"), "one\ntwo\nTHREE\nfour\nfive\nsix\nseven\n")
        write(os.path.join(wt, "added.txt"), "new\n")

    patch, before, after = await _task_patch(repo, str(tmp_path), edit)
    write(os.path.join(repo, "app.txt"), "one\ntwo\nthree (user)\nfour\nfive\nsix\nseven\n")
    out = await merge.apply_patch(await isolation.find_repo(repo), patch, before, after)
    assert (out.status, out.conflicts) == ("conflict", ["app.txt"])
    assert read(os.path.join(repo, "app.txt")) == "one\ntwo\nthree (user)\nfour\nfive\nsix\nseven\n"
    assert not os.path.exists(os.path.join(repo, "added.txt"))


async def test_deleted_and_executable_files_come_back(repo, tmp_path):
    def edit(wt: str) -> None:
        os.unlink(os.path.join(wt, "app.txt"))
        write(os.path.join(wt, "run.sh"), "#!/bin/sh\necho hi\n")
        os.chmod(os.path.join(wt, "run.sh"), 0o755)

    patch, before, after = await _task_patch(repo, str(tmp_path), edit)
    out = await merge.apply_patch(await isolation.find_repo(repo), patch, before, after)
    assert out.status == "applied"
    assert not os.path.exists(os.path.join(repo, "app.txt"))
    assert os.access(os.path.join(repo, "run.sh"), os.X_OK)


async def test_parallel_worktrees_of_one_repository_do_not_race(repo, tmp_path):
    r = await isolation.find_repo(repo)
    baseline = await isolation.capture_baseline(r)
    dirs = [os.path.join(str(tmp_path), f"wt{i}") for i in range(6)]
    await asyncio.gather(*(isolation.create_worktree(r, baseline, d) for d in dirs))
    assert sorted(w for w in git(repo, "worktree", "list", "--porcelain").split("\n") if w.startswith("worktree ")) == \
        sorted(["worktree " + repo] + ["worktree " + d for d in dirs])
    await asyncio.gather(*(isolation.remove_worktree(r, d) for d in dirs))
    assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1


PROFILES = {"ci": {"mode": "command", "commands": [{"name": "t", "command": "true", "timeoutMs": 5}],
                   "onFailure": "discard_patch", "maxRetries": 0},
            "off": {"mode": "none", "commands": [{"name": "t", "command": "true"}]},
            "lsp": {"mode": "lsp"}, "empty": {"commands": [{"name": "", "command": "x"}]}, "bad": "nope"}


@pytest.mark.parametrize("value, settings, expected", [
    (None, {}, (False, None, None)),
    (False, {"profiles": PROFILES}, (False, None, None)),
    (None, {"enabled": True, "requireForIsolated": True, "defaultProfile": "ci", "profiles": PROFILES},
     (True, "ci", None)),
    (None, {"requireForIsolated": True, "defaultProfile": "ci", "profiles": PROFILES}, (False, None, None)),
    (True, {"defaultProfile": " ci ", "profiles": PROFILES}, (True, "ci", None)),
    ("  ", {"defaultProfile": "ci", "profiles": PROFILES}, (True, "ci", None)),
    (True, {}, (False, None, verify.NOTHING_TO_RUN)),
    ("ghost", {"profiles": PROFILES}, (False, None, 'Unknown or invalid verification profile "ghost".')),
    ("bad", {"profiles": PROFILES}, (False, None, 'Unknown or invalid verification profile "bad".')),
    ("off", {"profiles": PROFILES}, (False, None, None)),
    ("lsp", {"profiles": PROFILES}, (False, None, verify.NO_LSP)),
    ({"commands": [{"name": "a", "command": "b"}], "lspDiagnostics": True}, {}, (False, None, verify.NO_LSP)),
    ("empty", {"profiles": PROFILES}, (False, None, verify.NO_COMMANDS)),
    ({"commands": [{"name": "a", "command": "true"}]}, {}, (True, None, None)),
])
def test_verify_resolution(value, settings, expected):
    params = {} if value is None else {"verify": value}
    r = verify.resolve(params, settings, True)
    assert (r.requested, r.profile, r.error) == expected


def test_verify_merge_of_profile_and_inline_fields():
    r = verify.resolve({"verify": {"profile": "ci", "onFailure": "retry_once", "maxRetries": 2}},
                       {"profiles": PROFILES, "maxRetries": 5}, True)
    assert (r.commands, r.on_failure, r.max_retries) == (PROFILES["ci"]["commands"], "retry_once", 2)
    r = verify.resolve({"verify": "ci"}, {"profiles": PROFILES}, True)
    assert (r.on_failure, r.max_retries) == ("discard_patch", 0)
    r = verify.resolve({"verify": {"commands": [{"name": "x", "command": "y", "timeoutMs": -1, "optional": 1}]}},
                       {"maxRetries": 3}, True)
    assert (r.commands, r.max_retries, r.on_failure) == ([{"name": "x", "command": "y"}], 3, "return_failure")
    assert verify.resolve({"verify": "ci"}, {}, False).error == verify.NEEDS_ISOLATION
    assert verify.resolve({"verify": False}, {}, False).error is None
