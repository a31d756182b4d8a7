"""Running one manifest item: a fresh clone, pisces headless in it, the patch, the session, the verification.

Nothing here touches the source repository: a path is cloned (its committed state; a directory that is not a
repository is copied and committed first), a URL is cloned and checked out at ``commit``; a ``base_patch`` is
applied and committed on top, so the item's patch never holds it. The run happens in a
private temporary directory that is removed afterwards, and the result carries the patch and the session file
as text, so an executor on another machine can hand them back without a shared filesystem.

Every step is bounded: the clone (10 minutes), the agent (the item's ``timeout``), each verify command (the
item's timeout, at most 10 minutes); a bound that passes kills the step's whole process group.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import sys
import tempfile
import time
from typing import Any

from pisces.core.executor.spec import ItemSpec, RunDefaults
from pisces.core.sandbox import gitsafe

CLONE_TIMEOUT_S = 600.0
VERIFY_TIMEOUT_S = 600.0
OUTPUT_TAIL = 4000  # characters of a failing step's output kept in the result
STATUSES = ("succeeded", "failed", "verify_failed", "timeout", "budget_exceeded", "error", "cancelled")
_GIT_ENV = {"GIT_TERMINAL_PROMPT": "0", "GIT_AUTHOR_NAME": "pisces batch", "GIT_AUTHOR_EMAIL": "pisces@localhost",
            "GIT_COMMITTER_NAME": "pisces batch", "GIT_COMMITTER_EMAIL": "pisces@localhost",
            "GIT_CONFIG_NOSYSTEM": "1"}


class StepFailed(Exception):
    def __init__(self, status: str, text: str) -> None:
        super().__init__(text)
        self.status = status


async def _run(argv: list[str], cwd: str, *, timeout: float, env: dict[str, str] | None = None,
               stdin: bytes | None = None) -> tuple[int | None, bytes, bytes]:
    """(exit code or None on time-out, stdout, stderr) of ``argv``, its process group killed at ``timeout``."""
    proc = await asyncio.create_subprocess_exec(
        *argv, cwd=cwd, env=env, start_new_session=True,
        stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        out, err = await asyncio.wait_for(proc.communicate(stdin), timeout)
    except asyncio.TimeoutError:
        _kill_group(proc.pid)
        await proc.wait()
        return None, b"", b""
    except asyncio.CancelledError:
        _kill_group(proc.pid)
        raise
    return proc.returncode, out, err


def _kill_group(pid: int) -> None:
    """Kill the process group ``pid`` leads and, first, the groups of all its descendants: pisces runs each
    command of its bash tool in a session of its own, which a kill of the item's group alone would leave
    running. The group is stopped while its tree is read, so nothing new is started meanwhile (without /proc,
    as on macOS, only the group is killed)."""
    try:
        os.killpg(pid, signal.SIGSTOP)
    except (ProcessLookupError, PermissionError):
        return
    own = os.getpgrp()
    for group in _descendant_groups(pid) - {pid, own}:
        try:
            os.killpg(group, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    try:
        os.killpg(pid, signal.SIGKILL)
        os.killpg(pid, signal.SIGCONT)  # a stopped process dies of SIGKILL anyway; this is for the rest of a group
    except (ProcessLookupError, PermissionError):
        pass


def _descendant_groups(pid: int) -> set[int]:
    """The process groups of every descendant of ``pid`` (read from /proc; empty where there is none)."""
    children: dict[int, list[int]] = {}
    groups: dict[int, int] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return set()
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                data = f.read().decode("utf-8", "replace")
        except OSError:
            continue
        fields = data[data.rindex(")") + 2:].split()
        children.setdefault(int(fields[1]), []).append(int(name))
        groups[int(name)] = int(fields[2])
    out: set[int] = set()
    todo = list(children.get(pid, []))
    while todo:
        child = todo.pop()
        out.add(groups[child])
        todo.extend(children.get(child, []))
    return out


def _git_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(_GIT_ENV)
    return env


async def _git(args: list[str], cwd: str, timeout: float = CLONE_TIMEOUT_S, stdin: bytes | None = None) -> bytes:
    """``git args`` in ``cwd`` with every repository-configured program neutralised (``gitsafe``: the one list
    the task tool uses too)."""
    try:
        env = await asyncio.to_thread(gitsafe.safe_env, cwd, _git_env())
    except gitsafe.UnsafeRepository as exc:
        raise StepFailed("error", str(exc)) from None
    code, out, err = await _run(["git", *gitsafe.safe_args(args)], cwd, timeout=timeout, env=env, stdin=stdin)
    if code is None:
        raise StepFailed("error", f"git {args[0]} did not finish within {timeout:.0f} s")
    if code != 0:
        raise StepFailed("error", f"git {' '.join(args[:2])} failed (exit {code}): "
                                  f"{err.decode('utf-8', 'replace').strip()[-OUTPUT_TAIL:]}")
    return out


async def prepare_checkout(spec: ItemSpec, into: str) -> str:
    """A fresh working copy of the item's repository in ``into``/repo; returns the baseline commit."""
    repo = os.path.join(into, "repo")
    source = spec.repo
    if not spec.is_url and not os.path.exists(os.path.join(source, ".git")):
        await asyncio.to_thread(shutil.copytree, source, repo, symlinks=True)
        await _git(["init", "-q"], repo)
        await _git(["add", "-A"], repo)
        await _git(["commit", "-q", "--allow-empty", "-m", "pisces batch: the directory as given"], repo)
    else:
        await _git(["clone", "-q", "--no-hardlinks", source, repo], into)
        if spec.commit:
            await _git(["checkout", "-q", "--detach", spec.commit], repo)
    if spec.base_patch:  # the caller's uncommitted work: part of the baseline, never of the item's patch
        await _git(["apply", "--whitespace=nowarn", "--binary", "-"], repo,
                   stdin=spec.base_patch.encode("utf-8", "surrogateescape"))
        await _git(["add", "-A"], repo)
        await _git(["commit", "-q", "--allow-empty", "--no-verify", "-m", "pisces: the caller's uncommitted changes"],
                   repo)
    return (await _git(["rev-parse", "HEAD"], repo)).decode().strip()


def _agent_dir(defaults: RunDefaults, budget: dict[str, Any] | None, into: str) -> str | None:
    """A private agent dir for the item when it has a budget: the user's files (auth, models, extensions...)
    linked, and settings.json with ``task.budget`` added. None: the user's own agent dir as it is."""
    if not budget:
        return None
    user = defaults.agent_dir
    if user is None:
        from pisces.core.config.paths import agent_dir  # noqa: PLC0415 - only items with a budget need it

        user = agent_dir()
    own = os.path.join(into, "agent")
    os.makedirs(own, mode=0o700)
    settings: dict[str, Any] = {}
    if os.path.isdir(user):
        for name in os.listdir(user):
            if name in ("settings.json", "sessions"):
                continue
            os.symlink(os.path.join(user, name), os.path.join(own, name))
        try:
            with open(os.path.join(user, "settings.json"), encoding="utf-8") as f:
                loaded = json.load(f)
            settings = loaded if isinstance(loaded, dict) else {}
        except (OSError, ValueError):
            settings = {}
    found = settings.get("task")
    task: dict[str, Any] = dict(found) if isinstance(found, dict) else {}
    task["budget"] = {"abortOnExceeded": True, **budget}
    settings["task"] = task
    fd = os.open(os.path.join(own, "settings.json"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(settings, f)
    return own


def agent_argv(spec: ItemSpec, defaults: RunDefaults, session_dir: str) -> list[str]:
    argv = [defaults.python or sys.executable, "-m", "pisces", "--mode", "json", "--session-dir", session_dir]
    for flag, value in (("--provider", spec.provider or defaults.provider), ("--model", spec.model or defaults.model),
                        ("--thinking", spec.thinking or defaults.thinking), ("--tools", spec.tools or defaults.tools),
                        ("--faux-script", defaults.faux_script), ("--approval-mode", defaults.approval_mode),
                        ("--sandbox", defaults.sandbox)):
        if value:
            argv += [flag, value]
    argv.append(spec.prompt)
    return argv


class _Usage:
    def __init__(self) -> None:
        self.usage = {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0}
        self.cost = 0.0
        self.turns = 0
        self.tool_calls = 0
        self.budget: dict[str, Any] | None = None
        self.last_text = ""

    def feed(self, line: bytes) -> None:
        if line.startswith(b'{"type":"message_update"') or not line.strip():
            return  # the bulk of a stream: nothing to count in it
        try:
            event = json.loads(line)
        except ValueError:
            return
        kind = event.get("type") if isinstance(event, dict) else None
        if kind == "message_end":
            message = event.get("message") or {}
            if message.get("role") != "assistant":
                return
            self.turns += 1
            usage = message.get("usage") or {}
            for key in self.usage:
                value = usage.get(key)
                if isinstance(value, (int, float)):
                    self.usage[key] += int(value)
            cost = (usage.get("cost") or {}).get("total")
            if isinstance(cost, (int, float)):
                self.cost += float(cost)
            texts = [b.get("text", "") for b in message.get("content") or [] if b.get("type") == "text"]
            if texts:
                self.last_text = "".join(texts)
        elif kind == "tool_execution_start":
            self.tool_calls += 1
        elif kind == "budget_exceeded" and self.budget is None:
            snapshot = event.get("snapshot") if isinstance(event.get("snapshot"), dict) else {}
            self.budget = {"reason": snapshot.get("reason"), "limit": event.get("budget"),
                           "spent": event.get("spent"), "scope": event.get("scope")}


async def _run_agent(spec: ItemSpec, defaults: RunDefaults, repo: str, into: str,
                     timeout: float) -> tuple[int | None, _Usage, str, str | None]:
    session_dir = os.path.join(into, "sessions")
    os.makedirs(session_dir)
    env = dict(os.environ)
    env.update(spec.env)
    own = _agent_dir(defaults, spec.budget or defaults.budget, into)
    if own is not None:
        env["PISCES_CODING_AGENT_DIR"] = own
    proc = await asyncio.create_subprocess_exec(
        *agent_argv(spec, defaults, session_dir), cwd=repo, env=env, start_new_session=True,
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        limit=256 * 1024 * 1024)
    usage = _Usage()
    err_tail = bytearray()

    async def read_out() -> None:
        assert proc.stdout is not None
        async for line in proc.stdout:
            usage.feed(line)

    async def read_err() -> None:
        assert proc.stderr is not None
        while chunk := await proc.stderr.read(65536):
            err_tail.extend(chunk)
            del err_tail[:-OUTPUT_TAIL]

    readers = asyncio.gather(read_out(), read_err())
    try:
        await asyncio.wait_for(asyncio.shield(readers), timeout)
        code: int | None = await proc.wait()
    except asyncio.TimeoutError:
        _kill_group(proc.pid)
        await proc.wait()
        readers.cancel()
        readers.add_done_callback(_consume)
        code = None
    except asyncio.CancelledError:
        _kill_group(proc.pid)
        readers.cancel()
        readers.add_done_callback(_consume)
        raise
    session_text = None
    for root, _dirs, files in os.walk(session_dir):
        for name in sorted(files):
            if name.endswith(".jsonl"):
                with open(os.path.join(root, name), encoding="utf-8", errors="replace") as f:
                    session_text = f.read()
    return code, usage, err_tail.decode("utf-8", "replace"), session_text


def _consume(future: Any) -> None:
    """Take a cancelled gather's outcome, so asyncio does not report it as never retrieved."""
    if not future.cancelled():
        future.exception()


async def _verify(commands: list[str], repo: str, timeout: float) -> list[dict[str, Any]]:
    results = []
    for command in commands:
        started = time.monotonic()
        code, out, err = await _run(["bash", "-c", command], repo, timeout=min(timeout, VERIFY_TIMEOUT_S))
        text = (out + err).decode("utf-8", "replace")
        results.append({"command": command, "exitCode": code, "passed": code == 0, "timedOut": code is None,
                        "durationMs": int((time.monotonic() - started) * 1000), "output": text[-OUTPUT_TAIL:]})
    return results


async def run_item(spec: ItemSpec, defaults: RunDefaults) -> dict[str, Any]:
    """The result line of ``spec`` (see docs/batch.md), with ``patch_text`` and ``session_text`` as data."""
    started = time.monotonic()
    timeout = spec.timeout or defaults.timeout
    result: dict[str, Any] = {"id": spec.id, "status": "error", "exit_code": None, "patch": None,
                              "session_file": None, "usage": None, "cost": 0.0, "verification": None,
                              "duration_ms": 0, "error": None, "patch_text": "", "session_text": None}
    into = tempfile.mkdtemp(prefix=f"pisces-batch-{spec.id[:40]}-")
    try:
        base = await prepare_checkout(spec, into)
        result["clone_ms"] = int((time.monotonic() - started) * 1000)
        repo = os.path.join(into, "repo")
        agent_started = time.monotonic()
        code, usage, err_tail, session_text = await _run_agent(spec, defaults, repo, into, timeout)
        result["agent_ms"] = int((time.monotonic() - agent_started) * 1000)
        result.update(exit_code=code, usage=usage.usage, cost=round(usage.cost, 6), session_text=session_text,
                      turns=usage.turns, tool_calls=usage.tool_calls, final_text=usage.last_text[-OUTPUT_TAIL:])
        await _git(["add", "-A"], repo)
        # surrogateescape: a text file in another encoding comes back byte for byte (encode it the same way)
        result["patch_text"] = (await _git(["diff", "--cached", "--binary", base], repo)).decode(
            "utf-8", "surrogateescape")
        result["files_changed"] = len(
            [line for line in (await _git(["diff", "--cached", "--name-only", base], repo)).decode().splitlines()
             if line])
        if code is None:
            result.update(status="timeout", error=f"the agent did not finish within {timeout:g} s")
        elif usage.budget is not None:
            result.update(status="budget_exceeded", budget=usage.budget,
                          error=f"budget exceeded: {usage.budget['reason']} (limit {usage.budget['limit']}, "
                                f"spent {usage.budget['spent']})")
        elif code != 0:
            result.update(status="failed", error=err_tail.strip()[-OUTPUT_TAIL:] or f"pisces exited with {code}")
        else:
            result["status"] = "succeeded"
        if spec.verify and result["status"] == "succeeded":
            checks = await _verify(spec.verify, repo, timeout)
            result["verification"] = {"passed": all(c["passed"] for c in checks), "commands": checks}
            if not result["verification"]["passed"]:
                failed = next(c for c in checks if not c["passed"])
                result.update(status="verify_failed", error=f"verify failed: {failed['command']}")
    except StepFailed as exc:
        result.update(status=exc.status, error=str(exc))
    except OSError as exc:
        result.update(status="error", error=f"{type(exc).__name__}: {exc}")
    finally:
        result["duration_ms"] = int((time.monotonic() - started) * 1000)
        await asyncio.to_thread(shutil.rmtree, into, True)
    return result


def run_item_sync(spec: ItemSpec, defaults: RunDefaults) -> dict[str, Any]:
    """``run_item`` for a worker that has no event loop of its own (a Ray task)."""
    return asyncio.run(run_item(spec, defaults))
