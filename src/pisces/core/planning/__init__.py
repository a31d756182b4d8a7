"""Planning tools of a session (docs/planning.md): the todo list (``todos``: the data; ``session_todos``: its
persistence in the session file, events and reminders; ``todo_tool``: the ``todo_write`` tool), the stream
rules (``rules``, ``ttsr``) and plan mode (``plan_mode``, loaded only by a session that uses it).

Each part is a session collaborator: given a few callables (emit, append an entry, the branch, the settings)
and fed the session's events; none reaches into the session's private members. Plan mode is given the session
itself (its store, agent tools, approval gate and prompt), through public methods only.
"""

from __future__ import annotations

from typing import Any

PLAN_MODE_ENTRY = "pisces.plan_mode"  # the customType of plan mode's session entries (plan_mode.py)


def plan_mode_for(session: Any, only_if_used: bool = False) -> Any:
    """The session's plan mode, its module loaded on first use: a person's command, or (``only_if_used``) a
    branch that has its entry, so that a resumed session stays in plan mode; else None."""
    if session.plan_mode is None:
        if only_if_used and not any(getattr(e, "customType", None) == PLAN_MODE_ENTRY
                                    for e in session.store.get_branch()):
            return None
        from pisces.core.planning.plan_mode import attach  # noqa: PLC0415 - only a session that uses it

        attach(session, announce=only_if_used)
    return session.plan_mode
