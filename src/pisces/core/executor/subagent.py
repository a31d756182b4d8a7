"""The task tool's side of the executor interface: one subagent run in, its task result out, through
``submit(spec) -> result`` like a batch item.

``SubagentSpec`` is what the task tool asks for (``run``: the task's ``SubagentRun``, plain data: agent, task
text, working directory or worktree, output schema, model override) plus the parent-side context that a run
needs while it lasts (``host``, the abort ``signal``, ``on_progress``). ``LocalSubagentExecutor`` (the default,
and today the only backend) runs it in this process with the runner it was given (``core.task.executor.
run_subagent``), so the subagent keeps the parent's approval gate, sandbox escalation, budget and live progress.

Not yet: a backend that runs a subagent elsewhere (a ``pisces`` process per subagent, or a Ray task as for
batch items). It needs the parent-side context to cross a process boundary (approval requests and sandbox
escalations answered by the parent's person, progress and usage streamed back, the budget shared), which
the batch executors do not need since a batch item runs headless. ``make_subagent_executor`` refuses any
other name with an error that says so.
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

    name = "local"

    def __init__(self, runner: Runner) -> None:
        self._runner = runner
        self.submitted = 0

    async def submit(self, spec: SubagentSpec) -> dict[str, Any]:
        self.submitted += 1
        return await self._runner(spec.run, spec.host, spec.signal, spec.on_progress)

    async def close(self) -> None:
        return None


def make_subagent_executor(name: str, runner: Runner) -> LocalSubagentExecutor:
    if name == "local":
        return LocalSubagentExecutor(runner)
    raise ValueError(f"the task tool's subagents run with the local executor only (asked: {name!r}); running "
                     "them on Ray or in separate processes is not implemented (docs/batch.md)")


__all__ = ["SubagentSpec", "LocalSubagentExecutor", "make_subagent_executor"]
