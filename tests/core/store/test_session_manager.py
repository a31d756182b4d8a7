"""SessionManager: lazy write, append-only lines, tree and leaf, branching, forks, in-memory mode."""

import json
import os
import re

import pytest

from pisces.ai.types import AssistantMessage, TextContent, UserMessage
from pisces.core.store import (
    BashExecutionMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    CustomMessage,
    EntryNotFoundError,
    LabelEntry,
    SessionFileError,
    SessionManager,
    default_session_dir,
    encode_line,
    entry_type,
    load_session_file,
    message_role,
)

FILE_NAME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d-\d{3}Z_[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}\.jsonl$")
ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


def user(text):
    return UserMessage(content=[TextContent(text=text)])


def assistant(text, stop="stop"):
    return AssistantMessage(content=[TextContent(text=text)] if text else [], api="openai-completions",
                            provider="p", model="m", stopReason=stop)


def read_lines(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def start(sm):
    sm.append_model_change("p", "m")
    sm.append_thinking_level_change("off")


def test_nothing_on_disk_before_the_first_assistant(tmp_path):
    sdir = tmp_path / "sessions"
    sm = SessionManager.create("/work", str(sdir))
    path = sm.get_session_file()
    assert FILE_NAME.match(os.path.basename(path)) and os.path.dirname(path) == str(sdir)
    start(sm)
    sm.append_message(BashExecutionMessage(command="ls", output="", exitCode=0))
    sm.append_session_info("name")
    sm.append_message(user("hi"))
    assert not os.path.exists(path) and not sm.is_on_disk()
    a = sm.append_message(assistant("hello"))
    lines = read_lines(path)
    assert [x["type"] for x in lines] == ["session", "model_change", "thinking_level_change", "message",
                                          "session_info", "message", "message"]
    header = lines[0]
    assert header["version"] == 3 and header["cwd"] == "/work" and header["id"] == sm.get_session_id()
    assert ISO.match(header["timestamp"]) and "parentSession" not in header
    assert os.path.basename(path).startswith(header["timestamp"].replace(":", "-").replace(".", "-") + "_")
    assert lines[-1]["id"] == a and lines[-1]["parentId"] == lines[-2]["id"]
    assert lines[1]["parentId"] is None
    for e in lines[1:]:
        assert re.fullmatch(r"[0-9a-f]{8}", e["id"]) and ISO.match(e["timestamp"])
    # From now on, every append is on disk at once, one line each.
    for i in range(3):
        sm.append_message(user(f"u{i}"))
        assert len(read_lines(path)) == 8 + i
    sm.close()


def test_error_or_aborted_assistant_counts(tmp_path):
    sm = SessionManager.create("/w", str(tmp_path))
    sm.append_message(user("x"))
    sm.append_message(assistant("", stop="aborted"))
    assert os.path.exists(sm.get_session_file())


def test_default_session_dir_is_under_agent_dir(tmp_path):
    sm = SessionManager.create("/tmp/some/project")
    assert sm.get_session_dir() == default_session_dir("/tmp/some/project")
    assert sm.get_session_dir().endswith(os.path.join("sessions", "--tmp-some-project--"))
    assert sm.get_session_dir().startswith(os.environ["PISCES_CODING_AGENT_DIR"])


def test_in_memory_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    sm = SessionManager.in_memory(str(tmp_path))
    assert sm.get_session_file() is None and not sm.is_persisted()
    start(sm)
    u = sm.append_message(user("hi"))
    sm.append_message(assistant("yo"))
    sm.append_label_change(u, "mark")
    assert sm.create_branched_session(sm.get_leaf_id()) is None
    assert sm.get_session_file() is None and sm.get_label(u) == "mark"
    assert [message_role(m) for m in sm.build_session_context().messages] == ["user", "assistant"]
    assert os.listdir(tmp_path) == []
    assert not os.path.exists(os.environ["PISCES_CODING_AGENT_DIR"])


def test_reopen_continues_the_chain(tmp_path):
    sm = SessionManager.create("/w", str(tmp_path))
    start(sm)
    sm.append_message(user("a"))
    last = sm.append_message(assistant("b"))
    path = sm.get_session_file()
    sm.close()
    again = SessionManager.open(path)
    assert again.get_leaf_id() == last and again.get_cwd() == "/w" and again.get_session_dir() == str(tmp_path)
    nxt = again.append_message(user("c"))
    lines = read_lines(path)
    assert lines[-1]["id"] == nxt and lines[-1]["parentId"] == last
    assert len(lines) == 6 and [x["type"] for x in lines].count("session") == 1


def test_torn_tail_is_closed_before_the_next_append(tmp_path, capsys):
    sm = SessionManager.create("/w", str(tmp_path))
    sm.append_message(user("a"))
    sm.append_message(assistant("b"))
    path = sm.get_session_file()
    sm.close()
    with open(path, "ab") as f:
        f.write(b'{"type":"message","id":"deadbeef","parentId":null,"timest')
    again = SessionManager.open(path)
    new_id = again.append_message(user("c"))
    again.close()
    loaded = load_session_file(path)
    assert [e.id for e in loaded.entries][-1] == new_id and len(loaded.entries) == 3
    assert loaded.skipped_lines == 1
    assert "malformed line" in capsys.readouterr().err


def test_switch_to_a_missing_path_starts_a_session_bound_to_it(tmp_path):
    sm = SessionManager.create("/w", str(tmp_path / "d"))
    sm.append_message(user("a"))
    target = tmp_path / "elsewhere" / "chosen.jsonl"
    old_id = sm.get_session_id()
    sm.set_session_file(str(target))
    assert sm.get_session_file() == str(target) and sm.get_session_id() != old_id
    assert sm.get_entries() == [] and sm.get_leaf_id() is None and not target.exists()
    sm.append_message(user("x"))
    sm.append_message(assistant("y"))
    assert [x["type"] for x in read_lines(target)] == ["session", "message", "message"]


def test_file_without_a_valid_header_is_refused_and_left_alone(tmp_path):
    target = tmp_path / "bad.jsonl"
    target.write_bytes(b"this is not a session\n")
    with pytest.raises(SessionFileError, match="it is not a session file"):
        SessionManager.open(str(target))
    sm = SessionManager.create("/w", str(tmp_path))
    with pytest.raises(SessionFileError):
        sm.set_session_file(str(target))
    assert target.read_bytes() == b"this is not a session\n"
    assert sm.get_session_file().startswith(str(tmp_path)) and sm.get_session_file() != str(target)


def test_an_empty_file_becomes_the_session(tmp_path):
    target = tmp_path / "empty.jsonl"
    target.write_bytes(b"\n")
    sm = SessionManager.open(str(target))
    sm.append_message(user("x"))
    sm.append_message(assistant("y"))
    assert [x["type"] for x in read_lines(target)] == ["session", "message", "message"]


def test_file_deleted_while_open_is_written_again_in_full(tmp_path):
    sm = SessionManager.create("/w", str(tmp_path))
    sm.append_message(user("a"))
    sm.append_message(assistant("b"))
    os.unlink(sm.get_session_file())
    sm.append_message(user("c"))
    assert [x["type"] for x in read_lines(sm.get_session_file())] == ["session", "message", "message", "message"]


def test_tree_branch_and_children(tmp_path):
    sm = SessionManager.create("/w", str(tmp_path))
    start(sm)
    u1 = sm.append_message(user("one"))
    a1 = sm.append_message(assistant("r1"))
    u2 = sm.append_message(user("two"))
    sm.branch(a1)
    u2b = sm.append_message(user("two, again"))
    assert sm.get_entry(u2b).parentId == a1
    assert {e.id for e in sm.get_children(a1)} == {u2, u2b}
    assert [e.id for e in sm.get_branch()][-3:] == [u1, a1, u2b]
    assert [e.id for e in sm.get_branch(u2)][-3:] == [u1, a1, u2]
    assert [m.content[0].text for m in sm.build_session_context().messages] == ["one", "r1", "two, again"]
    [root] = sm.get_tree()
    node = root
    while node.entry.id != a1:
        [node] = node.children
    assert [c.entry.id for c in node.children] == [u2, u2b]
    with pytest.raises(EntryNotFoundError, match="Entry nope not found"):
        sm.branch("nope")
    # The file holds both branches; on reload the leaf is the last line.
    sm.append_message(assistant("r2b"))
    again = SessionManager.open(sm.get_session_file())
    assert again.get_leaf_id() == sm.get_leaf_id() and len(again.get_entries()) == len(sm.get_entries())
    assert again.get_entry(u2).parentId == a1


def test_reset_leaf_starts_a_new_root(tmp_path):
    sm = SessionManager.in_memory("/w")
    sm.append_message(user("a"))
    sm.reset_leaf()
    assert sm.build_session_context().messages == []
    new_root = sm.append_message(user("b"))
    assert sm.get_entry(new_root).parentId is None and len(sm.get_tree()) == 2


def test_labels(tmp_path):
    sm = SessionManager.in_memory("/w")
    u = sm.append_message(user("a"))
    lid = sm.append_label_change(u, "bookmark")
    assert isinstance(sm.get_entry(lid), LabelEntry) and sm.get_label(u) == "bookmark"
    assert sm.get_tree()[0].label == "bookmark"
    sm.append_label_change(u, "")
    assert sm.get_label(u) is None
    cleared = json.loads(encode_line(sm.get_entry(sm.get_leaf_id())))
    assert cleared["type"] == "label" and cleared["targetId"] == u and "label" not in cleared
    with pytest.raises(EntryNotFoundError):
        sm.append_label_change("missing", "x")


def test_session_name_is_latest_and_trimmed():
    sm = SessionManager.in_memory("/w")
    assert sm.get_session_name() is None
    sm.append_session_info("  first  ")
    sm.append_session_info("second")
    assert sm.get_session_name() == "second"
    assert sm.get_entry(sm.get_leaf_id()).name == "second"


def test_context_with_custom_entries_summaries_and_settings():
    sm = SessionManager.in_memory("/w")
    start(sm)
    sm.append_custom_entry("ext-state", {"k": 1})
    sm.append_custom_message_entry("note", "injected", True, details={"d": 1})
    u = sm.append_message(user("q"))
    sm.append_message(assistant("a"))
    sm.append_thinking_level_change("high")
    sm.append_model_change("other", "model-2")
    ctx = sm.build_session_context()
    assert [message_role(m) for m in ctx.messages] == ["custom", "user", "assistant"]
    assert isinstance(ctx.messages[0], CustomMessage) and ctx.messages[0].details == {"d": 1}
    assert ctx.thinking_level == "high" and tuple(ctx.model) == ("other", "model-2")
    summary_id = sm.branch_with_summary(u, "tried something else")
    entry = sm.get_entry(summary_id)
    assert entry.parentId == u and entry.fromId == u
    ctx = sm.build_session_context()
    assert isinstance(ctx.messages[-1], BranchSummaryMessage) and ctx.messages[-1].summary == "tried something else"
    root_summary = sm.branch_with_summary(None, "from the top")
    assert sm.get_entry(root_summary).parentId is None and sm.get_entry(root_summary).fromId == "root"
    with pytest.raises(EntryNotFoundError):
        sm.branch_with_summary("zzz", "x")


def test_compaction_context():
    sm = SessionManager.in_memory("/w")
    start(sm)
    sm.append_message(user("old"))
    sm.append_message(assistant("old reply"))
    keep = sm.append_message(user("kept"))
    sm.append_message(assistant("kept reply"))
    sm.append_compaction("SUMMARY", keep, 1234, details={"readFiles": [], "modifiedFiles": []}, from_hook=False)
    sm.append_message(user("after"))
    ctx = sm.build_session_context()
    assert isinstance(ctx.messages[0], CompactionSummaryMessage) and ctx.messages[0].tokensBefore == 1234
    assert [m.content[0].text for m in ctx.messages[1:]] == ["kept", "kept reply", "after"]


def test_append_message_refuses_summaries():
    sm = SessionManager.in_memory("/w")
    with pytest.raises(TypeError):
        sm.append_message(CompactionSummaryMessage(summary="s", tokensBefore=1))


def test_create_branched_session_keeps_ids_and_links_the_parent(tmp_path):
    sm = SessionManager.create("/w", str(tmp_path))
    start(sm)
    u1 = sm.append_message(user("one"))
    a1 = sm.append_message(assistant("r1"))
    sm.append_label_change(u1, "start")
    u2 = sm.append_message(user("two"))
    sm.append_message(assistant("r2"))
    old_path, old_ids = sm.get_session_file(), [e.id for e in sm.get_entries()]
    new_path = sm.create_branched_session(a1)
    assert new_path != old_path and sm.get_session_file() == new_path and FILE_NAME.match(os.path.basename(new_path))
    lines = read_lines(new_path)  # written at once: the path has an assistant message
    assert lines[0]["parentSession"] == old_path and lines[0]["id"] == sm.get_session_id()
    assert [x["id"] for x in lines[1:5]] == old_ids[:4]
    assert lines[5]["type"] == "label" and lines[5]["targetId"] == u1 and lines[5]["parentId"] == a1
    assert sm.get_label(u1) == "start" and sm.get_leaf_id() == lines[5]["id"]
    assert u2 not in {x["id"] for x in lines}
    assert len(read_lines(old_path)) == 1 + len(old_ids)  # the old file is untouched
    sm.append_message(user("three"))
    assert read_lines(new_path)[-1]["parentId"] == lines[5]["id"]


def test_branched_session_without_assistant_is_written_lazily(tmp_path):
    sm = SessionManager.create("/w", str(tmp_path))
    start(sm)
    u1 = sm.append_message(user("one"))
    sm.append_message(assistant("r1"))
    first_path = sm.get_session_file()
    new_path = sm.create_branched_session(sm.get_entry(u1).parentId)  # fork before the first prompt
    assert not os.path.exists(new_path)
    assert [entry_type(e) for e in sm.get_entries()] == ["model_change", "thinking_level_change"]
    sm.append_message(user("again"))
    assert not os.path.exists(new_path)
    sm.append_message(assistant("r"))
    lines = read_lines(new_path)
    assert lines[0]["parentSession"] == first_path and len(lines) == 5


def test_create_branched_session_unknown_id(tmp_path):
    sm = SessionManager.create("/w", str(tmp_path))
    with pytest.raises(EntryNotFoundError, match="Entry abc not found"):
        sm.create_branched_session("abc")


def test_new_session_with_parent(tmp_path):
    sm = SessionManager.create("/w", str(tmp_path))
    sm.append_message(user("a"))
    sm.append_message(assistant("b"))
    first = sm.get_session_file()
    path = sm.new_session(parent_session=first)
    assert path != first and sm.get_entries() == [] and sm.get_header().parentSession == first
    sm.append_message(user("c"))
    sm.append_message(assistant("d"))
    assert read_lines(path)[0]["parentSession"] == first


def test_continue_recent_and_fork_from(tmp_path):
    sdir = str(tmp_path / "s")
    assert SessionManager.continue_recent("/w", sdir).get_entries() == []
    paths = []
    for i in range(3):
        sm = SessionManager.create("/w", sdir)
        sm.append_message(user(f"q{i}"))
        sm.append_message(assistant(f"a{i}"))
        sm.close()
        paths.append(sm.get_session_file())
        os.utime(paths[-1], (1000 + i * (1 if i != 1 else 100), 1000 + i * (1 if i != 1 else 100)))
    (tmp_path / "s" / "junk.jsonl").write_text("nope\n")
    recent = SessionManager.continue_recent("/w", sdir)
    assert recent.get_session_file() == paths[1]
    forked = SessionManager.fork_from(paths[0], "/other", str(tmp_path / "o"))
    lines = read_lines(forked.get_session_file())
    assert lines[0]["cwd"] == "/other" and lines[0]["parentSession"] == paths[0]
    assert [x["id"] for x in lines[1:]] == [e.id for e in load_session_file(paths[0]).entries]
    assert forked.get_cwd() == "/other"
    with pytest.raises(ValueError, match="empty or invalid"):
        SessionManager.fork_from(str(tmp_path / "s" / "junk.jsonl"), "/x", str(tmp_path / "o"))


def test_entry_ids_are_collision_checked(monkeypatch):
    import uuid

    from pisces.core.store import ids

    seq = iter(["aaaaaaaa", "aaaaaaaa", "bbbbbbbb"])
    monkeypatch.setattr(ids.uuid, "uuid4", lambda: uuid.UUID(next(seq) + "-0000-4000-8000-000000000000"))
    assert ids.new_entry_id(set()) == "aaaaaaaa"
    assert ids.new_entry_id({"aaaaaaaa"}) == "bbbbbbbb"
