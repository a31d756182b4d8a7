"""An isolated subagent as a batch item: with ``task.executor`` set to ``local`` or ``ray``, an isolated task is
submitted to the batch executor (``core/executor``: ``submit(ItemSpec) -> result line``) instead of running in
this process, and its result line becomes the task's result.

The manifest line of a task: ``id`` (the allocated task id), ``repo`` (the caller's repository root, or
``task.executorOptions.repoUrl`` for Ray workers that cannot see this filesystem), ``commit`` (the caller's
HEAD), ``base_patch`` (the caller's uncommitted work: staged, unstaged and untracked files that are not ignored,
as one binary patch from HEAD to a snapshot of the working tree; the item applies and commits it as its
baseline, so the item's patch holds only the subagent's changes), ``prompt`` (the task's full text), ``model``
and ``thinking`` (as an in-process subagent would get them), ``tools`` (the agent's, without ``task`` and
``submit_result``), ``budget`` (what is left of the session's budget), ``verify`` (the task's verification
commands) and ``timeout``.

Why a patch and not a commit object (``git stash create``): a commit that no ref names does not travel through
``git clone`` of a URL, and writing a ref would modify the caller's repository; a patch is plain data in the
line, so the same line works for a path, a URL and a Ray worker without a shared filesystem (the URL must have
the caller's HEAD). Not carried: changes inside nested repositories (as for worktrees).

Back from the result line: the patch (written to ``<artifacts>/<id>.patch`` and applied to the caller's tree by
the same code as a worktree's patch, ``tool._apply_patches`` / ``merge.apply_patch``, with the snapshot trees
rebuilt in the caller's repository so a three-way merge works), the session file (``<id>.session.jsonl``,
named by ``sessionFile``), usage and cost (added to the caller's budget through the task hooks, and to the
task's ``usage``), the verification (as the task's ``verification`` and its ``subagent_verification_*``
events), and ``status``/``error`` (``exitCode`` 0 only for ``succeeded``).

Headless: the item runs ``pisces --mode json`` with ``--approval-mode`` (``task.executorOptions.approvalMode``,
default ``yolo``) and ``--sandbox`` (default ``workspace-write``: its commands are confined to its clone). Nobody
can be asked there: what would need a person (known-dangerous commands, ``prompt`` rules, running outside the
sandbox) is denied, and no approval request reaches the caller's person. That is why it is opt-in
(``task.executor``; a project's ``task`` settings count only in a trusted project). Verification commands are
still approved here, through the caller's gate, before the item is submitted. Non-isolated subagents stay in
process: they work in the caller's own tree, which a clone elsewhere cannot change, and under the caller's
approval gate.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import tempfile
import time
import uuid
from dataclasses import dataclass
from typing import Any

from pisces.ai.models import clamp_thinking_level
from pisces.core.executor import Executor, make_executor
from pisces.core.executor.spec import ItemSpec, RunDefaults
from pisces.core.task import events, isolation, merge, verify
from pisces.core.task.config import EXECUTORS, TaskConfig
from pisces.core.task.executor import base_result, resolve_model, zero_usage
from pisces.core.task.gitrun import git, git_text
from pisces.core.task.hooks import UsageReport
from pisces.core.task.progress import new_progress

DEFAULT_TIMEOUT_S = 1800.0
HEADLESS_TOOLS_DROPPED = ("task", "submit_result")  # a headless item has neither (no caller to delegate for)
_ID = re.compile(r"[^A-Za-z0-9._-]")
_RAY: dict[str | None, Executor] = {}  # one Ray connection per address for the life of the process


@dataclass
class Options:
    backend: str  # local | ray
    ray_address: str | None = None
    repo_url: str | None = None
    timeout: float = DEFAULT_TIMEOUT_S
    approval_mode: str = "yolo"
    sandbox: str = "workspace-write"


def options(cfg: TaskConfig) -> Options | None:
    """The headless options of ``task.executor``/``task.executorOptions``; None: subagents run in process.
    A bad value raises ValueError with a sentence naming the setting."""
    name = cfg.executor
    if name not in EXECUTORS:
        raise ValueError(f"task.executor must be one of {', '.join(EXECUTORS)} (got {name!r})")
    if name == "inprocess":
        return None
    raw = cfg.executor_options or {}
    opts = Options(backend=name)
    for key, attr in (("rayAddress", "ray_address"), ("repoUrl", "repo_url")):
        value = raw.get(key)
        if value is not None and not isinstance(value, str):
            raise ValueError(f"task.executorOptions.{key} must be a string")
        setattr(opts, attr, value or None)
    timeout = raw.get("timeoutSec")
    if timeout is not None:
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
            raise ValueError("task.executorOptions.timeoutSec must be a positive number of seconds")
        opts.timeout = float(timeout)
    mode = raw.get("approvalMode", opts.approval_mode)
    if mode not in ("yolo", "write", "always-ask"):
        raise ValueError("task.executorOptions.approvalMode must be yolo, write or always-ask")
    opts.approval_mode = mode
    sandbox = raw.get("sandbox", opts.sandbox)
    if sandbox not in ("read-only", "workspace-write", "off"):
        raise ValueError("task.executorOptions.sandbox must be read-only, workspace-write or off")
    opts.sandbox = sandbox
    return opts


class Headless:
    """The batch executor of one task call and the caller's snapshot its items start from."""

    def __init__(self, opts: Options, parallel: int) -> None:
        self.opts = opts
        if opts.backend == "ray":
            executor = _RAY.get(opts.ray_address)
            if executor is None:
                # a cluster started here gets this machine's CPUs at most (one item per CPU)
                slots = parallel if opts.ray_address else max(1, min(parallel, os.cpu_count() or 1))
                executor = _RAY[opts.ray_address] = make_executor("ray", parallel=slots,
                                                                  ray_address=opts.ray_address)
            self.executor = executor
        else:
            self.executor = make_executor("local", parallel=parallel)
        self._base: tuple[str, str, str] | None = None  # (head, snapshot tree, base patch)
        self._lock = asyncio.Lock()

    async def close(self) -> None:
        if self.opts.backend != "ray":  # a Ray connection is kept for the next call
            await self.executor.close()

    async def base(self, repo: isolation.Repo, baseline: isolation.Baseline) -> tuple[str, str, str]:
        """(HEAD, the tree of the caller's working tree, the patch from HEAD to it), taken once per call."""
        async with self._lock:
            if self._base is None:
                tree = await isolation.snapshot(repo.root)
                head_tree = (await git_text(["rev-parse", f"{baseline.head}^{{tree}}"], repo.root)).strip()
                patch = await isolation.tree_diff(repo.root, head_tree, tree, exclude=baseline.nested_repos)
                self._base = (baseline.head, tree, patch.decode("utf-8", "surrogateescape"))
            return self._base


async def run(batch: Any, item: Any) -> dict[str, Any]:
    """One isolated task through the batch executor (the spawn gate has already let it start)."""
    headless: Headless = batch.headless
    run_ = batch.subagent(item, task_id=item.id, raw_id=item.raw_id, task=item.task, cwd=batch.host.cwd,
                          worktree=None)
    progress = new_progress(item.index, item.id, batch.agent, item.task, item.assignment, item.description,
                            status="running")
    report = batch.progress(item.index)
    batch.emit(events.subagent_start(item.id, batch.agent.name, True))
    result: dict[str, Any] | None = None
    try:
        result = await _submit(batch, headless, item, run_)
        return result
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # noqa: BLE001 - a failed submission fails this task, never the call
        message = f"Headless subagent failed: {exc or type(exc).__name__}"
        result = base_result(run_, exitCode=1, output="", stderr=message, truncated=False, durationMs=0, tokens=0,
                             error=message)
        return result
    finally:
        code = result["exitCode"] if result is not None else 1
        progress["status"] = ("aborted" if result is not None and result.get("aborted")
                              else "completed" if code == 0 else "failed")
        report(progress, True)
        batch.emit(events.subagent_end(item.id, batch.agent.name, code,
                                       result.get("verification") if result is not None else None))


async def _submit(batch: Any, headless: Headless, item: Any, run_: Any) -> dict[str, Any]:
    started = time.time()
    repo, baseline, resolved = batch.repo, batch.baseline, batch.verification
    head, before, base_patch = await headless.base(repo, baseline)
    commands = resolved.commands if resolved.requested else []
    gate = batch.command_gate()
    for command in commands:  # approved here, by the caller's gate, before anything runs elsewhere
        refused = await gate(command["command"]) if gate is not None else None
        if refused is not None:
            message = f"Verification command not approved: {command['name']}: {refused}"
            return base_result(run_, exitCode=1, output="", stderr=message, truncated=False, durationMs=0,
                               tokens=0, error=message)
    spec, defaults = _item(batch, headless, item, run_, head, base_patch, commands)
    task = asyncio.ensure_future(headless.executor.submit(spec, defaults))
    remove = batch.signal.add_listener(task.cancel)
    try:
        line = await task
    except asyncio.CancelledError:
        if not batch.signal.aborted:
            raise
        reason = batch.signal.reason or "Cancelled by caller"
        return base_result(run_, exitCode=1, output="", stderr=reason, truncated=False,
                           durationMs=int((time.time() - started) * 1000), tokens=0, error=reason, aborted=True,
                           abortReason=reason)
    finally:
        remove()
    return await _result(batch, headless, item, run_, line, before, commands, started)


def _item(batch: Any, headless: Headless, item: Any, run_: Any, head: str, base_patch: str,
          commands: list[dict[str, Any]]) -> tuple[ItemSpec, RunDefaults]:
    host, agent = batch.host, batch.agent
    model, pattern_level, _ = resolve_model(host, run_.model_override or agent.model)
    level = pattern_level or agent.thinking_level or host.get_thinking_level()
    if model is not None and getattr(model, "provider", "") != "unknown":
        level = clamp_thinking_level(model, level)
    tools = None
    if agent.tools is not None:
        tools = ",".join(t for t in agent.tools if t not in HEADLESS_TOOLS_DROPPED)
    remaining = host.hooks.remaining_budget() if host.hooks.remaining_budget is not None else None
    spec = ItemSpec(id=_ID.sub("_", item.id)[:128] or "task", repo=headless.opts.repo_url or batch.repo.root,
                    commit=head, base_patch=base_patch or None, prompt=item.task,
                    provider=getattr(model, "provider", None), model=getattr(model, "id", None), thinking=level,
                    tools=tools, budget=remaining or None, verify=[c["command"] for c in commands],
                    timeout=headless.opts.timeout)
    defaults = RunDefaults(approval_mode=headless.opts.approval_mode, sandbox=headless.opts.sandbox,
                           timeout=headless.opts.timeout, agent_dir=host.agent_dir)
    if getattr(model, "provider", None) == "faux":
        defaults.faux_script = _faux_script(run_, batch.artifacts_dir)
    return spec, defaults


def _faux_script(run_: Any, artifacts_dir: str) -> str:
    """The faux model's queue of this subagent (its allocated id, task id or agent name under ``subagents``),
    moved into a script file of its own for the item's process."""
    from pisces.ai.providers import faux  # noqa: PLC0415 - only a faux-model session scripts its subagents

    found = faux.SCRIPT.subagent_queue(tuple(dict.fromkeys([run_.task_id, run_.raw_id, run_.agent.name])))
    responses: list[Any] = []
    if found is not None:
        responses = list(found[1])
        found[1].clear()
    if not all(isinstance(r, dict) for r in responses):
        raise ValueError("faux responses given as functions cannot be sent to a headless subagent")
    os.makedirs(artifacts_dir, exist_ok=True)
    path = os.path.join(artifacts_dir, f"{run_.task_id}.faux.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"responses": responses}, f)
    return path


async def _result(batch: Any, headless: Headless, item: Any, run_: Any, line: dict[str, Any], before: str,
                  commands: list[dict[str, Any]], started: float) -> dict[str, Any]:
    status = line.get("status")
    usage = _usage(line)
    output = line.get("final_text") or ""
    error = line.get("error")
    code = 0 if status == "succeeded" else 1
    result = base_result(run_, exitCode=code, output=output, stderr=error or "", truncated=False,
                         durationMs=int((time.time() - started) * 1000), tokens=usage["totalTokens"],
                         modelOverride=run_.model_override, error=error if code != 0 else None, usage=usage)
    result["executor"] = headless.opts.backend
    result["itemStatus"] = status
    for _ in range(int(line.get("tool_calls") or 0)):
        batch.host.hooks.report_tool_call("headless")
    batch.host.hooks.report_usage(UsageReport(id=item.id, agent=batch.agent.name, usage=usage, total=usage,
                                              depth=batch.host.depth + 1))
    artifacts = batch.artifacts_dir
    await asyncio.to_thread(os.makedirs, artifacts, exist_ok=True)
    result["outputPath"] = await asyncio.to_thread(_write, os.path.join(artifacts, f"{item.id}.md"),
                                                   output.encode())
    result["outputMeta"] = {"lineCount": output.count("\n") + 1, "charCount": len(output)}
    if line.get("session_text"):
        result["sessionFile"] = await asyncio.to_thread(
            _write, os.path.join(artifacts, f"{item.id}.session.jsonl"), line["session_text"].encode())
    keep_patch = True
    if commands and line.get("verification") is not None:
        keep_patch = await _verification(batch, item, result, line["verification"], commands)
    if code == 0 or (keep_patch and (result.get("verification") or {}).get("status") == "failed"):
        await _patch(batch, item, result, line.get("patch_text") or "", before)
    return result


def _usage(line: dict[str, Any]) -> dict[str, Any]:
    usage = zero_usage()
    for key, value in (line.get("usage") or {}).items():
        if key in usage and isinstance(value, (int, float)):
            usage[key] = int(value)
    cost = line.get("cost")
    usage["cost"]["total"] = float(cost) if isinstance(cost, (int, float)) else 0.0
    return usage


async def _verification(batch: Any, item: Any, result: dict[str, Any], checked: dict[str, Any],
                  commands: list[dict[str, Any]]) -> bool:
    """The item's verification as the task's (one attempt, its events emitted now); whether a failure keeps the
    patch. The item ran every command as required, within the item's timeout."""
    resolved = batch.verification
    batch.emit(events.verification_start(item.id, 1, resolved.profile))
    rows: list[dict[str, Any]] = []
    for index, (command, ran) in enumerate(zip(commands, checked.get("commands") or [], strict=False)):
        batch.emit(events.verification_command_start(item.id, 1, command["name"]))
        code = 124 if ran.get("timedOut") else int(ran.get("exitCode") or 0)
        row: dict[str, Any] = {"name": command["name"], "command": command["command"], "exitCode": code,
                               "durationMs": int(ran.get("durationMs") or 0), "timedOut": bool(ran.get("timedOut"))}
        text = (ran.get("output") or "").strip()
        log = None
        if text:
            name = f"{item.id}.verify.a1-{index + 1}-{verify.slug(command['name'])}.log"
            log = os.path.join(batch.artifacts_dir, name)
            await asyncio.to_thread(_write, log, (ran.get("output") or "").encode())
            row["artifactPath"] = log
            row["outputPreview"] = "\n".join(text.split("\n")[-20:])[-4000:]
        rows.append(row)
        batch.emit(events.verification_command_end(item.id, 1, command["name"], code, row["durationMs"], log))
    status = "passed" if checked.get("passed") else "failed"
    batch.emit(events.verification_end(item.id, 1, status))
    now = int(time.time() * 1000)
    attempt: dict[str, Any] = {"attempt": 1, "status": status, "startedAt": now, "endedAt": now, "commandResults": rows}
    if status == "failed":
        attempt["error"] = "One or more verification commands failed."
    result["verification"] = resolved.result(status, [attempt], 0)
    if status == "passed":
        return True
    message = verify.failure_message(attempt)
    if resolved.on_failure == "retry_once":
        message += " (a headless subagent is not repaired: retry_once acts as return_failure)"
    result.update(exitCode=1, stderr=message, error=message)
    return resolved.on_failure != "discard_patch"


async def _patch(batch: Any, item: Any, result: dict[str, Any], text: str, before: str) -> None:
    """The item's patch to ``<artifacts>/<id>.patch``, with the snapshot trees (``before``, and ``after`` built
    from it in the caller's repository) that the tool's apply step merges three-way with; branch mode commits it."""
    patch = text.encode("utf-8", "surrogateescape")
    path = await asyncio.to_thread(_write, os.path.join(batch.artifacts_dir, f"{item.id}.patch"), patch)
    result["patchPath"] = path
    try:
        after = await _tree_after(batch.repo.root, before, patch) if patch.strip() else before
    except Exception as exc:  # noqa: BLE001 - the patch stays in the artifacts, named by the error
        result["error"] = f"Patch capture failed: {exc}"
        return
    result["_trees"] = (before, after)
    if batch.cfg.merge_mode == "branch" and result["exitCode"] == 0 and patch.strip():
        branch = f"pisces/task/{isolation.safe_name(item.id)}"
        try:
            await merge.commit_to_branch(batch.repo, batch.baseline.head, patch, branch, item.description or item.id)
        except Exception as exc:  # noqa: BLE001
            result["error"] = f"Merge failed: {exc}"
            return
        result["branchName"] = branch


async def _tree_after(root: str, before: str, patch: bytes) -> str:
    """The tree ``before`` with ``patch`` applied, written through a temporary index (nothing of the caller's
    index or files is touched; the new blobs go into the repository's object store)."""
    index = os.path.join(tempfile.gettempdir(), f"pisces-task-index-{uuid.uuid4().hex}")
    env = {"GIT_INDEX_FILE": index}
    try:
        await git(["read-tree", before], root, env=env)
        await git(["apply", "--cached", "--whitespace=nowarn", "--binary", "-"], root, env=env, input=patch)
        return (await git_text(["write-tree"], root, env=env)).strip()
    finally:
        for p in (index, index + ".lock"):
            try:
                os.unlink(p)
            except OSError:
                pass


def _write(path: str, data: bytes) -> str:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
    return path


__all__ = ["Headless", "Options", "options", "run"]
