"""What the session asks of its extensions (``session.hooks``), and the answer when there are none.

``NoHooks`` is the session's default: every method answers "nothing to do" at once, so a session without
extensions pays nothing. ``pisces.core.extensions.binding.ExtensionHost`` implements the same methods when
extensions are loaded: the cancellable ``session_before_*`` events (``before``), notifications, extension
commands, the ``input`` and ``before_agent_start`` events, the agent events (handlers run before the session
sees each event, in order), reload and shutdown.
"""

from __future__ import annotations

from typing import Any, Callable


class NoHooks:
    active = False

    async def start(self, reason: str = "startup", previous: str | None = None) -> None:
        pass

    async def before(self, name: str, event: dict[str, Any]) -> Any:
        """A ``session_before_*`` event; the combined result (``{"cancel": True}`` cancels) or None."""
        return None

    async def notify(self, event: dict[str, Any]) -> None:
        pass

    def notify_soon(self, event: dict[str, Any]) -> None:
        """``notify`` from synchronous code (model_select, thinking_level_select): the handlers run next."""

    async def leaving(self, reason: str, target: str | None) -> None:
        """The session is about to move to another file (``new``, ``resume``, ``fork``)."""

    async def replaced(self, reason: str, previous: str | None, target: str | None) -> None:
        """The session moved to another file (``new``, ``resume`` or ``fork``)."""

    def command_name(self, text: str) -> str | None:
        """The extension command ``text`` invokes (``/name args``), or None."""
        return None

    async def run_command(self, text: str) -> bool:
        return False

    async def input(self, text: str, images: Any, source: str) -> tuple[bool, str, Any]:
        """(handled, text, images) after the ``input`` handlers."""
        return False, text, images

    async def before_agent_start(self, prompt: str, images: Any, base_prompt: Callable[[], str]
                                 ) -> tuple[list[Any], str | None]:
        """(custom messages to add after the user message, a replacement system prompt or None)."""
        return [], None

    def commands(self) -> list[dict[str, Any]]:
        return []

    async def user_bash(self, command: str, cwd: str) -> dict[str, Any] | None:
        """An RPC ``bash`` command an extension ran itself: its result (output, exitCode, ...), else None."""
        return None

    def agent_event(self, event: Any, deliver: Callable[[Any], None]) -> None:
        deliver(event)

    async def drain(self) -> None:
        pass

    def abort_handlers(self) -> None:
        """The session aborts: stop waiting for any handler still running."""

    def abort_finished(self) -> None:
        """The session is idle after an abort: handlers run without a time limit again."""

    async def reload(self) -> None:
        pass

    async def shutdown(self, reason: str = "quit") -> None:
        pass
