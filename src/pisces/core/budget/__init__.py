"""Session budgets (seed 000's ``task.budget.*``): limits on wall time, tokens, cost, tool calls and subagents,
``budget_warning`` / ``budget_exceeded`` events, and the refusals that enforce them. See docs/budgets.md.

Nothing here is imported unless a limit is set (in settings, or at run time with the RPC command
``set_budget``): a session without a budget has no controller and counts nothing.

* ``policy``: ``BudgetPolicy`` and how it is read from settings (a project that is not trusted may only make
  the budget stricter) or from ``set_budget``;
* ``controller``: ``BudgetController``, the pure counter (injectable clock, no I/O);
* ``session_budget``: ``SessionBudget``, the controller wired to a session's events, abort and task hooks.
"""

from __future__ import annotations

from typing import Any

from pisces.core.budget.controller import BudgetController, BudgetExceededError
from pisces.core.budget.policy import BudgetPolicy, BudgetPolicyError, policy_from_request, policy_from_settings
from pisces.core.budget.session_budget import SessionBudget, attach, set_session_budget


def attach_from_settings(session: Any) -> SessionBudget | None:
    """A budget for ``session`` from its settings, or None (and nothing attached) when no limit is set."""
    policy = policy_from_settings(session.settings)
    return attach(session, policy) if policy is not None else None


__all__ = ["BudgetController", "BudgetExceededError", "BudgetPolicy", "BudgetPolicyError", "SessionBudget",
           "attach", "attach_from_settings", "policy_from_request", "policy_from_settings", "set_session_budget"]
