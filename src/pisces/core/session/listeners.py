"""``Listeners``: who a session sends its events to, split for the one event a reply sends thousands of times.

``all`` holds every listener, ``updates`` those that also want ``message_update`` (one per streamed delta), both
in the order they subscribed. Both are tuples that are replaced, never changed in place, so an emitter iterates
them without a copy: a listener that subscribes or unsubscribes while an event is being sent takes effect from
the next event.
"""

from __future__ import annotations

from typing import Any, Callable

Listener = Callable[[Any], None]


class Listeners:
    __slots__ = ("all", "updates")

    def __init__(self) -> None:
        self.all: tuple[Listener, ...] = ()
        self.updates: tuple[Listener, ...] = ()

    def add(self, listener: Listener, updates: bool = True) -> Callable[[], None]:
        """Subscribe ``listener`` (to ``message_update`` too unless ``updates`` is false); returns the function
        that unsubscribes it (harmless when called again)."""
        self.all = (*self.all, listener)
        if updates:
            self.updates = (*self.updates, listener)

        def remove() -> None:
            self.all = _without(self.all, listener)
            if updates:
                self.updates = _without(self.updates, listener)

        return remove


def _without(listeners: tuple[Listener, ...], listener: Listener) -> tuple[Listener, ...]:
    """``listeners`` less the first occurrence of ``listener`` (the same tuple when it is not there)."""
    if listener not in listeners:
        return listeners
    rest = list(listeners)
    rest.remove(listener)
    return tuple(rest)
