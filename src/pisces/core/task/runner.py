"""One task of a batch, start to end: the spawn gate, the worktree (when isolated), the subagent, verification
and its repair, the patch or branch, cleanup, and the ``subagent_*`` events in seed 000's order:

    subagent_start{id, agent, isolated}
      [verification requested, subagent exited 0]
      subagent_verification_start{id, attempt: 1, profile?}
        (subagent_verification_command_start, subagent_verification_command_end) per command
      subagent_verification_end{id, attempt: 1, status}
      [failed, onFailure retry_once: the repair subagent, in the same worktree]
      subagent_start{id: "<id>-repair", agent, isolated: true} ... subagent_end{id: "<id>-repair", ...}
      [repair exited 0] the same four kinds again with attempt: 2
    subagent_end{id, agent, exitCode, verification?}     (after the worktree is removed)

A spawn the gate refuses, or whose worktree cannot be set up, emits nothing: every ``subagent_start`` has its
``subagent_end``.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from typing import Any

from pisces.ai.abort import AbortSignal
from pisces.core.executor.subagent import LocalSubagentExecutor, SubagentSpec
from pisces.core.task import events, headless, isolation, merge, prompts, verify
from pisces.core.task.agents import AgentDefinition
from pisces.core.task.config import TaskConfig
from pisces.core.task.executor import SubagentRun, add_usage, base_result, run_subagent, zero_usage
from pisces.core.task.hooks import SpawnRequest
from pisces.core.task.progress import ProgressBoard
from pisces.core.task.task_host import TaskHost


@dataclass
class TaskItem:
    index: int
    id: str  # allocated
    raw_id: str
    task: str  # the full first message (context + assignment)
    assignment: str
    description: str


@dataclass
class Batch:
    host: TaskHost
    cfg: TaskConfig
    agent: AgentDefinition
    verification: verify.Resolved
    isolated: bool
    repo: isolation.Repo | None
    baseline: isolation.Baseline | None
    worktrees_home: str | None
    artifacts_dir: str
    output_schema: Any
    model_override: list[str] | None
    signal: AbortSignal
    board: ProgressBoard
    shell: tuple[str, list[str]]
    shell_env: dict[str, str]
    tool_call_id: str = ""  # the task call's id: a verification command's approval request names it
    # where subagents run: the executor interface batch items use too (core/executor/subagent.py)
    executor: Any = None
    # task.executor local or ray: isolated tasks run as batch items there (core/task/headless.py)
    headless: Any = None

    def __post_init__(self) -> None:
        if self.executor is None:
            self.executor = LocalSubagentExecutor(run_subagent)

    async def submit(self, run: SubagentRun, item: TaskItem, kind: str = "subagent") -> dict[str, Any]:
        """One subagent run through the executor."""
        return await self.executor.submit(SubagentSpec(run, self.host, self.signal, self.progress(item.index),
                                                       kind))

    def emit(self, event: dict[str, Any]) -> None:
        self.host.emit(event)

    def command_gate(self) -> Any:
        return _command_gate(self)

    def subagent(self, item: TaskItem, *, task_id: str, raw_id: str, task: str, cwd: str,
                 worktree: str | None) -> SubagentRun:
        return SubagentRun(index=item.index, task_id=task_id, raw_id=raw_id, agent=self.agent, task=task,
                           assignment=item.assignment, description=item.description, cwd=cwd, worktree=worktree,
                           output_schema=self.output_schema, model_override=self.model_override,
                           max_recursion_depth=self.cfg.max_recursion_depth, artifacts_dir=self.artifacts_dir)

    def spawn_request(self, task_id: str, kind: str) -> SpawnRequest:
        return SpawnRequest(id=task_id, agent=self.agent.name, kind=kind, isolated=self.isolated,
                            depth=self.host.depth + 1)

    def progress(self, index: int) -> Any:
        return lambda progress, flush: self.board.set(index, progress, flush=flush)


def refused(item: TaskItem, batch: Batch, reason: str) -> dict[str, Any]:
    run = batch.subagent(item, task_id=item.id, raw_id=item.raw_id, task=item.task, cwd=batch.host.cwd, worktree=None)
    return base_result(run, exitCode=1, output="", stderr=reason, truncated=False, durationMs=0, tokens=0,
                       error=reason, aborted=True, abortReason=reason)


async def run_task(batch: Batch, item: TaskItem) -> dict[str, Any]:
    request = batch.spawn_request(item.id, "subagent")
    refusal = batch.host.hooks.ask_spawn(request)
    if refusal is not None:
        return refused(item, batch, refusal)
    if not batch.isolated:
        batch.emit(events.subagent_start(item.id, batch.agent.name, False))
        run = batch.subagent(item, task_id=item.id, raw_id=item.raw_id, task=item.task, cwd=batch.host.cwd,
                             worktree=None)
        code = 1
        try:
            result = await batch.submit(run, item)
            code = result["exitCode"]
        finally:
            batch.emit(events.subagent_end(item.id, batch.agent.name, code))
        return result
    if batch.headless is not None:
        return await headless.run(batch, item)
    return await _run_isolated(batch, item, request)


async def _run_isolated(batch: Batch, item: TaskItem, request: SpawnRequest) -> dict[str, Any]:
    assert batch.repo is not None and batch.baseline is not None and batch.worktrees_home is not None
    directory = os.path.join(batch.worktrees_home, f"{os.getpid()}-{isolation.safe_name(item.id)}")
    started = False
    result: dict[str, Any] | None = None
    try:
        try:
            await isolation.create_worktree(batch.repo, batch.baseline, directory, batch.signal)
            before = await isolation.snapshot(directory, batch.signal)
        except (Exception, asyncio.CancelledError) as exc:
            batch.host.hooks.cancel_spawn(request)
            if isinstance(exc, asyncio.CancelledError):
                raise
            message = "Cancelled before start" if batch.signal.aborted else f"Isolation setup failed: {exc}"
            run = batch.subagent(item, task_id=item.id, raw_id=item.raw_id, task=item.task, cwd=directory,
                                 worktree=directory)
            return base_result(run, exitCode=1, output="", stderr=message, truncated=False, durationMs=0, tokens=0,
                               error=message, aborted=batch.signal.aborted or None,
                               abortReason=message if batch.signal.aborted else None)
        batch.emit(events.subagent_start(item.id, batch.agent.name, True))
        started = True
        try:
            result = await _work(batch, item, directory, before)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - a crash fails this task, cleanup still runs below
            run = batch.subagent(item, task_id=item.id, raw_id=item.raw_id, task=item.task, cwd=directory,
                                 worktree=directory)
            message = f"Task crashed: {exc or type(exc).__name__}"
            result = base_result(run, exitCode=1, output="", stderr=message, truncated=False, durationMs=0,
                                 tokens=0, error=message)
        return result
    finally:
        await asyncio.shield(_cleanup(batch.repo, directory))
        if started:
            code = result["exitCode"] if result is not None else 1
            batch.emit(events.subagent_end(item.id, batch.agent.name, code,
                                           result.get("verification") if result is not None else None))


async def _cleanup(repo: isolation.Repo, directory: str) -> None:
    await isolation.remove_worktree(repo, directory)


async def _work(batch: Batch, item: TaskItem, directory: str, before: str) -> dict[str, Any]:
    run = batch.subagent(item, task_id=item.id, raw_id=item.raw_id, task=item.task, cwd=directory,
                         worktree=directory)
    result = await batch.submit(run, item)
    if batch.signal.aborted:
        return result
    after = await isolation.snapshot(directory)  # the task's work, before any check writes into the tree
    resolved = batch.verification
    keep_patch = True
    if resolved.requested:
        if result["exitCode"] == 0:
            result, keep_patch, after = await _verify(batch, item, directory, result, after)
        else:
            result["verification"] = resolved.result("skipped", [], 0)
    if batch.signal.aborted:
        return result
    if result["exitCode"] == 0 and batch.cfg.merge_mode == "branch":
        return await _to_branch(batch, item, directory, before, after, result)
    if result["exitCode"] == 0 or (keep_patch and result.get("verification", {}).get("status") == "failed"):
        return await _capture(batch, item, directory, before, after, result)
    return result


async def _verify(batch: Batch, item: TaskItem, directory: str, result: dict[str, Any], after: str
                  ) -> tuple[dict[str, Any], bool, str]:
    """(result, whether a failed result keeps its patch, the tree the patch is taken from)."""
    resolved = batch.verification
    ctx = verify.AttemptContext(cwd=directory, artifacts_dir=batch.artifacts_dir, task_id=item.id, emit=batch.emit,
                                shell=batch.shell, env=batch.shell_env, signal=batch.signal,
                                check=_command_gate(batch),
                                sandbox=batch.host.sandbox.child(directory) if batch.host.sandbox is not None else None)
    first = await verify.run_attempt(resolved, ctx, 1)
    if first["status"] == "passed":
        result["verification"] = resolved.result("passed", [first], 0)
        return result, True, after
    attempts, retries = [first], 0
    if resolved.on_failure == "retry_once" and resolved.max_retries >= 1 and not batch.signal.aborted:
        repair_id = f"{item.id}-repair"
        request = batch.spawn_request(repair_id, "repair")
        refusal = batch.host.hooks.ask_spawn(request)
        if refusal is not None:  # the gate is the budget's: the repair attempt stops there (seed 000's status)
            batch.emit(events.verification_end(item.id, 2, "budget_exceeded"))
            message = f"{refusal}; repair skipped"
            result.update(exitCode=1, stderr=message, error=message,
                          verification=resolved.result("failed", attempts, 0))
            return result, True, after
        checked = await isolation.snapshot(directory)
        limit = _context_lines(batch.cfg)
        task = prompts.repair_prompt(item.task, verify.failed_commands(first), limit)
        batch.emit(events.subagent_start(repair_id, batch.agent.name, True))
        repair_run = batch.subagent(item, task_id=repair_id, raw_id=f"{item.raw_id}-repair", task=task,
                                    cwd=directory, worktree=directory)
        repair: dict[str, Any] = {"exitCode": 1}
        try:
            repair = await batch.submit(repair_run, item, "repair")
        finally:
            batch.emit(events.subagent_end(repair_id, batch.agent.name, repair["exitCode"]))
        retries = 1
        result = _merge_repair(result, repair)
        if not batch.signal.aborted:
            repaired = await isolation.snapshot(directory)
            after = await isolation.undo_side_effects(directory, repaired, after, checked)
        if repair["exitCode"] == 0 and not batch.signal.aborted:
            second = await verify.run_attempt(resolved, ctx, 2)
            attempts.append(second)
            if second["status"] == "passed":
                # the seed's statuses: passed (retriesUsed 1 and "repaired" say it took the repair)
                result["verification"] = {**resolved.result("passed", attempts, retries), "repaired": True}
                return result, True, after
    result["verification"] = resolved.result("failed", attempts, retries)
    message = verify.failure_message(attempts[-1])
    result.update(exitCode=1, stderr=message, error=message)
    return result, resolved.on_failure != "discard_patch", after


def _merge_repair(result: dict[str, Any], repair: dict[str, Any]) -> dict[str, Any]:
    """The task's result after a repair: the repair's output (it has the last word), both subagents' usage."""
    merged = dict(result)
    for key in ("output", "stderr", "truncated", "outputPath", "outputMeta", "lastIntent"):
        if key in repair:
            merged[key] = repair[key]
    merged["durationMs"] = result.get("durationMs", 0) + repair.get("durationMs", 0)
    merged["tokens"] = result.get("tokens", 0) + repair.get("tokens", 0)
    if result.get("usage") or repair.get("usage"):
        usage = zero_usage()
        for part in (result.get("usage"), repair.get("usage")):
            if part:
                add_usage(usage, part)
        merged["usage"] = usage
    merged["repair"] = {"id": repair["id"], "exitCode": repair["exitCode"]}
    if repair.get("error"):
        merged["repair"]["error"] = repair["error"]
    return merged


def _context_lines(cfg: TaskConfig) -> int:
    value = (cfg.verification or {}).get("failureContextLineLimit")
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 else 200


async def _capture(batch: Batch, item: TaskItem, directory: str, before: str, after: str, result: dict[str, Any]
                   ) -> dict[str, Any]:
    nested = batch.baseline.nested_repos if batch.baseline else []
    try:
        patch = await isolation.tree_diff(directory, before, after, exclude=nested)
        path = os.path.join(batch.artifacts_dir, f"{item.id}.patch")
        await asyncio.to_thread(_write_bytes, path, patch)
    except Exception as exc:  # noqa: BLE001
        result["error"] = f"Patch capture failed: {exc}"
        return result
    result["patchPath"] = path
    result["_trees"] = (before, after)
    return result


async def _to_branch(batch: Batch, item: TaskItem, directory: str, before: str, after: str,
                     result: dict[str, Any]) -> dict[str, Any]:
    assert batch.repo is not None and batch.baseline is not None
    result = await _capture(batch, item, directory, before, after, result)  # the patch is kept whatever happens next
    if "patchPath" not in result:
        return result
    patch = await asyncio.to_thread(_read_bytes, result["patchPath"])
    if not patch.strip():
        return result
    branch = f"pisces/task/{isolation.safe_name(item.id)}"
    try:
        await merge.commit_to_branch(batch.repo, batch.baseline.head, patch, branch, item.description or item.id)
    except Exception as exc:  # noqa: BLE001
        result["error"] = f"Merge failed: {exc}"
        return result
    result["branchName"] = branch
    return result


def _write_bytes(path: str, data: bytes) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def _read_bytes(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _command_gate(batch: Batch) -> Any:
    """How each verification command is approved: through the session's gate as a ``bash`` call (deny rules,
    the known-dangerous check, and for commands the model wrote, the mode, rules and grants of ``bash``);
    None when the session has no gate."""
    approval = batch.host.approval
    if approval is None or not hasattr(approval, "check_command"):
        return None
    trusted = batch.verification.commands_from == "settings"

    async def check(command: str) -> str | None:
        return await approval.check_command(command, tool_call_id=batch.tool_call_id, signal=batch.signal,
                                            trusted=trusted)

    return check
