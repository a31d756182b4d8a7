"""``TaskTool``: checks a call, runs its tasks (in parallel up to ``task.maxConcurrency``), brings isolated work
back, and answers with a ``<task-summary>`` and the full results in ``details``.

Refusals are ordinary (non-error) results whose text says what is wrong, as in pisces; the strings are
pisces'. An abort of the call (the parent's abort) reaches every subagent and verification command; tasks not
started yet are reported as "Cancelled before start".
"""

from __future__ import annotations

import asyncio
import shutil
import time
from typing import Any

from pisces.agent.types import AgentToolResult
from pisces.ai.abort import AbortSignal
from pisces.ai.types import TextContent
from pisces.core.task import agents as agent_defs
from pisces.core.task import headless, isolation, merge, prompts, verify
from pisces.core.task.config import ISOLATION_MODES, TaskConfig
from pisces.core.task.executor import add_usage, zero_usage
from pisces.core.task.progress import ProgressBoard, new_progress
from pisces.core.task.runner import Batch, TaskItem, refused, run_task
from pisces.core.task.schema import task_schema
from pisces.core.task.submit import normalize_schema
from pisces.core.task.task_host import TaskHost
from pisces.core.tools.bash_exec import get_shell_config, get_shell_env

ISOLATION_DISABLED = ("Task isolation is disabled. Remove the isolated argument or set task.isolation.mode to "
                      "'worktree', 'fuse-overlay', or 'fuse-projfs'.")
NO_TASKS = "No tasks provided. Use: { agent, context, tasks: [{id, description, args}, ...] }"


class TaskTool:
    name = "task"
    label = "Task"

    def __init__(self, host: TaskHost) -> None:
        self.host = host
        self._discovery: agent_defs.Discovery | None = None

    # -- what the model sees -------------------------------------------------------------------------
    def _config(self) -> TaskConfig:
        return TaskConfig.from_settings(self.host.settings)

    def _agents(self) -> agent_defs.Discovery:
        if self._discovery is None:
            self._discovery = agent_defs.discover_agents(self.host.project_cwd, self.host.agent_dir,
                                                         project_trusted=self.host.project_trusted())
        return self._discovery

    @property
    def description(self) -> str:
        cfg = self._config()
        listed = [a for a in self._agents().agents if a.name not in cfg.disabled_agents]
        return prompts.tool_description(listed, cfg.max_concurrency, cfg.isolation_enabled)

    @property
    def parameters(self) -> dict[str, Any]:
        return task_schema(self._config().isolation_enabled)

    # -- a call ----------------------------------------------------------------------------------------
    async def execute(self, tool_call_id: str, params: dict[str, Any], signal: AbortSignal, on_update: Any
                      ) -> AgentToolResult:
        started = time.time()
        project_dir: str | None = None
        try:
            discovery = await asyncio.to_thread(agent_defs.discover_agents, self.host.project_cwd,
                                                self.host.agent_dir, project_trusted=self.host.project_trusted())
            self._discovery = discovery
            project_dir = discovery.project_agents_dir
            return await self._execute(params, signal, on_update, discovery, started, tool_call_id)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - any failure is a readable result
            return _text(f"Task execution failed: {exc}", project_dir, started)

    async def _execute(self, params: dict[str, Any], signal: AbortSignal, on_update: Any,
                       discovery: agent_defs.Discovery, started: float, tool_call_id: str = "") -> AgentToolResult:
        cfg = self._config()
        project_dir = discovery.project_agents_dir
        if cfg.isolation_mode not in ISOLATION_MODES:
            return _text(f"Unknown task.isolation.mode '{cfg.isolation_mode}': use one of "
                         f"{', '.join(ISOLATION_MODES)}.", project_dir)
        if not cfg.isolation_enabled and "isolated" in params:
            return _text(ISOLATION_DISABLED, project_dir)
        isolated = cfg.isolation_enabled and params.get("isolated") is True
        resolved = verify.resolve(params, cfg.verification or {}, isolated)
        if resolved.error:
            return _text(resolved.error, project_dir)
        name = params.get("agent")
        agent = discovery.get(name) if isinstance(name, str) else None
        if agent is None:
            available = ", ".join(a.name for a in discovery.agents) or "none"
            return _text(f'Unknown agent "{name}". Available: {available}', project_dir)
        if agent.name in cfg.disabled_agents:
            enabled = [a.name for a in discovery.agents if a.name not in cfg.disabled_agents]
            tail = f" Available: {', '.join(enabled)}" if enabled else ""
            return _text(f'Agent "{agent.name}" is disabled in settings. Enable it via /agents, or use a different '
                         f"agent type.{tail}", project_dir)
        tasks = params.get("tasks")
        if not isinstance(tasks, list) or not tasks:
            return _text(NO_TASKS, project_dir)
        problem = _id_problems(tasks)
        if problem:
            return _text(f"Invalid tasks: {problem}", project_dir)
        if not self.host.may_spawn(agent.name):
            return _text(f"Cannot spawn '{agent.name}'. Allowed: {self.host.spawns_text()}", project_dir, started)

        try:
            headless_opts = headless.options(cfg)
        except ValueError as exc:
            return _text(str(exc), project_dir, started)
        notice = ""
        repo = baseline = home = None
        if isolated:
            if cfg.isolation_mode in ("fuse-overlay", "fuse-projfs"):
                notice = (f"<system-notification>{cfg.isolation_mode} isolation is not available in pisces. "
                          "Falling back to worktree isolation.</system-notification>")
            try:
                repo = await isolation.find_repo(self.host.cwd)
                baseline = await isolation.capture_baseline(repo)
            except (isolation.IsolationError, OSError) as exc:
                return _text(f"Isolated task execution requires a git repository. {exc}", project_dir, started)
            home = isolation.worktrees_home(self.host.agent_dir, repo.root)
            await isolation.sweep_stale(repo, home)

        artifacts_dir, temporary = self.host.resolve_artifacts_dir()
        raw_ids = [t["id"] for t in tasks]
        ids = await asyncio.to_thread(self.host.allocator.allocate, raw_ids, None if temporary else artifacts_dir)
        items = []
        for i, (t, task_id) in enumerate(zip(tasks, ids, strict=False)):
            assignment = str(t.get("assignment") or "").strip()
            items.append(TaskItem(index=i, id=task_id, raw_id=t["id"],
                                  task=prompts.subagent_task_text(params.get("context"), assignment),
                                  assignment=assignment or str(params.get("context") or "").strip(),
                                  description=str(t.get("description") or "")))
        board = ProgressBoard(len(items), on_update, project_dir, started)
        for item in items:
            board.items[item.index] = new_progress(item.index, item.id, agent, item.task, item.assignment,
                                                   item.description)
        board.publish(flush=True)
        override = (cfg.agent_model_overrides or {}).get(agent.name)
        override_list = ([override] if isinstance(override, str) else
                         [o for o in override if isinstance(o, str)] if isinstance(override, list) else None)
        batch = Batch(host=self.host, cfg=cfg, agent=agent, verification=resolved, isolated=isolated, repo=repo,
                      baseline=baseline, worktrees_home=home, artifacts_dir=artifacts_dir,
                      output_schema=(agent.output if agent.output is not None
                                     else normalize_schema(params.get("schema"))),
                      model_override=override_list, signal=signal, board=board, shell=_shell(self.host.settings),
                      shell_env=_shell_env(), tool_call_id=tool_call_id)
        if isolated and headless_opts is not None:  # isolated tasks become batch items (core/task/headless.py)
            try:
                batch.headless = await asyncio.to_thread(headless.Headless, headless_opts, cfg.max_concurrency)
            except Exception as exc:  # noqa: BLE001 - a backend that cannot start (Ray's own errors) is a readable result
                board.close()
                return _text(f"task.executor {headless_opts.backend}: {exc}", project_dir, started)
        try:
            results = await _run_all(batch, items, cfg.max_concurrency)
        finally:
            board.close()
            if batch.headless is not None:
                await batch.headless.close()

        merge_summary, applied = "", None
        if isolated and repo is not None and not signal.aborted:
            if cfg.merge_mode == "branch":
                merge_summary, applied = await _merge_branches(repo, results)
            else:
                merge_summary, applied = await _apply_patches(repo, results)
        if notice:
            merge_summary = f"{notice}\n\n{merge_summary}" if merge_summary else notice
        clean = [_public(r) for r in results]
        total = int((time.time() - started) * 1000)
        details: dict[str, Any] = {"projectAgentsDir": project_dir, "results": clean, "totalDurationMs": total}
        usage = zero_usage()
        with_usage = [r["usage"] for r in clean if r.get("usage")]
        for part in with_usage:
            add_usage(usage, part)
        if with_usage:
            details["usage"] = usage
        if temporary and _may_drop_artifacts(isolated, applied, clean):
            await asyncio.to_thread(shutil.rmtree, artifacts_dir, True)
            for r in clean:  # nothing may point into the directory just removed
                r.pop("outputPath", None)
                r.pop("patchPath", None)
        details["outputPaths"] = [r["outputPath"] for r in clean if r.get("outputPath")]
        text = prompts.task_summary(clean, duration_ms=total, merge_summary=merge_summary,
                                    batch_aborted=signal.aborted)
        return AgentToolResult(content=[TextContent(text=text)], details=details)


def _text(text: str, project_dir: str | None, started: float | None = None) -> AgentToolResult:
    total = int((time.time() - started) * 1000) if started is not None else 0
    return AgentToolResult(content=[TextContent(text=text)],
                           details={"projectAgentsDir": project_dir, "results": [], "totalDurationMs": total})


def _id_problems(tasks: list[Any]) -> str:
    missing: list[int] = []
    seen: dict[str, list[int]] = {}
    first: dict[str, str] = {}
    for i, t in enumerate(tasks):
        task_id = t.get("id") if isinstance(t, dict) else None
        if not isinstance(task_id, str) or not task_id.strip():
            missing.append(i)
            continue
        seen.setdefault(task_id.lower(), []).append(i)
        first.setdefault(task_id.lower(), task_id)
    problems = []
    if missing:
        problems.append(f"Missing task ids at indexes: {', '.join(map(str, missing))}")
    dups = [(first[k], v) for k, v in seen.items() if len(v) > 1]
    if dups:
        listed = "; ".join(f"{name} (indexes {', '.join(map(str, idx))})" for name, idx in dups)
        problems.append(f"Duplicate task ids detected (case-insensitive): {listed}")
    return ". ".join(problems)


async def _run_all(batch: Batch, items: list[TaskItem], limit: int) -> list[dict[str, Any]]:
    """Every task, at most ``limit`` at a time, results in input order. Once the call is aborted no further
    task starts; those become "Cancelled before start" results."""
    results: list[dict[str, Any] | None] = [None] * len(items)
    queue = list(items)

    async def worker() -> None:
        while queue and not batch.signal.aborted:
            item = queue.pop(0)
            results[item.index] = await run_task(batch, item)

    await asyncio.gather(*(worker() for _ in range(min(limit, len(items)))))
    out = []
    for item, result in zip(items, results, strict=False):
        if result is None:
            result = refused(item, batch, "Cancelled before start")
            result["stderr"] = "Skipped (cancelled before start)"
            result["error"] = "Cancelled before start"
        out.append(result)
    return out


async def _apply_patches(repo: isolation.Repo, results: list[dict[str, Any]]) -> tuple[str, bool]:
    """Apply each successful task's patch in order; report per task. Returns (summary, all applied)."""
    applied: list[str] = []
    merged: list[str] = []
    kept: list[str] = []
    for r in results:
        path = r.get("patchPath")
        if not path:
            continue
        if r.get("exitCode") != 0 or r.get("error"):
            kept.append(f"- {r['id']}: {path} (not applied: the task failed)")
            continue
        patch = await asyncio.to_thread(_read, path)
        before, after = r.get("_trees", ("", ""))
        outcome = await merge.apply_patch(repo, patch, before, after)
        r["patchApplied"] = outcome.status in ("applied", "merged", "empty")
        if outcome.status in ("applied", "empty"):
            applied.append(r["id"])
        elif outcome.status == "merged":
            merged.append(r["id"])
        elif outcome.status == "conflict":
            kept.append(f"- {r['id']}: {path} (conflict in {', '.join(outcome.conflicts)})")
            r["error"] = f"Patch not applied: conflict in {', '.join(outcome.conflicts)}"
        else:
            kept.append(f"- {r['id']}: {path} ({outcome.error})")
            r["error"] = f"Patch not applied: {outcome.error}"
    missing = [r for r in results if not r.get("patchPath")]
    if not kept and not missing:
        text = "Applied patches: yes"
        if merged:
            text += f" (merged three-way: {', '.join(merged)})"
        return text, True
    lines = []
    if applied or merged:
        done = applied + [f"{m} (merged three-way)" for m in merged]
        lines.append(f"Applied patches: {', '.join(done)}")
    if kept:
        lines.append("<system-notification>Patches were not applied and must be handled manually."
                     "</system-notification>")
        lines.append("Patch artifacts:\n" + "\n".join(kept))
    if missing:
        lines.append("No patch (the task failed before producing one): " + ", ".join(r["id"] for r in missing))
    return "\n\n".join(lines), not kept and not missing


async def _merge_branches(repo: isolation.Repo, results: list[dict[str, Any]]) -> tuple[str, bool]:
    branches = [r["branchName"] for r in results if r.get("branchName") and r.get("exitCode") == 0
                and not r.get("aborted") and not r.get("error")]
    if not branches:
        return "", True
    outcome = await merge.merge_branches(repo, branches)
    if not outcome.failed:
        noun = "branch" if len(outcome.merged) == 1 else "branches"
        return f"Merged {len(outcome.merged)} {noun}: {', '.join(outcome.merged)}", True
    done = f"Merged: {', '.join(outcome.merged)}.\n" if outcome.merged else ""
    conflict = f"\nConflict: {outcome.conflict}" if outcome.conflict else ""
    return (f"<system-notification>Branch merge failed. {done}Failed: {', '.join(outcome.failed)}.{conflict}\n"
            "Unmerged branches remain for manual resolution.</system-notification>"), False


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


_PUBLIC_ORDER = ("index", "id", "agent", "agentSource", "task", "assignment", "description", "lastIntent", "exitCode",
                 "output", "stderr", "truncated", "durationMs", "tokens", "modelOverride", "error", "aborted",
                 "abortReason", "verification", "usage", "outputPath", "patchPath", "patchApplied", "branchName",
                 "repair", "outputMeta")


def _public(result: dict[str, Any]) -> dict[str, Any]:
    """A result as sent to clients: pisces' field order, no unset fields, no internals."""
    out = {k: result[k] for k in _PUBLIC_ORDER if result.get(k) is not None}
    out.update({k: v for k, v in result.items() if k not in out and not k.startswith("_") and v is not None})
    return out


def _may_drop_artifacts(isolated: bool, applied: bool | None, results: list[dict[str, Any]]) -> bool:
    """A temporary artifacts directory goes when nothing in it is still needed: no unapplied patch, no log."""
    if isolated and applied is not True:
        return False
    if any(len(r.get("output") or "") > 5000 for r in results):
        return False  # the summary shows a preview and points at the full output
    return not any(c.get("artifactPath") for r in results for a in (r.get("verification") or {}).get("attempts", [])
                   for c in a.get("commandResults", []))


def _shell(settings: Any) -> tuple[str, list[str]]:
    return get_shell_config(settings.shell_path)


def _shell_env() -> dict[str, str]:
    return get_shell_env()
