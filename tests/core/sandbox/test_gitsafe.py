"""Every git command pisces runs (``pisces.core.task.gitrun.git``) ignores the programs a hostile repository's
configuration names: each class of key (fsmonitor, hooks, filters, diff and merge drivers, external diff,
textconv, pagers, credential helpers, keys from an included file) is planted with a command that leaves a
marker, the commands the task tool uses are run, and no marker appears while the results stay git's own."""

from __future__ import annotations

import asyncio
import os
import subprocess

import pytest

from pisces.core.sandbox import gitsafe
from pisces.core.task.gitrun import git

ID = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@x"}


def sh(repo: str, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True,
                          env={**os.environ, **ID}).stdout


@pytest.fixture
def hostile(tmp_path):
    repo = str(tmp_path / "repo")
    marks = tmp_path / "marks"
    marks.mkdir()
    os.makedirs(repo)
    sh(repo, "init", "-q", "-b", "main")
    with open(os.path.join(repo, "f.txt"), "w") as f:
        f.write("a\nb\nc\n")
    with open(os.path.join(repo, ".gitattributes"), "w") as f:
        f.write("*.txt filter=evil diff=evil merge=evil\n")
    sh(repo, "add", "-A")
    sh(repo, "commit", "-qm", "base")
    sh(repo, "checkout", "-qb", "side")
    with open(os.path.join(repo, "f.txt"), "w") as f:
        f.write("a\nb\nc\nd\n")
    sh(repo, "commit", "-qam", "side")
    sh(repo, "checkout", "-q", "main")

    def mark(name: str) -> str:
        return f"touch {marks}/{name}; cat"

    config = {"core.fsmonitor": mark("fsmonitor"), "filter.evil.clean": mark("clean"),
              "filter.evil.smudge": mark("smudge"), "filter.evil.process": mark("process"),
              "filter.evil.required": "true", "diff.evil.command": mark("diffcmd"),
              "diff.evil.textconv": mark("textconv"), "diff.external": mark("external"),
              "merge.evil.driver": mark("merge"), "core.pager": mark("pager"), "pager.diff": mark("pagerdiff"),
              "credential.helper": mark("credential"), "core.sshCommand": mark("ssh"),
              "core.editor": mark("editor"), "include.path": "extra.cfg"}
    for key, value in config.items():
        sh(repo, "config", key, value)
    with open(os.path.join(repo, ".git", "extra.cfg"), "w") as f:
        f.write(f"[filter \"Other\"]\n\tclean = {mark('included')}\n[core]\n\tfsmonitor = {mark('incfsmonitor')}\n")
    hooks = os.path.join(repo, ".git", "hooks")
    for hook in ("pre-commit", "post-checkout", "post-commit", "post-merge", "pre-auto-gc", "reference-transaction",
                 "post-rewrite", "post-index-change"):
        with open(os.path.join(hooks, hook), "w") as f:
            f.write(f"#!/bin/sh\ntouch {marks}/hook-{hook}\n")
        os.chmod(os.path.join(hooks, hook), 0o755)
    with open(os.path.join(repo, "f.txt"), "w") as f:
        f.write("A\nb\nc\n")
    return repo, marks


def test_the_commands_pisces_runs_never_run_the_repositorys_programs(hostile, tmp_path):
    repo, marks = hostile

    async def go() -> dict[str, str]:
        out = {}
        out["diff"] = (await git(["diff", "--binary"], repo, env=ID)).text
        await git(["add", "-A", "--", "."], repo, env=ID)
        out["cached"] = (await git(["diff", "--binary", "--cached"], repo, env=ID)).text
        tree = (await git(["write-tree"], repo, env=ID)).text.strip()
        await git(["commit-tree", tree, "-p", "HEAD", "-m", "m"], repo, env=ID)
        await git(["read-tree", "HEAD"], repo, env=ID)
        wt = str(tmp_path / "wt")
        await git(["worktree", "add", "--detach", wt, "HEAD"], repo, env=ID)
        out["wt"] = open(os.path.join(wt, "f.txt")).read()
        await git(["cherry-pick", "--allow-empty", "side"], wt, env=ID, check=False)
        out["picked"] = open(os.path.join(wt, "f.txt")).read()
        await git(["worktree", "remove", "--force", "--force", wt], repo, env=ID)
        out["log"] = (await git(["log", "-p", "-1", "side"], repo, env=ID)).text
        return out

    out = asyncio.run(go())
    assert sorted(os.listdir(marks)) == []
    assert "-a\n+A" in out["diff"] and "-a\n+A" in out["cached"]  # git's own diff, not the driver's
    assert out["wt"] == "a\nb\nc\n"
    assert out["picked"] == "a\nb\nc\nd\n"  # git's own text merge
    assert "+d" in out["log"]


def test_the_same_commands_without_the_helper_do_run_them(hostile):
    """The fixture is hostile for real: plain git runs its programs (so the test above can fail)."""
    repo, marks = hostile
    subprocess.run(["git", "diff"], cwd=repo, capture_output=True, check=False, env={**os.environ, **ID})
    subprocess.run(["git", "add", "-A"], cwd=repo, capture_output=True, check=False, env={**os.environ, **ID})
    assert {"incfsmonitor", "process"} <= set(os.listdir(marks))


def test_overrides_cover_each_configured_program_and_refuse_a_flood():
    keys = ["filter.A b.clean", "filter.x.process", "merge.m.driver", "diff.d.textconv", "pager.log",
            "credential.https://h.helper", "trailer.t.command", "mergetool.k.cmd", "remote.o.uploadpack",
            "submodule.s.update", "user.name"]
    got = dict(gitsafe.overrides(keys))
    assert got["filter.A b.clean"] == "" and got["filter.x.process"] == ""
    assert got["merge.m.driver"].startswith("git merge-file")
    assert got["diff.d.textconv"] == "cat" and got["pager.log"] == "false"
    assert got["credential.https://h.helper"] == "" and got["trailer.t.command"] == ""
    assert got["remote.o.uploadpack"] == "git-upload-pack" and got["submodule.s.update"] == "checkout"
    assert "user.name" not in got and got["core.fsmonitor"] == "false" and got["core.hooksPath"] == "/dev/null"
    with pytest.raises(gitsafe.UnsafeRepository):
        gitsafe.overrides([f"filter.f{i}.clean" for i in range(gitsafe.MAX_OVERRIDES)])
    assert gitsafe.safe_args(["diff", "--cached"]) == ["diff", "--no-ext-diff", "--no-textconv", "--cached"]
    assert gitsafe.safe_args(["apply", "x"]) == ["apply", "x"]
