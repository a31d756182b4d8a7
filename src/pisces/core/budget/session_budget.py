"""``SessionBudget``: a ``BudgetController`` connected to one session through a handful of callables.

What it is given, and nothing more:

* ``emit(event)``: the session's event sink (the budget events go to every client);
* ``abort()``: stop the running turn (``task.budget.abortOnExceeded``);
* ``hooks``: the task tool's ``SubagentHooks``, whose ``spawn_gate``, ``spawn_cancelled`` and ``on_usage`` it
  takes over, so subagents are counted before they start and their usage counts toward this session;
* ``call_later(delay_s, fn)``: a timer (``loop.call_later`` by default) that re-checks the wall clock while a
  run is going, so a wall-time limit is noticed when it is reached and not at the next event.

The session feeds it every event it emits (``on_event``) and asks ``admit()`` before a prompt, a steering or a
follow-up message is taken; ``state()`` is what ``get_state`` and ``get_session_stats`` show.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Callable

from pisces.core.budget.controller import BudgetController, BudgetExceededError, event_type
from pisces.core.budget.policy import BudgetPolicy, policy_from_request


class SessionBudget:
    def __init__(self, policy: BudgetPolicy | None, *, emit: Callable[[dict[str, Any]], None],
                 abort: Callable[[], None], hooks: Any = None, clock: Callable[[], float] = time.monotonic,
                 call_later: Callable[[float, Callable[[], None]], Any] | None = None) -> None:
        self._emit = emit
        self._abort = abort
        self._call_later = call_later
        self._timer: Any = None
        self.controller = BudgetController(policy, self._send, clock=clock)
        if hooks is not None:
            hooks.spawn_gate = lambda request: self.controller.reserve_subagent()
            hooks.spawn_cancelled = lambda request: self.controller.release_subagent()
            hooks.on_usage = lambda report: self.controller.add_usage(report.usage)
            hooks.on_tool_call = lambda report: self.controller.add_tool_call()
            hooks.remaining_budget = self.controller.remaining

    @property
    def policy(self) -> BudgetPolicy:
        return self.controller.policy

    def _send(self, event: dict[str, Any]) -> None:
        self._emit(event)
        if event["type"] == "budget_exceeded" and event["scope"] == "session":
            self._cancel_timer()
            if self.policy.abort_on_exceeded:
                self._abort()

    def exceeded_reason(self) -> str | None:
        """The dimension whose limit was passed (``cost``, ``tool_calls``...), None while within budget."""
        return self.controller.exceeded_reason()

    def add_usage(self, usage: Any) -> None:
        """Usage of a request outside the agent's turns (a compaction's summary)."""
        self.controller.add_usage(usage)

    # -- fed by the session -----------------------------------------------------------------------------
    def on_event(self, event: Any) -> None:
        kind = event_type(event)
        if kind is None or kind.startswith("budget_"):
            return
        self.controller.on_event(event, kind)
        if kind == "agent_start":
            if self.policy.abort_on_exceeded and self.controller.exceeded_reason() is not None:
                self._abort()  # a retry or a queued message starting past the budget stops at once
            else:
                self._schedule()
        elif kind == "agent_end":
            self._cancel_timer()

    def admit(self) -> None:
        """Raise BudgetExceededError (``Session budget exceeded (<reason>)``) once the budget is spent."""
        refusal = self.controller.refusal()
        if refusal is not None:
            raise BudgetExceededError(refusal)

    def state(self) -> dict[str, Any]:
        """The snapshot (overall status) and the limits in force."""
        return {**self.controller.snapshot(), "limits": self.policy.to_wire()}

    def set_policy(self, policy: BudgetPolicy | None) -> dict[str, Any]:
        self.controller.set_policy(policy)
        self._schedule()
        return self.state()

    def close(self) -> None:
        self._cancel_timer()

    # -- the wall clock ---------------------------------------------------------------------------------
    def _schedule(self) -> None:
        self._cancel_timer()
        delay = self.controller.next_wall_check_s()
        if delay is None:
            return
        call_later = self._call_later
        if call_later is None:
            try:
                call_later = asyncio.get_running_loop().call_later
            except RuntimeError:  # no loop (a synchronous caller): the next event checks instead
                return
        self._timer = call_later(delay, self._tick)

    def _tick(self) -> None:
        self._timer = None
        self.controller.check()
        self._schedule()

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


def attach(session: Any, policy: BudgetPolicy | None) -> SessionBudget:
    """Give ``session`` a budget (``session.budget``), wired to its events, its abort and its task hooks."""

    def abort() -> None:
        session.abort_retry()  # a retry back-off past the budget does not start another request
        session.agent.abort()

    budget = SessionBudget(policy, emit=session.emit, abort=abort, hooks=session.subagents)
    session.budget = budget
    return budget


def set_session_budget(session: Any, values: Any) -> dict[str, Any]:
    """The ``set_budget`` command: replace the session's limits with ``values`` (the settings' names; None or
    no limit clears them). Counting starts when a session first gets a budget. Returns the new state."""

    policy = policy_from_request(values)
    budget = getattr(session, "budget", None) or attach(session, None)
    return budget.set_policy(policy)
