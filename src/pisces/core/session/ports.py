"""The slots of AgentSession that other packages fill, as typed interfaces (``typing.Protocol``).

Read this file to learn what the session talks to without reading its collaborators:

- ``hooks``: :class:`SessionHooks` (extensions). ``pisces.core.session.hooks.NoHooks`` is the default;
  ``pisces.core.extensions.binding.ExtensionHost`` replaces it when extensions are loaded.
- ``ui``: :data:`SessionUIPort`, the class ``pisces.core.session.ui.SessionUI`` itself: it is both the
  interface and the no-UI answer, and a mode subclasses it (``pisces.modes.host.ui_requests``).
- ``budget``: :class:`Budget` or None (``pisces.core.budget.session_budget.SessionBudget``).
- ``approval``: :class:`Approval` or None (``pisces.core.approval.session_gate.SessionApproval``).
- ``bash_runner``: :class:`BashRunnerPort` or None (``pisces.core.session.user_bash.BashRunner``).
- ``subagents`` is ``pisces.core.task.hooks.SubagentHooks`` itself (a budget sets its callbacks).
- the compactor sees the session only as :class:`CompactionHost`.

This module imports typing-level things only; the classes named in the annotations are imported under
``TYPE_CHECKING``, so importing it costs nothing at start-up.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Protocol, TypeAlias

if TYPE_CHECKING:
    from pisces.agent.agent import Agent
    from pisces.ai.types import AssistantMessage, Model, StreamOptions
    from pisces.core.config.settings import Settings
    from pisces.core.session.agent_session import AgentSession
    from pisces.core.session.retry import RetryPolicy
    from pisces.core.session.ui import SessionUI
    from pisces.core.store import SessionManager

__all__ = [
    "Approval", "BashRunnerPort", "Budget", "CompactionHost", "SessionHooks", "SessionUIPort",
]

SessionUIPort: TypeAlias = "SessionUI"


class SessionHooks(Protocol):
    """What the session asks of its extensions (see ``NoHooks`` for what each call means)."""

    @property
    def active(self) -> bool: ...

    async def start(self, reason: str = "startup", previous: str | None = None) -> None: ...

    async def before(self, name: str, event: dict[str, Any]) -> Any: ...

    async def notify(self, event: dict[str, Any]) -> None: ...

    def notify_soon(self, event: dict[str, Any]) -> None: ...

    async def leaving(self, reason: str, target: str | None) -> None: ...

    async def replaced(self, reason: str, previous: str | None, target: str | None) -> None: ...

    def command_name(self, text: str) -> str | None: ...

    async def run_command(self, text: str) -> bool: ...

    async def input(self, text: str, images: Any, source: str) -> tuple[bool, str, Any]: ...

    async def before_agent_start(self, prompt: str, images: Any, base_prompt: Callable[[], str]
                                 ) -> tuple[list[Any], str | None]: ...

    def commands(self) -> list[dict[str, Any]]: ...

    async def user_bash(self, command: str, cwd: str) -> dict[str, Any] | None: ...

    def agent_event(self, event: Any, deliver: Callable[[Any], None]) -> None: ...

    async def drain(self) -> None: ...

    def abort_handlers(self) -> None:
        """The session aborts: stop waiting for handlers still running (after a short grace)."""

    def abort_finished(self) -> None:
        """The session is idle after an abort: handlers run without a deadline again."""

    async def reload(self) -> None: ...

    async def shutdown(self, reason: str = "quit") -> None: ...


class Budget(Protocol):
    """The session's spending limit: sees every event, refuses new input once spent, reports its state."""

    def on_event(self, event: Any) -> None: ...

    def add_usage(self, usage: Any) -> None:
        """Usage of a request made outside the agent's turns (a compaction's summary)."""

    def exceeded_reason(self) -> str | None:
        """The dimension over its limit, None while within budget."""

    def admit(self) -> None:
        """Raise (a SessionError) when the budget is spent; return otherwise."""

    def state(self) -> dict[str, Any]: ...


class Approval(Protocol):
    """The tool-call approval gate: who is asked, what happens when nobody can answer, its state."""

    def set_approver(self, approver: Any) -> None: ...

    def current_approver(self) -> Any: ...

    @property
    def fallback(self) -> str: ...

    def state(self) -> dict[str, Any]: ...

    def gate_subagent(self, agent: Any) -> None: ...


class BashRunnerPort(Protocol):
    """Runs the user's own ``bash`` commands (RPC ``bash``), one at a time; ``abort`` stops the one running."""

    def abort(self) -> None: ...

    async def run(self, session: AgentSession, command: str) -> dict[str, Any]: ...


class CompactionHost(Protocol):
    """What the Compactor uses of its session (public members only)."""

    is_compacting: bool

    @property
    def agent(self) -> Agent: ...

    @property
    def store(self) -> SessionManager: ...

    @property
    def settings(self) -> Settings: ...

    @property
    def retry(self) -> RetryPolicy: ...

    @property
    def hooks(self) -> SessionHooks: ...

    def subscribe(self, listener: Callable[[Any], None], *, updates: bool = True) -> Callable[[], None]: ...

    def emit(self, event: Any) -> None: ...

    def stream_options(self, model: Model) -> StreamOptions: ...

    def check_model(self) -> None: ...

    def record_usage(self, usage: Any) -> None: ...

    def mark_context_unknown(self) -> None: ...

    def last_assistant_message(self) -> AssistantMessage | None: ...
