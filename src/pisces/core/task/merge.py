"""Bringing isolated work back: a task's patch applied to the user's working tree, or committed to a branch
``pisces/task/<id>`` and cherry-picked onto the user's HEAD.

A patch is first applied as it is (``git apply``). When its context no longer matches (the user or an earlier
task changed nearby lines), each file it touches is merged three-way (``git merge-file``: the task's starting
content, the user's current file, the task's result). A task's files are written only if every one of them
merges cleanly; otherwise nothing of that task is written, its patch stays in the artifacts directory, and the
report names the task and the conflicting files. ``git apply --3way`` is not used because it refuses files
with unstaged changes, exactly the case that needs it.
"""

from __future__ import annotations

import asyncio
import os
import stat
import tempfile
from dataclasses import dataclass, field

from pisces.core.task.gitrun import FALLBACK_IDENTITY, GitError, git, git_text, repo_lock
from pisces.core.task.isolation import Repo


@dataclass
class ApplyOutcome:
    status: str  # "applied" | "merged" (three-way) | "empty" | "conflict" | "error"
    conflicts: list[str] = field(default_factory=list)
    error: str | None = None


async def apply_patch(repo: Repo, patch: bytes, before: str, after: str) -> ApplyOutcome:
    """Apply one task's patch (``before``/``after``: its snapshot trees) to the user's working tree."""
    if not patch.strip():
        return ApplyOutcome("empty")
    async with repo_lock(repo.common_dir):
        check = await git(["apply", "--check", "--whitespace=nowarn"], repo.root, input=patch, check=False)
        if check.code == 0:
            done = await git(["apply", "--whitespace=nowarn"], repo.root, input=patch, check=False)
            if done.code == 0:
                return ApplyOutcome("applied")
        try:
            return await _three_way(repo.root, before, after)
        except (GitError, OSError) as exc:
            return ApplyOutcome("error", error=str(exc))


async def _three_way(root: str, before: str, after: str) -> ApplyOutcome:
    listing = (await git(["diff", "--name-status", "--no-renames", "-z", before, after], root)).stdout
    parts = listing.decode("utf-8", "surrogateescape").split("\0")
    changes = [(parts[i], parts[i + 1]) for i in range(0, len(parts) - 1, 2) if parts[i]]
    writes: list[tuple[str, bytes | None, bool]] = []  # (path, content or None to delete, executable)
    conflicts: list[str] = []
    for status, path in changes:
        base = await _blob(root, before, path) if status != "A" else None
        theirs = await _blob(root, after, path) if status != "D" else None
        ours = await asyncio.to_thread(_read_file, os.path.join(root, path))
        executable = status != "D" and await _is_executable(root, after, path)
        if status == "T" or ours is _SPECIAL:
            conflicts.append(path)
        elif ours == theirs:
            continue  # already there
        elif status == "A":
            conflicts.append(path) if ours is not None else writes.append((path, theirs, executable))
        elif status == "D":
            conflicts.append(path) if ours != base else writes.append((path, None, False))
        elif ours is None:
            conflicts.append(path)  # the user deleted a file the task changed
        elif ours == base:
            writes.append((path, theirs, executable))
        else:
            merged = await _merge_file(root, ours, base or b"", theirs or b"")
            conflicts.append(path) if merged is None else writes.append((path, merged, executable))
    if conflicts:
        return ApplyOutcome("conflict", conflicts=conflicts)
    await asyncio.to_thread(_write_all, root, writes)
    return ApplyOutcome("merged")


_SPECIAL: bytes = b"\0<special>"  # a symlink or a directory where the patch expects a file


def _read_file(path: str) -> bytes | None:
    try:
        if os.path.islink(path) or os.path.isdir(path):
            return _SPECIAL
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None


async def _blob(root: str, tree: str, path: str) -> bytes:
    return (await git(["cat-file", "blob", f"{tree}:{path}"], root)).stdout


async def _is_executable(root: str, tree: str, path: str) -> bool:
    line = await git_text(["ls-tree", tree, "--", path], root)
    return line.startswith("100755")


async def _merge_file(root: str, ours: bytes, base: bytes, theirs: bytes) -> bytes | None:
    if b"\0" in ours or b"\0" in base or b"\0" in theirs:
        return None  # binary: no line merge
    with tempfile.TemporaryDirectory(prefix="pisces-merge-") as tmp:
        names = []
        for label, data in (("ours", ours), ("base", base), ("theirs", theirs)):
            name = os.path.join(tmp, label)
            await asyncio.to_thread(_write_bytes, name, data)
            names.append(name)
        result = await git(["merge-file", "-p", *names], root, check=False)
    return result.stdout if result.code == 0 else None


def _write_bytes(path: str, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)


def _write_all(root: str, writes: list[tuple[str, bytes | None, bool]]) -> None:
    for path, content, executable in writes:
        full = os.path.join(root, path)
        if content is None:
            try:
                os.unlink(full)
            except FileNotFoundError:
                pass
            continue
        os.makedirs(os.path.dirname(full) or root, exist_ok=True)
        _write_bytes(full, content)
        mode = os.stat(full).st_mode
        if executable:
            os.chmod(full, mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


# -- branch mode ---------------------------------------------------------------------------------------
async def identity_env(root: str) -> dict[str, str] | None:
    """A committer identity for our commits when the user has none configured."""
    probe = await git(["var", "GIT_COMMITTER_IDENT"], root, check=False)
    return None if probe.code == 0 else dict(FALLBACK_IDENTITY)


async def commit_to_branch(repo: Repo, base_head: str, patch: bytes, branch: str, message: str) -> None:
    """Commit the task's delta on top of the baseline HEAD (without the user's pending changes) as ``branch``."""
    index = os.path.join(tempfile.gettempdir(), f"pisces-task-branch-{os.getpid()}-{id(patch)}")
    env = {"GIT_INDEX_FILE": index}
    ident = await identity_env(repo.root)
    try:
        await git(["read-tree", base_head], repo.root, env=env)
        applied = await git(["apply", "--cached", "--whitespace=nowarn"], repo.root, env=env, input=patch,
                            check=False)
        if applied.code != 0:
            await git(["apply", "--cached", "--3way", "--whitespace=nowarn"], repo.root, env=env, input=patch)
        tree = (await git_text(["write-tree"], repo.root, env=env)).strip()
        commit = (await git_text(["commit-tree", tree, "-p", base_head, "-m", message], repo.root,
                                 env={**env, **(ident or {})})).strip()
        async with repo_lock(repo.common_dir):
            await git(["update-ref", f"refs/heads/{branch}", commit], repo.root)
    finally:
        await asyncio.to_thread(_unlink_quietly, index)


def _unlink_quietly(path: str) -> None:
    for p in (path, path + ".lock"):
        try:
            os.unlink(p)
        except OSError:
            pass


@dataclass
class BranchMerge:
    merged: list[str]
    failed: list[str]
    conflict: str | None = None


async def merge_branches(repo: Repo, branches: list[str]) -> BranchMerge:
    """Cherry-pick each branch onto the user's HEAD, in order; stop at the first that does not apply cleanly
    (the cherry-pick is aborted, the branch and the ones after it stay for the user)."""
    merged: list[str] = []
    outcome = BranchMerge(merged, [])
    ident = await identity_env(repo.root)
    async with repo_lock(repo.common_dir):
        for i, branch in enumerate(branches):
            result = await git(["cherry-pick", "--allow-empty", branch], repo.root, env=ident, check=False)
            if result.code != 0:
                await git(["cherry-pick", "--abort"], repo.root, check=False)
                detail = result.stderr.strip() or result.text.strip()
                outcome = BranchMerge(merged, branches[i:], f"{branch}: {detail[:2000]}")
                break
            merged.append(branch)
        for branch in merged:  # merged work is on the user's branch now; the failed ones stay
            await git(["branch", "-D", branch], repo.root, check=False)
    return outcome
