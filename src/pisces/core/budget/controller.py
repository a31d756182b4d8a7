"""``BudgetController``: counts what a session spends and says when a limit is near or passed. Pure: no I/O,
no timers, no asyncio; the time comes from an injectable ``clock`` (seconds, ``time.monotonic`` by default)
and events leave through an ``emit`` callable.

Counting (``on_event`` maps the session's events to the counters):

* ``agent_start`` .. ``agent_end``: the wall clock runs, and only then. ``wallTimeMs`` is the time spent
  running, summed over runs; idle time between prompts, retry back-off waits and compaction are not counted.
* ``message_end`` of an assistant message: its usage (``input``, ``output``, ``totalTokens``, ``cost.total``).
  ``totalTokens`` is the provider's total, which includes cache reads and writes.
* ``tool_execution_start``: one tool call.
* ``add_usage``: a subagent's reply (the task tool reports each one); ``reserve_subagent``: a subagent about to
  start, counted before it starts.

Thresholds, each dimension on its own: a dimension is *exceeded* once the amount used goes over its limit
(``value > limit``: ``maxToolCalls: 3`` allows three calls, ``maxSubagents: 0`` allows none, a total of exactly
``maxTotalTokens`` is within budget), and in *warning* from ``warnAtRatio`` of its limit. ``check`` emits
``budget_warning`` once per dimension (a dimension that jumps straight past its limit gets no warning), and
``budget_exceeded`` once per scope; after ``budget_exceeded`` no more warnings come (the budget is spent).
"""

from __future__ import annotations

import time
from typing import Any, Callable

from pisces.core.budget.policy import DIMENSIONS, BudgetPolicy
from pisces.core.errors import SessionError

Emit = Callable[[dict[str, Any]], None]
_FIELD = {reason: field for reason, _, field in DIMENSIONS}


class BudgetExceededError(SessionError):
    """New work was refused because the session's budget is spent. The text is the client-visible error."""


def _tag(value: Any, field: str) -> str | None:
    """``value[field]`` of a dict, or the tag of a msgspec struct tagged on ``field`` (events are tagged on
    ``type``, messages on ``role``: neither is an attribute)."""
    if isinstance(value, dict):
        found = value.get(field)
        return found if isinstance(found, str) else None
    config = getattr(type(value), "__struct_config__", None)
    tag = getattr(config, "tag", None) if getattr(config, "tag_field", None) == field else None
    found = tag if tag is not None else getattr(value, field, None)
    return found if isinstance(found, str) else None


def event_type(event: Any) -> str | None:
    """``type`` of a session event: a dict's key, or the tag of an agent event."""
    return _tag(event, "type")


def _num(value: Any) -> float:
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else 0


def _usage_parts(usage: Any) -> tuple[float, float, float, float]:
    """(input, output, total, cost) of a Usage struct or of its dict form."""
    if usage is None:
        return 0, 0, 0, 0
    get = usage.get if isinstance(usage, dict) else (lambda key, default=None: getattr(usage, key, default))
    cost = get("cost")
    cost_total = cost.get("total") if isinstance(cost, dict) else getattr(cost, "total", 0)
    inp, out = _num(get("input", 0)), _num(get("output", 0))
    total = get("totalTokens")
    return inp, out, _num(total) if total else inp + out, _num(cost_total)


def _wire(value: float) -> int | float:
    """A counter as JSON shows it: integral values as integers, sums of prices without float noise."""
    if isinstance(value, float):
        value = round(value, 10)
        return int(value) if value.is_integer() else value
    return value


def _ms(value: float) -> int:
    """Whole milliseconds (down, but not below what float noise makes of a whole number)."""
    return int(value + 1e-6)


class BudgetController:
    def __init__(self, policy: BudgetPolicy | None, emit: Emit, *, scope: str = "session",
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.policy = policy or BudgetPolicy()
        self.scope = scope
        self._emit = emit
        self._clock = clock
        self.input_tokens: float = 0
        self.output_tokens: float = 0
        self.total_tokens: float = 0
        self.cost_usd: float = 0
        self.tool_calls = 0
        self.subagents = 0
        self._wall_done_s = 0.0
        self._run_since: float | None = None
        self._warned: set[str] = set()
        self._fired: set[str] = set()  # scopes that had their budget_exceeded
        self._first_exceeded: str | None = None  # the reason the session's budget_exceeded gave

    # -- feeding ------------------------------------------------------------------------------------
    def on_event(self, event: Any, kind: str | None = None) -> None:
        """Count ``event``; ``kind``: its type when the caller already knows it."""
        kind = kind or event_type(event)
        if kind == "agent_start":
            self.run_started()
        elif kind == "agent_end":
            self.run_ended()
        elif kind == "message_end":
            message = event.get("message") if isinstance(event, dict) else getattr(event, "message", None)
            if _tag(message, "role") == "assistant":
                self.add_usage(message.get("usage") if isinstance(message, dict) else getattr(message, "usage", None))
        elif kind == "tool_execution_start":
            self.add_tool_call()

    def run_started(self) -> None:
        if self._run_since is None:
            self._run_since = self._clock()

    def run_ended(self) -> None:
        if self._run_since is not None:
            self._wall_done_s += max(0.0, self._clock() - self._run_since)
            self._run_since = None
        self.check()

    def add_usage(self, usage: Any) -> None:
        inp, out, total, cost = _usage_parts(usage)
        self.input_tokens += inp
        self.output_tokens += out
        self.total_tokens += total
        self.cost_usd += cost
        self.check()

    def add_tool_call(self) -> None:
        self.tool_calls += 1
        self.check()

    def reserve_subagent(self) -> str | None:
        """Before a subagent (or repair) starts: None, and the slot is counted now; or the refusal text. A
        refusal emits ``budget_exceeded{scope: "task"}`` (once)."""
        self.check()
        reason = self.exceeded_reason()
        if reason is None:
            limit = self.policy.limits.get("subagents")
            if limit is None or self.subagents + 1 <= limit:
                self.subagents += 1
                self.check()
                return None
            reason = "subagents"
        self._fire("task", reason)
        return f"Budget exceeded ({reason})"

    def release_subagent(self) -> None:
        """A reserved subagent that never started (its worktree could not be made)."""
        if self.subagents > 0:
            self.subagents -= 1

    # -- state ----------------------------------------------------------------------------------------
    def wall_time_ms(self) -> float:
        spent = self._wall_done_s
        if self._run_since is not None:
            spent += max(0.0, self._clock() - self._run_since)
        return spent * 1000

    def value(self, reason: str) -> float:
        if reason == "wall_time":
            return self.wall_time_ms()
        return {"input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
                "total_tokens": self.total_tokens, "cost": self.cost_usd, "tool_calls": self.tool_calls,
                "subagents": self.subagents}[reason]

    def remaining(self) -> dict[str, Any]:
        """What is left of each limit, as ``task.budget`` keys (never below 0): the slice a subagent that runs
        in another process may spend (``maxSubagents`` is not passed on: the slot is taken here)."""
        out: dict[str, Any] = {}
        for reason, key, _ in DIMENSIONS:
            if reason != "subagents" and reason in self.policy.limits:
                out[key] = _wire(max(self.policy.limits[reason] - self.value(reason), 0))
        return out

    def status_of(self, reason: str, value: float | None = None) -> str:
        limit = self.policy.limits.get(reason)
        if limit is None:
            return "ok"
        used = self.value(reason) if value is None else value
        if used > limit:
            return "exceeded"
        if limit > 0 and used >= limit * self.policy.warn_at_ratio:
            return "warning"
        return "ok"

    def _statuses(self) -> list[tuple[str, str]]:
        return [(reason, self.status_of(reason)) for reason, _, _ in DIMENSIONS if reason in self.policy.limits]

    def exceeded_reason(self) -> str | None:
        """The dimension over its limit: the one the session's ``budget_exceeded`` named while it still is
        over (so a refusal names what the event named), else the first in dimension order."""
        first = self._first_exceeded
        if first is not None and first in self.policy.limits and self.status_of(first) == "exceeded":
            return first
        return next((reason for reason, status in self._statuses() if status == "exceeded"), None)

    def snapshot(self, status: str | None = None, reason: str | None = None) -> dict[str, Any]:
        """The wire BudgetSnapshot. Without arguments: the overall status and the first dimension at it."""
        if status is None:
            reason = self.exceeded_reason()
            status = "exceeded"
            if reason is None:
                reason = next((r for r, s in self._statuses() if s == "warning"), None)
                status = "ok" if reason is None else "warning"
        snap: dict[str, Any] = {"status": status, "wallTimeMs": _ms(self.wall_time_ms())}
        for dim, _, field in DIMENSIONS[1:]:
            snap[field] = _wire(self.value(dim))
        if reason is not None:
            snap["reason"] = reason
        return snap

    def refusal(self) -> str | None:
        """``Session budget exceeded (<reason>)`` once the session's budget is spent (its event is emitted
        first if it was not yet), else None."""
        self.check()
        reason = self.exceeded_reason()
        return None if reason is None else f"Session budget exceeded ({reason})"

    # -- thresholds -------------------------------------------------------------------------------------
    def check(self) -> None:
        """Emit what is due: new warnings (dimension order), then ``budget_exceeded`` for the session."""
        if self.scope in self._fired:
            return
        statuses = self._statuses()
        for reason, status in statuses:
            if status == "exceeded":
                self._warned.add(reason)
            elif status == "warning" and reason not in self._warned:
                self._warned.add(reason)
                self._send("budget_warning", self.scope, reason, "warning")
        exceeded = next((reason for reason, status in statuses if status == "exceeded"), None)
        if exceeded is not None:
            self._first_exceeded = exceeded
            self._fire(self.scope, exceeded)

    def _fire(self, scope: str, reason: str) -> None:
        if scope not in self._fired:
            self._fired.add(scope)
            self._send("budget_exceeded", scope, reason, "exceeded")

    def _send(self, kind: str, scope: str, reason: str, status: str) -> None:
        self._emit({"type": kind, "budget": _wire(self.policy.limits.get(reason, 0)),
                    "spent": _ms(self.value(reason)) if reason == "wall_time" else _wire(self.value(reason)),
                    "scope": scope, "snapshot": self.snapshot(status, reason)})

    def set_policy(self, policy: BudgetPolicy | None) -> None:
        """New limits (None: none). Warnings and ``budget_exceeded`` may fire again against them, and fire at
        once when the amounts already spent reach them."""
        self.policy = policy or BudgetPolicy()
        self._warned.clear()
        self._fired.clear()
        self._first_exceeded = None
        self.check()

    def next_wall_check_s(self) -> float | None:
        """While running with a wall-time limit: seconds until the wall clock reaches its next threshold
        (warning, then limit); None when there is nothing left to watch."""
        limit = self.policy.limits.get("wall_time")
        if limit is None or self._run_since is None or self.scope in self._fired:
            return None
        now = self.wall_time_ms()
        points = [limit + 1]  # past the limit: "exceeded" is strictly over it
        if "wall_time" not in self._warned and limit > 0:
            points.append(limit * self.policy.warn_at_ratio)
        ahead = [p - now for p in points]
        return max(0.0, min(ahead)) / 1000 if ahead else None
