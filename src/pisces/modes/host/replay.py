"""What a resumable host keeps so that a client can come back: the replay buffer and the live state.

``ReplayBuffer`` holds the most recent broadcast frames, already encoded, for the stream profiles its clients
use (``deltas`` always: the smallest, and the browser's). It is bounded twice, by frames and by bytes; the
oldest go first. A client that reconnects with the last sequence number it saw gets the frames after it,
provided the buffer still holds every one of them in the client's profile.

``LiveState`` follows the events to know what a snapshot must show beyond ``get_state`` and
``get_messages``: the assistant message being streamed (as of the last event sent, so that the deltas that
follow apply to it exactly once) and the tool calls still running. A snapshot is one frame:

    {"type":"snapshot","streamId":S,"seq":N,"reason":"new"|"gap"|"stream","state":{get_state},
     "messages":[...],"streamingMessage":{...}?,"runningTools":[{toolCallId,toolName,args,partialResult?}],
     "queue":{"steering":[...],"followUp":[...]},"requests":[open dialogs and approvals]}

It reflects every frame up to ``seq`` N and none after; the live tail follows with N+1.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from pisces.ai.types import AssistantMessage
from pisces.modes.host.encoding import DELTAS

DEFAULT_REPLAY_BYTES = 8 * 1024 * 1024
DEFAULT_REPLAY_EVENTS = 20_000


class ReplayBuffer:
    def __init__(self, max_bytes: int | None = None, max_events: int | None = None) -> None:
        self.max_bytes = max_bytes if max_bytes is not None else DEFAULT_REPLAY_BYTES
        self.max_events = max_events if max_events is not None else DEFAULT_REPLAY_EVENTS
        self.profiles: set[str] = {DELTAS}
        self._frames: deque[tuple[int, dict[str, bytes], int]] = deque()
        self.bytes = 0

    def __len__(self) -> int:
        return len(self._frames)

    @property
    def first_seq(self) -> int | None:
        return self._frames[0][0] if self._frames else None

    def add(self, seq: int, frames: dict[str, bytes]) -> None:
        """``frames`` by profile; an approval frame also has its typed form under ``"typed <profile>"``."""
        kept = {k: f for k, f in frames.items() if k.rpartition(" ")[2] in self.profiles}
        size = sum(len(f) for f in kept.values())
        self._frames.append((seq, kept, size))
        self.bytes += size
        while self._frames and (self.bytes > self.max_bytes or len(self._frames) > self.max_events):
            self.bytes -= self._frames.popleft()[2]

    def since(self, since: int, current: int, profile: str, *, typed: bool = False
              ) -> list[tuple[int, bytes]] | None:
        """The frames numbered ``since``+1 .. ``current`` in ``profile`` (approval frames in their typed form
        for a ``typed`` client), or None when some are gone (or were never kept in that profile) or ``since``
        is not a number this stream has reached."""
        typed_key = "typed " + profile
        if not isinstance(since, int) or since < 0 or since > current:
            return None
        if since == current:
            return []
        first = self.first_seq
        if first is None or first > since + 1:
            return None
        out: list[tuple[int, bytes]] = []
        for seq, frames, _size in self._frames:
            if seq <= since:
                continue
            frame = frames.get(typed_key) if typed else None
            if frame is None:
                frame = frames.get(profile)
            if frame is None:
                return None
            out.append((seq, frame))
        if len(out) != current - since:
            return None
        return out


class LiveState:
    def __init__(self) -> None:
        self.streaming: Any = None  # the assistant message being streamed, as of the last event sent
        self.running: dict[str, dict[str, Any]] = {}  # toolCallId -> {toolCallId, toolName, args, partialResult?}
        self.queue: dict[str, list[str]] = {"steering": [], "followUp": []}  # as the last queue_update said

    def observe(self, event: Any) -> None:
        config = getattr(event, "__struct_config__", None)
        kind = config.tag if config is not None else (event.get("type") if isinstance(event, dict) else None)
        if kind == "queue_update":
            self.queue = {"steering": list(event.get("steering") or ()), "followUp": list(event.get("followUp") or ())}
        elif kind == "message_update":
            self.streaming = event.message
        elif kind == "message_start":
            message = event.message
            self.streaming = message if isinstance(message, AssistantMessage) else None  # role is a tag, no attribute
        elif kind == "message_end":
            self.streaming = None
        elif kind == "tool_execution_start":
            self.running[event.toolCallId] = {"toolCallId": event.toolCallId, "toolName": event.toolName,
                                              "args": event.args}
        elif kind == "tool_execution_update":
            entry = self.running.get(event.toolCallId)
            if entry is not None:
                entry["partialResult"] = event.partialResult
        elif kind == "tool_execution_end":
            self.running.pop(event.toolCallId, None)
        elif kind == "agent_end":
            self.streaming = None
            self.running.clear()

    def snapshot(self, host: Any, reason: str, client: Any) -> dict[str, Any]:
        session = host.session
        frame: dict[str, Any] = {"type": "snapshot", "streamId": host.stream_id, "seq": host.seq, "reason": reason,
                                 "state": session.get_state(), "messages": session.messages}
        if self.streaming is not None:
            frame["streamingMessage"] = self.streaming
        frame["runningTools"] = list(self.running.values())
        frame["queue"] = self.queue
        frame["requests"] = host.open_requests(client)
        return frame
