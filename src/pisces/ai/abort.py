"""A cancellation signal shared by the LLM layer, the agent loop and the tools."""

from __future__ import annotations

from typing import Callable


class AbortSignal:
    """Set once by ``abort()``; listeners run synchronously at that moment (in the event loop)."""

    __slots__ = ("aborted", "reason", "_listeners")

    def __init__(self) -> None:
        self.aborted = False
        self.reason: str | None = None
        self._listeners: list[Callable[[], None]] = []

    def abort(self, reason: str | None = None) -> None:
        if self.aborted:
            return
        self.aborted = True
        self.reason = reason
        listeners, self._listeners = self._listeners, []
        for cb in listeners:
            try:
                cb()
            except Exception:  # noqa: BLE001 - a listener must never stop the others
                pass

    def add_listener(self, cb: Callable[[], None]) -> Callable[[], None]:
        """Call ``cb`` on abort (at once if already aborted). Returns a function that removes it."""
        if self.aborted:
            cb()
            return lambda: None
        self._listeners.append(cb)

        def remove() -> None:
            try:
                self._listeners.remove(cb)
            except ValueError:
                pass

        return remove
