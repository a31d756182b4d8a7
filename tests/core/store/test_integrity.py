"""Session data integrity: what the store refuses to write over, what it notices another process did to its
file, what a malformed file costs (only itself), and clones/forks that keep the whole path past labels."""

import json
import os

import pytest

from pisces.ai.types import AssistantMessage, TextContent, UserMessage
from pisces.core.store import (
    SessionFileError,
    SessionManager,
    build_session_context,
    entry_type,
    list_sessions,
    load_session_file,
    load_target,
)
from pisces.core.store.listing import find_most_recent_session, read_session_info


def user(text):
    return UserMessage(content=[TextContent(text=text)], timestamp=1)


def assistant(text):
    return AssistantMessage(content=[TextContent(text=text)], api="faux", provider="faux", model="faux",
                            stopReason="stop", timestamp=2)


def lines(path):
    with open(path, "rb") as f:
        return [json.loads(x) for x in f.read().splitlines() if x.strip()]


def texts(sm):
    return [m.content[0].text for m in sm.build_session_context().messages]


def two_turns_with_a_label(tmp_path):
    sm = SessionManager.create("/w", str(tmp_path))
    first = sm.append_message(user("q1"))
    sm.append_message(assistant("a1"))
    sm.append_label_change(first, "start")
    sm.append_message(user("q2"))
    sm.append_message(assistant("a2"))
    return sm, first


# -- clone and fork past a label ---------------------------------------------------------------
def test_clone_after_a_label_keeps_the_whole_conversation(tmp_path):
    sm, first = two_turns_with_a_label(tmp_path)
    label_time = next(e for e in sm.get_entries() if entry_type(e) == "label").timestamp
    old_file = sm.get_session_file()
    new_file = sm.create_branched_session(sm.get_leaf_id())
    assert texts(sm) == ["q1", "a1", "q2", "a2"]
    assert sm.get_label(first) == "start"
    reopened = SessionManager.open(new_file)
    assert texts(reopened) == ["q1", "a1", "q2", "a2"]
    by_id = {e["id"]: e for e in lines(new_file)[1:]}
    for entry in by_id.values():  # every parent is in the copy: one chain from the root
        assert entry["parentId"] is None or entry["parentId"] in by_id
    label = [e for e in by_id.values() if e["type"] == "label"]
    assert len(label) == 1 and label[0]["targetId"] == first and label[0]["timestamp"] == label_time  # as pi
    assert texts(SessionManager.open(old_file)) == ["q1", "a1", "q2", "a2"]  # the original is untouched


def test_fork_past_a_label_keeps_the_path_in_memory_too(tmp_path):
    sm = SessionManager.in_memory("/w")
    first = sm.append_message(user("q1"))
    sm.append_message(assistant("a1"))
    sm.append_label_change(first, "start")
    q2 = sm.append_message(user("q2"))
    sm.append_message(assistant("a2"))
    sm.append_message(user("q3"))
    sm.create_branched_session(sm.get_entry(sm.get_leaf_id()).parentId)
    assert texts(sm) == ["q1", "a1", "q2", "a2"]
    ctx = build_session_context(sm.get_entries(), sm.get_leaf_id(), {e.id: e for e in sm.get_entries()})
    assert [m.content[0].text for m in ctx.messages] == ["q1", "a1", "q2", "a2"]
    assert sm.get_entry(q2).parentId != sm.get_entry(q2).id


# -- what the store refuses --------------------------------------------------------------------
def test_targets_that_are_refused(tmp_path):
    notes = tmp_path / "notes.md"
    notes.write_text("# my notes\n")
    link = tmp_path / "session.jsonl"
    link.symlink_to(notes)
    for path, why in ((notes, "it is not a session file"), (link, "it is not a session file"),
                      (tmp_path, "it is a directory"), (notes / "x.jsonl", "a part of its directory is a file")):
        with pytest.raises(SessionFileError, match=why) as info:
            load_target(str(path))
        assert str(info.value) == f"Cannot use {path} as the session file: {why}" + (
            " (its first line is not a session header)" if "session file" in why else "")
    assert notes.read_text() == "# my notes\n"


def test_unwritable_targets_are_refused(tmp_path):
    with pytest.raises(SessionFileError, match="no file can be created in /sys"):
        load_target("/sys/pisces-session.jsonl")  # refused even to root
    if os.geteuid() != 0:
        locked = tmp_path / "ro"
        locked.mkdir()
        os.chmod(locked, 0o500)
        with pytest.raises(SessionFileError, match="no file can be created"):
            load_target(str(locked / "s.jsonl"))


def test_a_missing_target_leaves_nothing_behind(tmp_path):
    assert load_target(str(tmp_path / "new.jsonl")) is None
    assert load_target(str(tmp_path / "a" / "b" / "new.jsonl")) is None
    assert os.listdir(tmp_path) == []


# -- another process changed the file ------------------------------------------------------------
def test_truncated_by_another_process_is_written_again_with_its_header(tmp_path, capsys):
    sm, _ = two_turns_with_a_label(tmp_path)
    path = sm.get_session_file()
    with open(path, "r+b") as f:
        f.truncate(0)
    sm.append_message(user("q3"))
    assert "was truncated by another process" in capsys.readouterr().err
    got = lines(path)
    assert got[0]["type"] == "session" and got[0]["id"] == sm.get_session_id()
    assert texts(SessionManager.open(path)) == ["q1", "a1", "q2", "a2", "q3"]


def test_truncated_before_the_first_append_after_opening(tmp_path, capsys):
    sm, _ = two_turns_with_a_label(tmp_path)
    path = sm.get_session_file()
    sm.close()
    reopened = SessionManager.open(path)
    with open(path, "r+b") as f:
        f.truncate(100)  # mid-header
    reopened.append_message(user("q3"))
    assert "was truncated" in capsys.readouterr().err
    assert texts(SessionManager.open(path)) == ["q1", "a1", "q2", "a2", "q3"]


def test_replaced_by_other_content_moves_the_session_aside(tmp_path, capsys):
    sm, _ = two_turns_with_a_label(tmp_path)
    path = sm.get_session_file()
    with open(path + ".new", "w") as f:
        f.write("someone else's file\n" * 200)
    os.replace(path + ".new", path)
    sm.append_message(user("q3"))
    err = capsys.readouterr().err
    assert "was deleted or replaced" in err and "holds content that is not this session's" in err
    with open(path) as f:
        assert f.read() == "someone else's file\n" * 200
    moved = sm.get_session_file()
    assert moved != path and os.path.dirname(moved) == os.path.dirname(path)
    assert texts(SessionManager.open(moved)) == ["q1", "a1", "q2", "a2", "q3"]


def test_a_write_cut_short_is_completed_in_place(tmp_path, monkeypatch):
    sm = SessionManager.create("/w", str(tmp_path))
    sm.append_message(user("q1"))
    import pisces.core.store.session_file as sf

    real = sf._write_all
    calls = []

    def short(fd, data):  # the first write stops half-way (disk full), later ones work
        calls.append(1)
        if len(calls) == 1:
            os.write(fd, data[: len(data) // 2])
            raise OSError(28, "No space left on device")
        real(fd, data)

    monkeypatch.setattr(sf, "_write_all", short)
    sm.append_message(assistant("a1"))
    assert sm.last_write_error is not None
    sm.append_message(user("q2"))
    assert texts(SessionManager.open(sm.get_session_file())) == ["q1", "a1", "q2"]
    assert len(lines(sm.get_session_file())) == 1 + 3  # the half line was replaced, not left behind


# -- a malformed file costs only itself ---------------------------------------------------------
DEEP = b'{"type":"message","id":"deadbeef","parentId":null,"message":' + b"[" * 100_000 + b"]" * 100_000 + b"}"


def good_session(directory, name="good.jsonl"):
    sm = SessionManager.create("/w", str(directory))
    sm.append_message(user("hello"))
    sm.append_message(assistant("hi"))
    return sm.get_session_file()


def test_a_line_nested_too_deeply_is_skipped(tmp_path, capsys):
    path = good_session(tmp_path)
    with open(path, "ab") as f:
        f.write(DEEP + b"\n")
    loaded = load_session_file(path)
    assert loaded.skipped_lines == 1 and len(loaded.entries) == 2
    assert "nested too deeply" in capsys.readouterr().err
    assert read_session_info(path).messageCount == 2


def test_files_with_a_deep_or_non_utf8_header_are_no_sessions(tmp_path):
    good = good_session(tmp_path)
    deep = tmp_path / "deep.jsonl"
    deep.write_bytes(b'{"type":"session","id":' + b"[" * 100_000 + b"]" * 100_000 + b"}\n")
    bad_utf8 = tmp_path / "latin1.jsonl"
    bad_utf8.write_bytes(b'{"type":"session","version":3,"id":"x","timestamp":"2026-01-01T00:00:00.000Z",'
                         b'"cwd":"/caf\xe9"}\n')
    for path in (deep, bad_utf8):
        assert load_session_file(str(path)).header is None
        assert read_session_info(str(path)) is None
        with pytest.raises(SessionFileError, match="not a session file"):
            load_target(str(path))
    os.utime(good, (1, 1))  # the broken files are newer
    assert find_most_recent_session(str(tmp_path)) == good
    assert [s.path for s in list_sessions(str(tmp_path))] == [good]


def test_one_file_that_breaks_the_reader_does_not_fail_the_listing(tmp_path, monkeypatch, capsys):
    good = good_session(tmp_path)
    other = tmp_path / "other.jsonl"
    other.write_bytes(open(good, "rb").read())
    import pisces.core.store.listing as listing

    real = listing.read_session_info

    def flaky(path):
        if path.endswith("other.jsonl"):
            raise MemoryError("simulated")
        return real(path)

    monkeypatch.setattr(listing, "read_session_info", flaky)
    assert [s.path for s in list_sessions(str(tmp_path))] == [good]
    assert "other.jsonl: left out of the session list (MemoryError: simulated)" in capsys.readouterr().err


def test_a_crlf_session_is_appended_to_in_place(tmp_path, capsys):
    sm, _ = two_turns_with_a_label(tmp_path)
    path = sm.get_session_file()
    sm.close()
    with open(path, "rb") as f:
        data = f.read()
    with open(path, "wb") as f:
        f.write(data.replace(b"\n", b"\r\n"))
    reopened = SessionManager.open(path)
    reopened.append_message(user("q3"))
    assert reopened.get_session_file() == path and capsys.readouterr().err == ""
    assert texts(SessionManager.open(path)) == ["q1", "a1", "q2", "a2", "q3"]
