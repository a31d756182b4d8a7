"""The session: the one object every mode drives, the step that builds it, and the ports its collaborators plug into.

This face stays light (nothing is imported until a name is asked for), so that ``import pisces.core.session.x``
costs only ``x``: start-up imports what the chosen mode needs and no more.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pisces.core.session.agent_session import AgentSession
    from pisces.core.session.build import create_agent_session, create_session_from_args

__all__ = ["AgentSession", "create_agent_session", "create_session_from_args"]

_LAZY = {
    "AgentSession": "pisces.core.session.agent_session",
    "create_agent_session": "pisces.core.session.build",
    "create_session_from_args": "pisces.core.session.build",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib  # noqa: PLC0415 - lazy face: the import happens on first use of a name

    return getattr(importlib.import_module(module), name)
