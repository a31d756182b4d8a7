"""Cancellable hook points (session_before_switch, session_before_fork, session_before_tree, ...).

Extensions register handlers here; a handler gets the event details and may return ``{"cancel": True}``
(or an awaitable of it) to stop the action, which the RPC command then reports as ``cancelled: true``.
"""

from __future__ import annotations

import inspect
import sys
from collections import defaultdict
from typing import Any, Callable

Handler = Callable[[dict[str, Any]], Any]


class Hooks:
    def __init__(self) -> None:
        self._handlers: dict[str, list[Handler]] = defaultdict(list)

    def on(self, name: str, handler: Handler) -> Callable[[], None]:
        self._handlers[name].append(handler)
        return lambda: self._handlers[name].remove(handler) if handler in self._handlers[name] else None

    async def cancelled(self, name: str, **details: Any) -> bool:
        event = {"type": name, **details}
        for handler in list(self._handlers.get(name, ())):
            try:
                result = handler(event)
                if inspect.isawaitable(result):
                    result = await result
            except Exception as exc:  # noqa: BLE001 - a broken hook must not break the session
                sys.stderr.write(f"pisces: hook {name} failed: {exc}\n")
                continue
            if isinstance(result, dict) and result.get("cancel"):
                return True
        return False
