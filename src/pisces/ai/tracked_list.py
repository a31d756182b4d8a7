"""``TrackedList``: a list that counts the changes made to it other than growth at its end.

Every request of a session carries the whole history, and the request path keeps what it worked out for the
previous request (which messages it checked, converted, encoded). Reusing that safely needs to know that the
history only grew since; finding out by comparing every message again costs a pass over the whole history at
every request. A ``TrackedList`` answers at once: ``edits`` goes up on every change other than ``append``,
``extend`` and ``+=`` (an item replaced, deleted, inserted, popped, the list sorted, reversed, cleared, ...),
so a reader that noted ``(edits, len)`` knows, while ``edits`` is the same, that the first ``len`` items are
still the same objects. A copy taken with :meth:`TrackedList.copy` remembers the list, the count and the
length it came from (``origin``), so two copies of one history can be compared the same way, over the part
each took from it (what was appended to a copy afterwards is its own).

What it cannot see: an item changed in place (a message whose content list is edited). Readers that depend
on items' insides check those themselves, as before; the list's owner can spare them most of that with
:meth:`TrackedList.seal`, which says that the items it holds now will not be changed in place any more (a
session says so once a run's extension handlers are done, see ``final_items``).
"""

from __future__ import annotations

from typing import Any, Iterable, SupportsIndex

Origin = tuple["TrackedList", int, int]  # the list a copy was taken from, its ``edits`` and its length then


class TrackedList(list[Any]):
    """A list with ``edits`` (changes other than growth at the end) and, for a copy, ``origin``: the list it was
    copied from, that list's ``edits`` then and how many items it had."""

    __slots__ = ("edits", "origin", "sealed", "__weakref__")

    edits: int
    origin: Origin | None
    sealed: tuple[int, int]  # ``edits`` and the length when ``seal`` was called

    def __init__(self, items: Iterable[Any] = ()) -> None:
        try:
            self.edits += 1  # ``__init__`` called again on a live list replaces its items
        except AttributeError:
            self.edits = 0
            self.origin = None
            self.sealed = (-1, 0)
        if isinstance(items, list) and type(items) is not list:
            # ``list.__init__`` copies a list's subclass (this one) item by item; ``list.copy`` of it is a plain
            # list, copied in one step, and so is that: a third less time for 4,000 items
            items = list.copy(items)
        super().__init__(items)

    def copy(self) -> TrackedList:
        """A copy that remembers this list, its ``edits`` and its length now (``origin``)."""
        dup = TrackedList(self)
        dup.origin = (self, self.edits, len(dup))
        return dup

    def seal(self) -> None:
        """Its owner's word that none of the items it holds now will be changed in place any more (their
        insides are final). Items appended afterwards are not covered; any edit of the list ends it."""
        self.sealed = (self.edits, len(self))

    def final_items(self) -> int:
        """How many of the first items were sealed (``seal``) with no edit of the list since."""
        edits, length = self.sealed
        return length if edits == self.edits else 0

    def unchanged_since(self, edits: int, length: int) -> bool:
        """Whether the first ``length`` items are the very ones they were when ``edits`` was the count."""
        return self.edits == edits and len(self) >= length

    # every change other than growth at the end counts
    def __setitem__(self, index: Any, value: Any) -> None:
        self.edits += 1
        super().__setitem__(index, value)

    def __delitem__(self, index: Any) -> None:
        self.edits += 1
        super().__delitem__(index)

    def __imul__(self, n: SupportsIndex) -> TrackedList:
        self.edits += 1
        return super().__imul__(n)

    def insert(self, index: SupportsIndex, value: Any) -> None:
        self.edits += 1
        super().insert(index, value)

    def pop(self, index: SupportsIndex = -1) -> Any:
        self.edits += 1
        return super().pop(index)

    def remove(self, value: Any) -> None:
        self.edits += 1
        super().remove(value)

    def clear(self) -> None:
        self.edits += 1
        super().clear()

    def sort(self, *args: Any, **kwargs: Any) -> None:
        self.edits += 1
        super().sort(*args, **kwargs)

    def reverse(self) -> None:
        self.edits += 1
        super().reverse()


def origin_of(items: Any) -> Origin | None:
    """Where ``items`` was copied from, when it is a ``TrackedList`` copy not changed since (else None)."""
    if type(items) is TrackedList and not items.edits:
        return items.origin
    return None


def same_start(copy: Any, origin: Origin | None, length: int) -> bool:
    """Whether ``copy`` (a list handed to a request) starts with the same ``length`` objects as an earlier copy
    of the same history whose ``origin`` was noted: both are unchanged copies of one ``TrackedList`` taken at
    the same ``edits``, so the history only grew between them, and both took at least ``length`` items from
    it."""
    mine = origin_of(copy)
    if origin is None or mine is None:
        return False
    source, edits, took = mine
    return source is origin[0] and edits == origin[1] and length <= min(took, origin[2])


class Prefix:
    """The first ``n`` items of a list as they are now, kept for later: a ``TrackedList`` is held as it is
    (no copy; ``held`` says whether its first ``n`` items are still those), any other list copied."""

    __slots__ = ("items", "n", "edits")

    def __init__(self, items: list[Any], n: int) -> None:
        self.n = n
        if type(items) is TrackedList:
            self.items: list[Any] = items
            self.edits: int | None = items.edits
        else:
            self.items = items[:n]
            self.edits = None

    def held(self) -> bool:
        """Whether the items are still the ones they were (always, for a copy)."""
        items = self.items
        return self.edits is None or (isinstance(items, TrackedList) and items.unchanged_since(self.edits, self.n))

    def since(self, start: int) -> list[Any]:
        """The items from ``start`` to ``n``."""
        return self.items[start:self.n]

    def extend_into(self, out: list[Any]) -> None:
        """Append the ``n`` items to ``out`` (a pass over them; a longer held list's rest is dropped after)."""
        start = len(out)
        out += self.items
        if len(out) > start + self.n:
            list.__delitem__(out, slice(start + self.n, None))  # what was added past the prefix: not an edit

    def equals(self, items: list[Any]) -> bool:
        """Whether ``items`` (of length ``n``) holds equal items in the same order."""
        mine = self.items
        return (mine if len(mine) == self.n else mine[:self.n]) == items
