"""What the task tool tells, and asks, the rest of the session (TEAM.md interface 8).

``SubagentHooks`` lives on the session as ``session.subagents``. A budget controller (issue 16), or anything
else that must count or refuse delegated work, plugs in here without touching the task tool:

* ``spawn_gate(request) -> None | str`` is asked right before every subagent and every verification-repair
  subagent is started. ``None`` lets it start, and the gate counts it at that moment; a string refuses it
  and is the reason the task result shows. The gate is a plain synchronous call, on purpose: tasks of a
  parallel batch ask one after another, each sees the slots the previous ones took, and a batch cannot
  overshoot a limit. A spawn that was allowed but then could not start (its worktree could not be set up)
  is handed back through ``spawn_cancelled(request)``.
* ``on_usage(report)`` is called after each reply of each subagent with that reply's usage and the
  subagent's running total, so that the parent's counters include what its subagents spend.

Every hook is optional; an exception raised by one is reported on stderr and otherwise ignored (a broken
counter must not break the batch).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any, Callable


@dataclass(frozen=True)
class SpawnRequest:
    id: str  # the allocated task id ("0-AddTests"; a repair subagent: "0-AddTests-repair")
    agent: str  # the agent definition's name
    kind: str  # "subagent" | "repair"
    isolated: bool
    depth: int  # 1 for a subagent of the main session, 2 for one of its subagents, ...


@dataclass(frozen=True)
class UsageReport:
    id: str
    agent: str
    usage: dict[str, Any]  # this reply's Usage (pi's shape: input, output, cacheRead, cacheWrite, totalTokens, cost)
    total: dict[str, Any]  # the subagent's usage so far, this reply included
    depth: int


@dataclass
class SubagentHooks:
    spawn_gate: Callable[[SpawnRequest], str | None] | None = None
    spawn_cancelled: Callable[[SpawnRequest], None] | None = None
    on_usage: Callable[[UsageReport], None] | None = None
    _warned: set[str] = field(default_factory=set, repr=False)

    def ask_spawn(self, request: SpawnRequest) -> str | None:
        gate = self.spawn_gate
        if gate is None:
            return None
        try:
            answer = gate(request)
        except Exception as exc:  # noqa: BLE001 - a broken gate refuses nothing
            self._report("spawn_gate", exc)
            return None
        return answer if isinstance(answer, str) and answer else None

    def cancel_spawn(self, request: SpawnRequest) -> None:
        if self.spawn_cancelled is not None:
            try:
                self.spawn_cancelled(request)
            except Exception as exc:  # noqa: BLE001
                self._report("spawn_cancelled", exc)

    def report_usage(self, report: UsageReport) -> None:
        if self.on_usage is not None:
            try:
                self.on_usage(report)
            except Exception as exc:  # noqa: BLE001
                self._report("on_usage", exc)

    def _report(self, hook: str, exc: BaseException) -> None:
        if hook not in self._warned:
            self._warned.add(hook)
            sys.stderr.write(f"pisces: the task tool's {hook} hook failed: {exc or type(exc).__name__}\n")
