"""Running git for the task tool: a subprocess per call (never on the event loop's thread), abortable, with a
per-repository lock for the operations that change a repository's shared state (worktrees, refs, the user's
working tree), so that parallel tasks never race on ``.git/config.lock`` or ``.git/worktrees``. Every call
ignores the programs the repository's configuration names (hooks, fsmonitor, filters, drivers, pagers, ...:
``pisces.core.sandbox.gitsafe``).
"""

from __future__ import annotations

import asyncio
import os
import signal as _signal
from dataclasses import dataclass
from typing import Any

from pisces.ai.abort import AbortSignal
from pisces.core.sandbox import gitsafe

# Our own commits must never stop on a signing prompt, a hook or an automatic gc.
_CONFIG = ["-c", "commit.gpgsign=false", "-c", "gc.auto=0", "-c", "core.hooksPath=/dev/null",
           "-c", "core.quotePath=false", "-c", "advice.detachedHead=false"]
_DROP_ENV = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY", "GIT_PREFIX",
             "GIT_COMMON_DIR", "GIT_NAMESPACE")
FALLBACK_IDENTITY = {"GIT_AUTHOR_NAME": "pisces", "GIT_AUTHOR_EMAIL": "pisces@localhost",
                     "GIT_COMMITTER_NAME": "pisces", "GIT_COMMITTER_EMAIL": "pisces@localhost"}


class GitError(Exception):
    def __init__(self, args: list[str], code: int, stderr: str) -> None:
        self.args_list = args
        self.code = code
        self.stderr = stderr.strip()
        super().__init__(f"git {' '.join(args[:3])} failed (exit {code}): {self.stderr[:2000]}")


class GitAborted(Exception):
    pass


@dataclass
class GitResult:
    code: int
    stdout: bytes
    stderr: str

    @property
    def text(self) -> str:
        return self.stdout.decode("utf-8", "replace")


def _env(extra: dict[str, str] | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _DROP_ENV}
    env.update(LC_ALL="C", GIT_TERMINAL_PROMPT="0", GIT_OPTIONAL_LOCKS="0", GIT_EDITOR="true")
    if extra:
        env.update(extra)
    return env


async def git(args: list[str], cwd: str, *, input: bytes | None = None, env: dict[str, str] | None = None,
              check: bool = True, signal: AbortSignal | None = None) -> GitResult:
    """``git <args>`` in ``cwd``. ``check`` raises GitError on a non-zero exit; an abort of ``signal`` kills the
    process and raises GitAborted."""
    if signal is not None and signal.aborted:
        raise GitAborted()
    try:
        safe = await asyncio.to_thread(gitsafe.safe_env, cwd, _env(env))
    except gitsafe.UnsafeRepository as exc:
        raise GitError(args, 128, str(exc)) from None
    proc = await asyncio.create_subprocess_exec(
        "git", *_CONFIG, *gitsafe.safe_args(args), cwd=cwd, env=safe, start_new_session=True,
        stdin=asyncio.subprocess.PIPE if input is not None else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)

    def kill() -> None:
        try:
            os.killpg(proc.pid, _signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    remove = signal.add_listener(kill) if signal is not None else None
    try:
        out, err = await proc.communicate(input)
    except asyncio.CancelledError:
        kill()
        raise
    finally:
        if remove is not None:
            remove()
    if signal is not None and signal.aborted:
        raise GitAborted()
    result = GitResult(proc.returncode or 0, out, err.decode("utf-8", "replace"))
    if check and result.code != 0:
        raise GitError(args, result.code, result.stderr)
    return result


async def git_text(args: list[str], cwd: str, **kwargs: Any) -> str:
    return (await git(args, cwd, **kwargs)).text


# -- one lock per repository ---------------------------------------------------------------------------
_locks: dict[tuple[int, str], asyncio.Lock] = {}


def repo_lock(common_dir: str) -> asyncio.Lock:
    """The lock of the repository whose shared git directory is ``common_dir`` (one per event loop)."""
    key = (id(asyncio.get_running_loop()), os.path.realpath(common_dir))
    lock = _locks.get(key)
    if lock is None:
        if len(_locks) > 256:  # loops of finished test runs
            _locks.clear()
        lock = _locks[key] = asyncio.Lock()
    return lock


async def git_retrying(args: list[str], cwd: str, **kwargs: Any) -> GitResult:
    """``git`` again (up to three tries) when another process holds one of the repository's lock files."""
    for attempt in range(3):
        try:
            return await git(args, cwd, **kwargs)
        except GitError as exc:
            if attempt == 2 or ".lock" not in exc.stderr:
                raise
            await asyncio.sleep(0.2 * (attempt + 1))
    raise AssertionError("unreachable")
