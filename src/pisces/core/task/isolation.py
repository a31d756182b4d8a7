"""Isolated task execution in git worktrees: the user's baseline, a detached worktree holding it, the task's
delta as a patch, and cleanup.

* **Baseline**, taken once per batch: HEAD, the staged and the unstaged diff, and the untracked (not ignored)
  files of the user's repository.
* **Worktree**: ``git worktree add --detach`` at that HEAD under ``<agent dir>/worktrees/<repo>/<pid>-<id>``,
  then the baseline replayed into it (staged changes into its index too, untracked files copied), so the
  subagent sees what the user sees.
* **Snapshots**: a tree object of the whole worktree (tracked files plus untracked, not ignored ones), written
  through a temporary index so the worktree's own index is untouched. One is taken when the baseline is in
  place, one when the task is done; the delta is the diff between the two. Whatever the subagent does with git
  (stage, commit, reset) the patch holds exactly its changes and never the user's own pending ones, which the
  first snapshot already contains.
* **Cleanup**: ``git worktree remove --force`` plus removal of the directory, always (also after an abort or a
  crash); worktrees left by a pisces process that died are swept at the next isolated batch in that
  repository. Other worktrees of the repository are never touched.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import tempfile
import uuid
from dataclasses import dataclass, field

from pisces.ai.abort import AbortSignal
from pisces.core.task.gitrun import GitError, git, git_retrying, git_text, repo_lock

NO_REPO = "Git repository not found for isolated task execution."


class IsolationError(Exception):
    pass


@dataclass
class Repo:
    root: str  # the top level of the user's working tree
    common_dir: str  # the shared git directory (its lock guards worktrees, refs and the user's tree)


@dataclass
class Baseline:
    head: str
    staged: bytes
    unstaged: bytes
    untracked: list[str]
    nested_repos: list[str] = field(default_factory=list)  # untracked directories that are git repositories


async def find_repo(cwd: str) -> Repo:
    try:
        root = (await git_text(["rev-parse", "--show-toplevel"], cwd)).strip()
        common = (await git_text(["rev-parse", "--path-format=absolute", "--git-common-dir"], cwd)).strip()
    except (GitError, OSError):
        raise IsolationError(NO_REPO) from None
    if not root:
        raise IsolationError(NO_REPO)
    return Repo(root=root, common_dir=common)


async def capture_baseline(repo: Repo) -> Baseline:
    async with repo_lock(repo.common_dir):
        try:
            head = (await git_text(["rev-parse", "--verify", "HEAD^{commit}"], repo.root)).strip()
        except GitError:
            raise IsolationError("the repository has no commit yet (HEAD is unborn); commit once, then retry") from None
        staged = (await git(["diff", "--binary", "--cached"], repo.root)).stdout
        unstaged = (await git(["diff", "--binary"], repo.root)).stdout
        listing = (await git(["ls-files", "--others", "--exclude-standard", "-z"], repo.root)).stdout
    untracked = [p for p in listing.decode("utf-8", "surrogateescape").split("\0") if p]
    nested = await asyncio.to_thread(
        lambda: [p.rstrip("/") for p in untracked if os.path.exists(os.path.join(repo.root, p.rstrip("/"), ".git"))])
    return Baseline(head=head, staged=staged, unstaged=unstaged, untracked=untracked, nested_repos=nested)


# -- worktrees ----------------------------------------------------------------------------------------
def worktrees_home(agent_dir: str, repo_root: str) -> str:
    encoded = "--" + re.sub(r"[/\\:]", "-", repo_root.lstrip("/\\")) + "--"
    return os.path.join(agent_dir, "worktrees", encoded)


def safe_name(task_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", task_id)[:80] or "task"


async def create_worktree(repo: Repo, baseline: Baseline, directory: str, signal: AbortSignal | None = None) -> None:
    """A detached worktree at the baseline's HEAD in ``directory``, with the user's pending changes replayed."""
    async with repo_lock(repo.common_dir):
        await git(["worktree", "remove", "--force", "--force", directory], repo.root, check=False)
        await asyncio.to_thread(_reset_dir, directory)
        await git_retrying(["worktree", "add", "--detach", directory, baseline.head], repo.root, signal=signal)
    if baseline.staged.strip():
        await git(["apply", "--cached", "--whitespace=nowarn"], directory, input=baseline.staged, signal=signal)
        await git(["apply", "--whitespace=nowarn"], directory, input=baseline.staged, signal=signal)
    if baseline.unstaged.strip():
        await git(["apply", "--whitespace=nowarn"], directory, input=baseline.unstaged, signal=signal)
    if baseline.untracked:
        await asyncio.to_thread(_copy_untracked, repo.root, directory, baseline.untracked)


def _reset_dir(directory: str) -> None:
    shutil.rmtree(directory, ignore_errors=True)
    os.makedirs(os.path.dirname(directory), exist_ok=True)


def _copy_untracked(source_root: str, target_root: str, entries: list[str]) -> None:
    for entry in entries:
        rel = entry.rstrip("/")
        source, target = os.path.join(source_root, rel), os.path.join(target_root, rel)
        try:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            if os.path.isdir(source) and not os.path.islink(source):
                shutil.copytree(source, target, symlinks=True, dirs_exist_ok=True)
            else:
                shutil.copy2(source, target, follow_symlinks=False)
        except FileNotFoundError:
            continue  # deleted since the baseline was taken


async def snapshot(directory: str, signal: AbortSignal | None = None) -> str:
    """The tree id of everything in ``directory`` that git would track: its HEAD's files as they are on disk now,
    plus untracked files that are not ignored. The worktree's own index is left alone."""
    index = os.path.join(tempfile.gettempdir(), f"pisces-task-index-{uuid.uuid4().hex}")
    env = {"GIT_INDEX_FILE": index}
    try:
        await git(["read-tree", "HEAD"], directory, env=env, signal=signal)
        await git(["add", "-A", "--", "."], directory, env=env, signal=signal)
        return (await git_text(["write-tree"], directory, env=env, signal=signal)).strip()
    finally:
        await asyncio.to_thread(_unlink, index)


def _unlink(path: str) -> None:
    for p in (path, path + ".lock"):
        try:
            os.unlink(p)
        except OSError:
            pass


async def tree_diff(directory: str, before: str, after: str, exclude: list[str] | None = None,
                    signal: AbortSignal | None = None) -> bytes:
    """The binary patch from tree ``before`` to tree ``after`` (full blob ids, so it can be merged three-way)."""
    args = ["diff", "--binary", "--full-index", "--no-renames", "--no-color", before, after]
    if exclude:
        args += ["--", ".", *[f":(exclude){p}" for p in exclude]]
    return (await git(args, directory, signal=signal)).stdout


_ZERO = "0" * 40


async def undo_side_effects(directory: str, tree: str, clean: str, checked: str) -> str:
    """``tree`` without what verification commands wrote: every path that changed from ``clean`` (the task's
    work, before the checks ran) to ``checked`` (after them) and that the repair subagent then left as the checks
    left it, goes back to its ``clean`` state. Build output, caches and reports never reach the patch."""
    raw = (await git(["diff-tree", "-r", "-z", "--no-renames", clean, checked], directory)).stdout
    fields = raw.decode("utf-8", "surrogateescape").split("\0")
    by_checks: dict[str, tuple[str, str, str]] = {}
    i = 0
    while i + 1 < len(fields) and fields[i].startswith(":"):
        old_mode, _new_mode, old_sha, _new_sha, status = fields[i][1:].split(" ")
        by_checks[fields[i + 1]] = (old_mode, old_sha, status)
        i += 2
    if not by_checks:
        return tree
    touched = (await git(["diff-tree", "-r", "-z", "--no-renames", "--name-only", checked, tree], directory)).stdout
    by_repair = set(touched.decode("utf-8", "surrogateescape").split("\0"))
    lines = []
    for path, (mode, sha, status) in by_checks.items():
        if path in by_repair:
            continue
        lines.append(f"0 {_ZERO}\t{path}" if status == "A" else f"{mode} {sha}\t{path}")
    if not lines:
        return tree
    index = os.path.join(tempfile.gettempdir(), f"pisces-task-index-{uuid.uuid4().hex}")
    env = {"GIT_INDEX_FILE": index}
    try:
        await git(["read-tree", tree], directory, env=env)
        await git(["update-index", "--index-info"], directory, env=env,
                  input=("\n".join(lines) + "\n").encode("utf-8", "surrogateescape"))
        return (await git_text(["write-tree"], directory, env=env)).strip()
    finally:
        await asyncio.to_thread(_unlink, index)


async def remove_worktree(repo: Repo, directory: str) -> None:
    """Remove the worktree (its directory and its registration in the repository), whatever state it is in;
    never raises. Other worktrees of the repository are not touched (no ``git worktree prune``)."""
    try:
        async with repo_lock(repo.common_dir):
            await git(["worktree", "remove", "--force", "--force", directory], repo.root, check=False)
            await asyncio.to_thread(shutil.rmtree, directory, True)
    except Exception:  # noqa: BLE001 - cleanup is best effort; the sweep catches what is left
        await asyncio.to_thread(shutil.rmtree, directory, True)


async def sweep_stale(repo: Repo, home: str) -> None:
    """Remove the worktrees a pisces process that no longer runs left under ``home``: the directories there, and
    registrations of worktrees under ``home`` whose directory is already gone."""
    listing = (await git(["worktree", "list", "--porcelain", "-z"], repo.root, check=False)).stdout
    registered = [f[len("worktree "):] for f in listing.decode("utf-8", "surrogateescape").split("\0")
                  if f.startswith("worktree ")]
    stale = await asyncio.to_thread(_stale_dirs, home, registered)
    for directory in stale:
        await remove_worktree(repo, directory)


def _stale_dirs(home: str, registered: list[str]) -> list[str]:
    try:
        names = set(os.listdir(home))
    except OSError:
        names = set()
    prefix = os.path.join(home, "")
    names |= {p[len(prefix):] for p in registered if p.startswith(prefix) and os.sep not in p[len(prefix):]}
    out = []
    for name in sorted(names):
        pid_text = name.split("-", 1)[0]
        if not pid_text.isdigit() or int(pid_text) == os.getpid():
            continue
        try:
            os.kill(int(pid_text), 0)
        except ProcessLookupError:
            out.append(os.path.join(home, name))
        except (PermissionError, OverflowError):
            pass  # alive (someone else's), or not a pid
    return out
