"""The stream encoder: pi's message_update bytes in the full profile (the snapshot encoded once, its bytes
used twice), the lean and deltas profiles, and every other frame the same in all profiles."""

from __future__ import annotations

import json

import msgspec
import pytest

from pisces.agent.types import MessageEndEvent, MessageUpdateEvent
from pisces.ai.types import AssistantMessage, TextContent, TextDeltaEvent, ToolCall, ToolCallEndEvent
from pisces.modes.host import encoding as se


def _update(text: str = "Hello", delta: str = "lo") -> MessageUpdateEvent:
    msg = AssistantMessage(content=[TextContent(text=text)], api="faux", provider="faux", model="faux",
                           timestamp=1, responseId="r")
    return MessageUpdateEvent(assistantMessageEvent=TextDeltaEvent(contentIndex=0, delta=delta, partial=msg),
                              message=msg)


def test_full_profile_is_pis_frame_byte_for_byte():
    ev = _update("Hé\u2028llo")
    frame = se.StreamEncoder().encode(ev, se.FULL)
    snapshot = msgspec.json.encode(ev.message)
    assert frame == (b'{"type":"message_update","assistantMessageEvent":{"type":"text_delta","contentIndex":0,'
                     b'"delta":"lo","partial":' + snapshot + b'},"message":' + snapshot + b'}\n')
    assert "é".encode() in frame  # UTF-8, not \u escapes
    assert frame == msgspec.json.encode(ev) + b"\n"  # the same bytes as encoding the whole event


def test_lean_and_deltas_profiles():
    ev = _update()
    enc = se.StreamEncoder()
    lean = json.loads(enc.encode(ev, se.LEAN))
    assert lean == {"type": "message_update", "assistantMessageEvent": {"type": "text_delta", "contentIndex": 0,
                                                                       "delta": "lo"},
                    "message": msgspec.to_builtins(ev.message)}
    deltas = json.loads(enc.encode(ev, se.DELTAS))
    assert deltas == {"type": "message_update",
                      "assistantMessageEvent": {"type": "text_delta", "contentIndex": 0, "delta": "lo"}}
    assert ev.assistantMessageEvent.partial is ev.message  # encoding left the event as it was


def test_snapshot_is_encoded_once_for_every_profile(monkeypatch):
    ev = _update()
    enc = se.StreamEncoder()
    encoded: list[object] = []
    real = enc.append

    def counting(obj, buf):
        encoded.append(obj)
        real(obj, buf)

    monkeypatch.setattr(enc, "append", counting)
    frames = enc.encode_profiles(ev, se.PROFILES)
    assert sum(1 for o in encoded if o is ev.message) == 1
    assert set(frames) == set(se.PROFILES)
    assert len(frames[se.DELTAS]) < len(frames[se.LEAN]) < len(frames[se.FULL])


def test_other_frames_are_the_same_in_every_profile():
    end = MessageEndEvent(message=_update().message)
    call = ToolCallEndEvent(contentIndex=0, toolCall=ToolCall(id="c", name="bash", arguments={"command": "ls"}))
    enc = se.StreamEncoder()
    for obj in (end, {"type": "agent_settled"}, {"id": 1, "type": "response", "success": True}, call):
        frames = enc.encode_profiles(obj, se.PROFILES)
        assert len(set(frames.values())) == 1
        assert frames[se.FULL] == msgspec.json.encode(obj) + b"\n"


def test_lone_surrogate_in_a_delta_is_written_as_json_stringify_does():
    ev = _update(text="a\ud800", delta="\ud800")
    for profile in se.PROFILES:
        frame = se.StreamEncoder().encode(ev, profile)
        assert b"\\ud800" in frame and json.loads(frame)["assistantMessageEvent"]["delta"] == "\ud800"


def test_unknown_profile_and_profile_for():
    with pytest.raises(ValueError, match="unknown stream profile"):
        se.StreamEncoder().encode({"type": "x"}, "huge")
    assert se.profile_for() == se.FULL
    assert se.profile_for(partial=False) == se.LEAN
    assert se.profile_for(message_snapshots=False) == se.DELTAS
    assert se.profile_for(partial=True, message_snapshots=False) == se.DELTAS


def test_parts_for_writev_are_the_same_bytes():
    enc = se.StreamEncoder()
    for obj in (_update(), MessageEndEvent(message=_update().message), {"type": "agent_end"}):
        for profile in se.PROFILES:
            assert b"".join(enc.encode_parts(obj, profile)) == enc.encode(obj, profile)
    parts = enc.encode_parts(_update(), se.FULL)
    snapshot = enc.encode(_update().message, se.FULL)[:-1]
    snapshots = [p for p in parts if p == snapshot]
    assert len(snapshots) == 2 and snapshots[0] is snapshots[1]  # one encoded snapshot, written twice


def test_parts_for_writev_take_the_careful_path_for_what_the_fast_one_cannot_encode():
    enc = se.StreamEncoder()
    deep: list = []
    for _ in range(5000):  # deeper than Python's recursion limit
        deep = [deep]
    odd = [_update(text="a\ud800", delta="b"), _update(text="ok", delta="\ud800"), _update()]
    odd[2].message.content.append(ToolCall(id="c", name="t", arguments={"deep": deep}))
    for ev in odd:
        joined = b"".join(enc.encode_parts(ev, se.FULL))
        assert joined == enc.encode(ev, se.FULL) and joined.endswith(b"}\n")
        assert ev.assistantMessageEvent.partial is ev.message  # the event is left as it was
    assert b"\\ud800" in b"".join(enc.encode_parts(odd[1], se.FULL))
    with pytest.raises(ValueError, match="unknown stream profile"):
        enc.encode_parts(_update(), "huge")
