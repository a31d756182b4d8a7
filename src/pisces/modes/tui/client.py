"""The TUI's link to the host: an in-process ``Client`` of ``pisces.modes.host`` that speaks the same frames
as stdio and the web mode (the one command table, the one event stream). Frames arrive as dicts.

One shortcut: a streamed text or thinking delta handed to this client as the event itself (the host does so
when the TUI is its only client) goes to ``on_delta`` as its text, without being encoded to JSON and decoded
again; what arrives is what the frame's ``assistantMessageEvent.delta`` would hold. Without ``on_delta``, or
for every other frame, the frame bytes are decoded as any client's."""

from __future__ import annotations

import asyncio
import itertools
import json
from typing import Any, Callable

import msgspec

from pisces.agent.types import MessageUpdateEvent
from pisces.ai.types import TextDeltaEvent, ThinkingDeltaEvent
from pisces.modes.host.encoding import DELTAS
from pisces.modes.host.host import Client, Host

_decode = msgspec.json.Decoder().decode


class LocalClient(Client):
    kind = "tui"

    def __init__(self, host: Host, on_frame: Callable[[dict[str, Any]], None]) -> None:
        super().__init__(host, DELTAS)
        self.typed_approvals = True  # the TUI shows the typed approval frames (scopes, identity, diff)
        self.on_frame = on_frame
        self._ids = itertools.count(1)
        self._waiting: dict[str, asyncio.Future[Any]] = {}
        self.on_delta: Callable[[str, bool], None] | None = None  # (text, thinking) of a streamed delta

    def write(self, obj: Any) -> None:
        if type(obj) is MessageUpdateEvent and self.on_delta is not None:
            ame = obj.assistantMessageEvent
            kind = type(ame)
            if kind is TextDeltaEvent or kind is ThinkingDeltaEvent:
                self.on_delta(ame.delta, kind is ThinkingDeltaEvent)
                return
        super().write(obj)

    def send_bytes(self, frame: bytes) -> None:
        try:
            obj = _decode(frame)  # msgspec: a few times faster than json for the stream of deltas
        except msgspec.DecodeError:
            obj = json.loads(frame)  # what msgspec refuses (a lone surrogate's escape) json still reads
        if obj.get("type") == "response" and obj.get("id") in self._waiting:
            fut = self._waiting.pop(obj["id"])
            if not fut.done():
                fut.set_result(obj)
            return
        self.on_frame(obj)

    def send(self, cmd: dict[str, Any]) -> None:
        """A command or an answer, without waiting for its response."""
        self.host.dispatch(self, cmd, None)

    async def request(self, cmd: dict[str, Any]) -> dict[str, Any]:
        """A command; returns its response frame (``success``, ``data`` or ``error``)."""
        rid = f"tui-{next(self._ids)}"
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting[rid] = fut
        self.host.dispatch(self, {**cmd, "id": rid}, None)
        return await fut
