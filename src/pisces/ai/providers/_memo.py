"""What a message converts to for a provider, kept between requests; a request body whose messages are
already JSON text.

Every request of a session carries the whole history. Converting each message again at every request (pi's
transformMessages, the provider's own shape, then JSON) made pisces' own work per request grow with the
session: at 1,000 prompts about 45 ms of Python a request. A message is complete when it joins the
context and nothing changes it in place afterwards (the loop appends finished messages; compaction, a branch
switch, an extension's ``context`` handler hand over other message objects), so its conversion is kept
against the object itself.

Guarantees of :class:`MessageMemo`:

- a hit only for the very same message object (the entry holds a reference to it, so its id cannot be
  reused while the entry lives), under an equal key (what the conversion depends on besides the message:
  the model, the provider's flags), with the same ``content`` object of the same length (a list replaced or
  appended to is converted again);
- bounded: after each request (``sweep``), once the table holds more than twice the entries that request
  used plus ``margin``, the entries no request of the last ``KEEP_ROUNDS`` used are dropped, and if more
  than four times remain, all but that request's: at most ``4 * used + margin`` entries stay. A session's
  table follows its context (what compaction or a branch switch left behind goes), and the sessions of one
  process (subagents) share it without evicting each other's.

:class:`JsonBody` is a request body (a dict, sent as ``json.dumps(body, ensure_ascii=False,
separators=(",", ":"), allow_nan=True)`` in UTF-8) that has the encoded JSON of one of its lists' elements at
hand, in pieces that join with commas (a long session's: its history up to the last checkpoint in one piece,
then a piece per newer message); ``to_bytes`` joins those instead of encoding the list again and gives the
same bytes, and encodes everything again when that list is no longer the very one it was built with,
element for element.
"""

from __future__ import annotations

import json
import operator
from typing import Any

MISS: Any = object()
KEEP_ROUNDS = 16


class MessageMemo:
    """id(message) -> [message, key, content, len(content), value, last round used]."""

    __slots__ = ("_table", "_round", "_used", "margin")

    def __init__(self, margin: int = 512) -> None:
        self._table: dict[int, list[Any]] = {}
        self._round = 0
        self._used = 0
        self.margin = margin

    def __len__(self) -> int:
        return len(self._table)

    def get(self, msg: Any, key: Any) -> Any:
        """The value kept for ``msg`` under ``key``, or ``MISS``."""
        entry = self._table.get(id(msg))
        if entry is None or entry[0] is not msg or entry[1] != key:
            return MISS
        content = msg.content
        if entry[2] is not content or entry[3] != len(content):
            return MISS
        entry[5] = self._round
        self._used += 1
        return entry[4]

    def put(self, msg: Any, key: Any, value: Any) -> Any:
        content = msg.content
        self._table[id(msg)] = [msg, key, content, len(content), value, self._round]
        self._used += 1
        return value

    def sweep(self) -> None:
        """End of a request: drop what was not used lately once the table outgrows what requests use."""
        used, self._used = self._used, 0
        current = self._round
        self._round += 1
        if len(self._table) > 2 * used + self.margin:
            table = {k: e for k, e in self._table.items() if e[5] >= current - KEEP_ROUNDS}
            if len(table) > 4 * used + self.margin:  # many other contexts lately: this request's only
                table = {k: e for k, e in table.items() if e[5] == current}
            self._table = table


def dumps(value: Any) -> str:
    """The JSON text the direct transport sends for ``value`` (the SDK's ``json.dumps`` settings, compact)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=True)


def encoded(value: Any) -> bytes:
    """``dumps(value)`` as the UTF-8 bytes that go on the wire."""
    return dumps(value).encode("utf-8")


class JsonBody(dict[str, Any]):
    """A request body with the encoded JSON of each element of ``body[key]`` at hand (see the module's doc)."""

    __slots__ = ("_key", "_items", "_texts")

    def keep_texts(self, key: str, texts: list[bytes]) -> None:
        """``b",".join(texts)`` is the elements of ``self[key]`` encoded and joined by commas (a piece per
        element, or several elements in one), and stays so: the elements are not changed in place."""
        self._key = key
        self._items = tuple(self[key])
        self._texts = texts

    def _intact(self) -> bool:
        items = self.get(self._key)
        if not isinstance(items, list) or len(items) != len(self._items):
            return False
        return all(map(operator.is_, items, self._items))

    def to_bytes(self) -> bytes:
        """``encoded(self)``, the same bytes, without encoding the kept elements again (one copy of them)."""
        if not hasattr(self, "_texts") or not self._intact() or not all(isinstance(k, str) for k in self):
            return encoded(self)
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
        for i, text in enumerate(self._texts):  # one copy of each piece (a long session's: a few large ones)
            if i:
                parts.append(b",")
            parts.append(text)
        parts.append(b"]" + (b"," if tail else b"") + b",".join(tail) + b"}")
        return b"".join(parts)
