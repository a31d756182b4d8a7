"""A request body whose messages are already JSON (``JsonBody``), and the JSON the direct transport sends.

Every request of a session carries the whole history; the Chat Completions provider keeps each message's
JSON between requests (``openai_chat_messages``) and hands the transport a body that has it at hand.

:class:`JsonBody` is a request body (a dict, sent as ``json.dumps(body, ensure_ascii=False,
separators=(",", ":"), allow_nan=True)`` in UTF-8) that has the encoded JSON of one of its lists' elements at
hand, in pieces that join with commas (a long session's: its history up to the last checkpoint in one piece,
then a piece per newer message); ``to_bytes`` joins those instead of encoding the list again and gives the
same bytes, and encodes everything again when that list is no longer the very one it was built with,
element for element.
"""

from __future__ import annotations

import json
from typing import Any

from pisces.ai.tracked_list import TrackedList


def dumps(value: Any) -> str:
    """The JSON text the direct transport sends for ``value`` (the SDK's ``json.dumps`` settings, compact)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=True)


def encoded(value: Any) -> bytes:
    """``dumps(value)`` as the UTF-8 bytes that go on the wire."""
    return dumps(value).encode("utf-8")


def grown(chunks: tuple[bytes, ...], more: list[bytes]) -> tuple[bytes, ...]:
    """``chunks`` and then ``more``, pieces of JSON that join with commas, as a few pieces that join to the
    same text. The new text merges with the pieces before it while it is at least half as long as the one it
    follows, so each piece is at least twice the next: a history is held in about log2 of its length pieces,
    and each byte of it is copied about that many times over the whole session, where joining it into one
    piece copies the whole history at every request (and a large buffer, allocated afresh, costs a page fault
    per 4 KiB)."""
    if not more:
        return chunks
    out = list(chunks)
    last = b",".join(more)
    while out and len(out[-1]) < 2 * len(last):
        last = b",".join((out.pop(), last))
    out.append(last)
    return tuple(out)


LARGE = 64 * 1024  # a piece of a body this long is handed on as it is, not joined into a larger one


def coalesced(parts: list[bytes]) -> list[bytes]:
    """The bytes of ``parts`` in as few pieces as can be had without copying a large one: each piece of
    ``LARGE`` bytes or more as it is, each run of smaller ones between them joined into one."""
    out: list[bytes] = []
    run: list[bytes] = []
    for part in parts:
        if len(part) >= LARGE:
            if run:
                out.append(b"".join(run))
                run = []
            out.append(part)
        else:
            run.append(part)
    if run or not out:
        out.append(b"".join(run))
    return out


class JsonBody(dict[str, Any]):
    """A request body with the encoded JSON of each element of ``body[key]`` at hand (see the module's doc)."""

    __slots__ = ("_key", "_items", "_mark", "_texts")

    def keep_texts(self, key: str, texts: list[bytes]) -> None:
        """``b",".join(texts)`` is the elements of ``self[key]`` encoded and joined by commas (a piece per
        element, or several elements in one), and stays so: the elements are not changed in place. The list
        becomes a ``TrackedList``, which says whether it was changed since, without a pass over it."""
        items = self[key]
        if type(items) is not TrackedList:
            self[key] = items = TrackedList(items)
        self._key = key
        self._items = items
        self._mark = (items.edits, len(items))
        self._texts = texts

    def _intact(self) -> bool:
        """Whether ``self[key]`` is still the very list, holding the same elements."""
        items = self.get(self._key)
        return items is self._items and (items.edits, len(items)) == self._mark

    def to_bytes(self) -> bytes:
        """``encoded(self)``, the same bytes, without encoding the kept elements again (one copy of them)."""
        return b"".join(self.to_parts())

    def to_parts(self) -> list[bytes]:
        """The bytes of ``to_bytes`` in pieces: each kept piece of ``LARGE`` bytes or more as it is, what lies
        between them joined. A long session's body is its history's few large pieces and small ones between:
        sent in these pieces, it is not copied whole once more before the socket takes it."""
        if not hasattr(self, "_texts") or not self._intact() or not all(isinstance(k, str) for k in self):
            return [encoded(self)]
        head: list[bytes] = []
        tail: list[bytes] = []
        side = head
        for k, v in self.items():
            if k == self._key:
                head.append(encoded(k) + b":[")
                side = tail
            else:
                side.append(encoded(k) + b":" + encoded(v))
        parts = [b"{" + b",".join(head)]
        for i, text in enumerate(self._texts):
            if i:
                parts.append(b",")
            parts.append(text)
        parts.append(b"]" + (b"," if tail else b"") + b",".join(tail) + b"}")
        return coalesced(parts)
