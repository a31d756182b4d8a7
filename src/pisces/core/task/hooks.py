"""What the task tool tells, and asks, the rest of the session.

``SubagentHooks`` lives on the session as ``session.subagents``. A budget controller (pisces.core.budget), or anything
else that must count or refuse delegated work, plugs in here without touching the task tool:

* ``spawn_gate(request) -> None | str`` is asked before every subagent and every verification-repair
  subagent is started (before its worktree is made). ``None`` lets it start, and the gate counts it at that
  moment; a string refuses it and is the reason the task result shows. The gate is a plain synchronous call,
  on purpose: tasks of a parallel batch ask one after another, each sees the slots the previous ones took,
  and a batch cannot overshoot a limit. A spawn that was allowed but then could not start (its worktree could
  not be set up) is handed back through ``spawn_cancelled(request)``.
* ``on_usage(report)`` is called after each reply of each subagent with that reply's usage and the
  subagent's running total, so that the parent's counters include what its subagents spend.

Every hook is optional; an exception raised by one is reported on stderr and otherwise ignored (a broken
counter must not break the batch).
"""

from __future__ import annotations

import sys
from typing import Any, Callable

# Plain classes, not dataclasses: the session imports this module at start-up, and generating dataclasses
# costs milliseconds there.


class SpawnRequest:
    """A subagent about to start. ``id``: the allocated task id ("0-AddTests"; a repair subagent:
    "0-AddTests-repair"); ``kind``: "subagent" or "repair"; ``depth``: 1 for a subagent of the main session,
    2 for one of its own subagents, ..."""

    __slots__ = ("id", "agent", "kind", "isolated", "depth")

    def __init__(self, id: str, agent: str, kind: str, isolated: bool, depth: int) -> None:
        self.id, self.agent, self.kind, self.isolated, self.depth = id, agent, kind, isolated, depth

    def __repr__(self) -> str:
        return (f"SpawnRequest(id={self.id!r}, agent={self.agent!r}, kind={self.kind!r}, "
                f"isolated={self.isolated!r}, depth={self.depth!r})")


class UsageReport:
    """One reply of a subagent: ``usage`` is that reply's Usage (pi's shape: input, output, cacheRead,
    cacheWrite, totalTokens, cost), ``total`` the subagent's usage so far, this reply included."""

    __slots__ = ("id", "agent", "usage", "total", "depth")

    def __init__(self, id: str, agent: str, usage: dict[str, Any], total: dict[str, Any], depth: int) -> None:
        self.id, self.agent, self.usage, self.total, self.depth = id, agent, usage, total, depth


class SubagentHooks:
    def __init__(self) -> None:
        self.spawn_gate: Callable[[SpawnRequest], str | None] | None = None
        self.spawn_cancelled: Callable[[SpawnRequest], None] | None = None
        self.on_usage: Callable[[UsageReport], None] | None = None
        self.on_tool_call: Callable[[str], None] | None = None  # a subagent dispatched a tool call (its name)
        # what is left of the session's budget (task.budget keys): the slice a headless subagent gets
        self.remaining_budget: Callable[[], dict[str, Any]] | None = None
        self._warned: set[str] = set()

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

    def report_tool_call(self, tool_name: str) -> None:
        if self.on_tool_call is not None:
            try:
                self.on_tool_call(tool_name)
            except Exception as exc:  # noqa: BLE001
                self._report("on_tool_call", exc)

    def _report(self, hook: str, exc: BaseException) -> None:
        if hook not in self._warned:
            self._warned.add(hook)
            sys.stderr.write(f"pisces: the task tool's {hook} hook failed: {exc or type(exc).__name__}\n")
