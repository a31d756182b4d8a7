"""Loading: torn and garbage lines, bad headers, unknown entries, migrations from v1 and v2."""

import json
import os

from pisces.ai.types import AssistantMessage
from pisces.core.store import (
    CompactionEntry,
    CompactionSummaryMessage,
    CustomMessage,
    MessageEntry,
    RawEntry,
    SessionManager,
    build_session_context,
    encode_line,
    load_session_file,
    message_role,
    parse_session_bytes,
)

HEADER = {"type": "session", "version": 3, "id": "01a20041-0000-7000-8000-000000000001",
          "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/w"}


def entry(i, parent, **kw):
    base = {"type": "message", "id": f"e{i:07d}", "parentId": parent, "timestamp": f"2026-01-01T00:00:0{i % 10}.000Z"}
    if "message" not in kw and kw.get("type", "message") == "message":
        kw["message"] = {"role": "user", "content": [{"type": "text", "text": f"m{i}"}], "timestamp": i}
    base.update(kw)
    return base


def lines(*objs):
    return b"".join(json.dumps(o, ensure_ascii=False).encode() + b"\n" for o in objs)


def write(tmp_path, data, name="s.jsonl"):
    p = tmp_path / name
    p.write_bytes(data)
    return str(p)


def chain(n):
    out, parent = [], None
    for i in range(n):
        e = entry(i, parent)
        out.append(e)
        parent = e["id"]
    return out


def test_torn_last_line_is_skipped_with_a_warning(tmp_path, capsys):
    data = lines(HEADER, *chain(3)) + b'{"type":"message","id":"e0000003","parentId":"e0000002","timest'
    path = write(tmp_path, data)
    loaded = load_session_file(path)
    assert [e.id for e in loaded.entries] == ["e0000000", "e0000001", "e0000002"]
    assert loaded.skipped_lines == 1 and not loaded.ends_with_newline
    err = capsys.readouterr().err
    assert "incomplete last line" in err and path in err


def test_garbage_middle_line_is_skipped_and_load_continues(tmp_path, capsys):
    c = chain(4)
    data = lines(HEADER, c[0], c[1]) + b"\x00\xffnot json at all\n" + b"[1,2]\n" + lines(c[2], c[3])
    loaded = load_session_file(write(tmp_path, data))
    assert [e.id for e in loaded.entries] == [e["id"] for e in c]
    assert loaded.skipped_lines == 2
    assert "malformed line 4" in capsys.readouterr().err
    ctx = build_session_context(loaded.entries)
    assert [m.content[0].text for m in ctx.messages] == ["m0", "m1", "m2", "m3"]


def test_crlf_and_blank_lines(tmp_path):
    data = lines(HEADER, *chain(2)).replace(b"\n", b"\r\n") + b"\r\n\n"
    loaded = load_session_file(write(tmp_path, data))
    assert len(loaded.entries) == 2 and loaded.skipped_lines == 0


def test_line_separator_inside_a_string_is_content(tmp_path):
    e = entry(0, None, message={"role": "user", "content": "a\u2028b\u2029c", "timestamp": 1})
    loaded = load_session_file(write(tmp_path, lines(HEADER, e)))
    assert loaded.entries[0].message.content == "a\u2028b\u2029c"


def test_invalid_header_means_empty(tmp_path):
    for data in [b"", b"\n\n", lines(chain(1)[0]), lines({"type": "session"}), b"garbage\n" + lines(chain(1)[0])]:
        loaded = parse_session_bytes(data)
        assert loaded.header is None and loaded.entries == []


def test_header_after_a_garbage_first_line_is_accepted(tmp_path):
    loaded = parse_session_bytes(b"\x00torn\n" + lines(HEADER, *chain(1)))
    assert loaded.header.id == HEADER["id"] and len(loaded.entries) == 1


def test_missing_file_is_none(tmp_path):
    assert load_session_file(str(tmp_path / "nope.jsonl")) is None


def test_unknown_entry_types_and_fields_round_trip(tmp_path):
    c = chain(2)
    odd = {"type": "future_thing", "id": "f0000001", "parentId": c[1]["id"], "timestamp": "2026-01-01T00:00:05.000Z",
           "payload": {"nested": [1, None, "x"]}}
    extra = entry(9, "f0000001", message={"role": "user", "content": "hi", "timestamp": 1, "newField": 1},
                  futureTopLevel=True)
    path = write(tmp_path, lines(HEADER, *c, odd, extra))
    sm = SessionManager.open(path)
    e = sm.get_entry("f0000001")
    assert isinstance(e, RawEntry) and e.type == "future_thing" and e.parentId == c[1]["id"]
    assert json.loads(encode_line(e)) == odd
    assert sm.get_leaf_id() == extra["id"]
    assert [x.id for x in sm.get_branch()] == [c[0]["id"], c[1]["id"], "f0000001", extra["id"]]
    # A branched copy keeps every field of every line, even the ones this version does not model.
    sm.append_message(AssistantMessage(api="a", provider="p", model="m", timestamp=2))
    new_path = sm.create_branched_session(sm.get_leaf_id())
    with open(new_path, encoding="utf-8") as f:
        copied = [json.loads(x) for x in f]
    assert copied[3] == odd and copied[4] == extra


def test_nulls_for_optional_fields_are_tolerated(tmp_path):
    e = entry(0, None, message={"role": "assistant", "content": [{"type": "text", "text": "t"}], "api": "a",
                                "provider": "p", "model": "m", "usage": {"input": 1, "output": 1, "cacheRead": 0,
                                "cacheWrite": 0, "totalTokens": 2, "cost": {"input": 0, "output": 0, "cacheRead": 0,
                                                                           "cacheWrite": 0, "total": 0}},
                                "stopReason": "stop", "timestamp": 1, "errorMessage": None, "responseId": None})
    loaded = load_session_file(write(tmp_path, lines(HEADER, e)))
    [got] = loaded.entries
    assert isinstance(got, MessageEntry) and message_role(got.message) == "assistant"
    assert build_session_context(loaded.entries).model == ("p", "m")


def test_duplicate_header_line_is_not_an_entry(tmp_path):
    c = chain(2)
    loaded = load_session_file(write(tmp_path, lines(HEADER, c[0], HEADER, c[1])))
    assert [e.id for e in loaded.entries] == [c[0]["id"], c[1]["id"]]


# ---------------------------------------------------------------------------------------------------------
# Migrations
# ---------------------------------------------------------------------------------------------------------
V1 = [
    {"type": "session", "id": "old-session-1", "timestamp": "2025-01-01T00:00:00.000Z", "cwd": "/w"},
    {"type": "model_change", "timestamp": "2025-01-01T00:00:00.001Z", "provider": "p", "modelId": "m"},
    {"type": "message", "timestamp": "2025-01-01T00:00:01.000Z",
     "message": {"role": "user", "content": "first", "timestamp": 1}},
    {"type": "message", "timestamp": "2025-01-01T00:00:02.000Z",
     "message": {"role": "assistant", "content": [{"type": "text", "text": "one"}], "api": "a", "provider": "p",
                 "model": "m", "usage": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0,
                                         "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}},
                 "stopReason": "stop", "timestamp": 2}},
    {"type": "message", "timestamp": "2025-01-01T00:00:03.000Z",
     "message": {"role": "user", "content": "second", "timestamp": 3}},
    {"type": "compaction", "timestamp": "2025-01-01T00:00:04.000Z", "summary": "sum", "firstKeptEntryIndex": 4,
     "tokensBefore": 50},
    {"type": "message", "timestamp": "2025-01-01T00:00:05.000Z",
     "message": {"role": "hookMessage", "customType": "h", "content": "from a hook", "display": True, "timestamp": 5}},
]


def test_v1_is_migrated_and_rewritten(tmp_path):
    path = write(tmp_path, lines(*V1))
    sm = SessionManager.open(path)
    entries = sm.get_entries()
    assert sm.get_header().version == 3 and sm.get_session_id() == "old-session-1"
    ids = [e.id for e in entries]
    assert all(len(i) == 8 and int(i, 16) >= 0 for i in ids) and len(set(ids)) == len(ids)
    assert [e.parentId for e in entries] == [None, *ids[:-1]]
    comp = entries[4]
    assert isinstance(comp, CompactionEntry) and comp.firstKeptEntryId == ids[3]  # file line 4 = "second"
    assert isinstance(entries[5].message, CustomMessage)
    ctx = sm.build_session_context()
    assert isinstance(ctx.messages[0], CompactionSummaryMessage)
    assert [message_role(m) for m in ctx.messages] == ["compactionSummary", "user", "custom"]
    assert ctx.messages[1].content == "second"
    # The file on disk is now v3, and loads the same without migrating again.
    with open(path, encoding="utf-8") as f:
        on_disk = [json.loads(x) for x in f]
    assert on_disk[0]["version"] == 3
    assert "firstKeptEntryIndex" not in on_disk[5] and on_disk[5]["firstKeptEntryId"] == ids[3]
    assert on_disk[6]["message"]["role"] == "custom"
    again = load_session_file(path)
    assert not again.migrated and [e.id for e in again.entries] == ids
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".tmp")]


def test_v2_hook_message_becomes_custom(tmp_path):
    header = dict(HEADER, version=2)
    hook = entry(1, "e0000000", message={"role": "hookMessage", "customType": "h", "content": "x", "display": False,
                                         "timestamp": 1})
    path = write(tmp_path, lines(header, entry(0, None), hook))
    loaded = load_session_file(path)
    assert loaded.migrated and [e.id for e in loaded.entries] == ["e0000000", "e0000001"]  # ids kept in v2
    sm = SessionManager.open(path)
    assert isinstance(sm.get_entry("e0000001").message, CustomMessage)
    with open(path, encoding="utf-8") as f:
        on_disk = [json.loads(x) for x in f]
    assert on_disk[0]["version"] == 3 and on_disk[2]["message"]["role"] == "custom"
    assert on_disk[1] == entry(0, None)


def test_known_type_that_does_not_fit_is_kept_and_reported(tmp_path, capsys):
    bad = entry(1, "e0000000", message={"role": "user", "content": 42, "timestamp": 1})
    path = write(tmp_path, lines(HEADER, entry(0, None), bad, entry(2, "e0000001")))
    sm = SessionManager.open(path)
    assert isinstance(sm.get_entry("e0000001"), RawEntry)
    assert json.loads(encode_line(sm.get_entry("e0000001"))) == bad
    assert [m.content[0].text for m in sm.build_session_context().messages] == ["m0", "m2"]
    assert "does not match the format" in capsys.readouterr().err
