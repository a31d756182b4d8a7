"""The task tool's side of the executor interface: one subagent run in, its task result out, through
``submit(spec) -> result`` like a batch item.

``SubagentSpec`` is what the task tool asks for (``run``: the task's ``SubagentRun``, plain data: agent, task
text, working directory or worktree, output schema, model override) plus the parent-side context that a run
needs while it lasts (``host``, the abort ``signal``, ``on_progress``). ``LocalSubagentExecutor`` (the
``inprocess`` backend, the default of ``task.executor``) runs it in this process with the runner it was given
(``core.task.executor.run_subagent``), so the subagent keeps the parent's approval gate, sandbox escalation,
budget and live progress.

With ``task.executor`` set to ``local`` or ``ray``, an *isolated* subagent is not a ``SubagentSpec``: it is
submitted to the batch executors (``core/executor/__init__.py``) as a manifest line and its results line is
turned back into the task result (``core/task/headless.py``). Such a subagent runs headless (no approval
reaches the parent's person), which is why it is opt-in. Non-isolated subagents always run here: they work in
the parent's own tree under the parent's approval gate, which a process elsewhere cannot share.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Awaitable, Callable

Runner = Callable[[Any, Any, Any, Callable[[dict[str, Any], bool], None]], Awaitable[dict[str, Any]]]


@dataclass
class SubagentSpec:
    run: Any  # core.task.executor.SubagentRun
    host: Any  # core.task.task_host.TaskHost: the parent session's side
    signal: Any  # ai.abort.AbortSignal of the task call
    on_progress: Callable[[dict[str, Any], bool], None]
    kind: str = "subagent"  # or "repair" (the second attempt after a failed verification)


class LocalSubagentExecutor:
    """Subagents in this process, each as the runner runs it (the task tool bounds how many at once)."""

    name = "inprocess"

    def __init__(self, runner: Runner) -> None:
        self._runner = runner
        self.submitted = 0

    async def submit(self, spec: SubagentSpec) -> dict[str, Any]:
        self.submitted += 1
        return await self._runner(spec.run, spec.host, spec.signal, spec.on_progress)

    async def close(self) -> None:
        return None


def make_subagent_executor(name: str, runner: Runner) -> LocalSubagentExecutor:
    if name in ("inprocess", "local"):  # "local": this backend's name before task.executor existed
        return LocalSubagentExecutor(runner)
    raise ValueError(f"the in-process subagent executor is 'inprocess' (asked: {name!r}); isolated subagents run "
                     "on the batch executors local or ray through task.executor (core/task/headless.py, "
                     "docs/task.md)")


__all__ = ["SubagentSpec", "LocalSubagentExecutor", "make_subagent_executor"]
