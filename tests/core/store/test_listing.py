import json
import os

import msgspec

from pisces.ai.types import AssistantMessage, TextContent, UserMessage
from pisces.core.store import (
    SessionManager,
    default_session_dir,
    find_most_recent_session,
    find_sessions_by_id,
    list_sessions,
)


def make(cwd, sdir=None, prompts=("q",), name=None, ts=1_700_000_000_000):
    sm = SessionManager.create(cwd, sdir)
    sm.append_model_change("p", "m")
    for i, p in enumerate(prompts):
        sm.append_message(UserMessage(content=[TextContent(text=p)], timestamp=ts + 2 * i))
        sm.append_message(AssistantMessage(content=[TextContent(text=f"re {p}")], api="a", provider="p", model="m",
                                           timestamp=ts + 2 * i + 1))
    if name:
        sm.append_session_info(name)
    sm.close()
    return sm


def test_list_one_dir(tmp_path):
    sdir = str(tmp_path / "s")
    old = make("/w", sdir, prompts=("first", "second"), name=" named ", ts=1_700_000_000_000)
    new = make("/w", sdir, prompts=("newer",), ts=1_800_000_000_000)
    (tmp_path / "s" / "broken.jsonl").write_text("not a session\n")
    (tmp_path / "s" / "other.txt").write_text("x")
    infos = list_sessions(sdir)
    assert [i.path for i in infos] == [new.get_session_file(), old.get_session_file()]
    o = infos[1]
    assert o.id == old.get_session_id() and o.cwd == "/w" and o.name == "named"
    assert o.messageCount == 4 and o.firstMessage == "first"
    assert o.allMessagesText == "first re first second re second"
    assert o.modified == "2023-11-14T22:13:20.003Z"
    assert o.created == old.get_header().timestamp
    encoded = json.loads(msgspec.json.encode(infos[0]))
    assert set(encoded) == {"path", "id", "cwd", "created", "modified", "messageCount", "firstMessage",
                            "allMessagesText"}


def test_list_all_dirs_and_find(tmp_path):
    a = make("/proj/a")
    b = make("/proj/b")
    assert os.path.dirname(a.get_session_file()) == default_session_dir("/proj/a")
    infos = list_sessions()
    assert {i.path for i in infos} == {a.get_session_file(), b.get_session_file()}
    [hit] = find_sessions_by_id(a.get_session_id()[:20])
    assert hit.path == a.get_session_file()
    assert find_most_recent_session(default_session_dir("/proj/b")) == b.get_session_file()
    assert list_sessions(str(tmp_path / "missing")) == []


def test_empty_and_odd_sessions(tmp_path):
    sdir = tmp_path / "s"
    sdir.mkdir()
    header = {"type": "session", "version": 3, "id": "x1", "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/w"}
    lines = [header,
             {"type": "message", "id": "a", "parentId": None, "timestamp": "2026-01-02T00:00:00.000Z",
              "message": {"role": "bashExecution", "command": "ls", "output": "", "cancelled": False,
                          "truncated": False, "timestamp": 5}},
             {"type": "message", "id": "b", "parentId": "a", "timestamp": "2026-01-03T00:00:00.000Z",
              "message": {"role": "user", "content": "plain string", "timestamp": "not-a-number"}}]
    (sdir / "x.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n{torn")
    [info] = list_sessions(str(sdir))
    assert info.messageCount == 2 and info.firstMessage == "plain string"
    assert info.modified == "2026-01-03T00:00:00.000Z"  # falls back to the entry's own timestamp
    (sdir / "x.jsonl").write_text(json.dumps(header) + "\n")
    [info] = list_sessions(str(sdir))
    assert info.firstMessage == "(no messages)" and info.messageCount == 0
    assert info.modified == info.created == "2026-01-01T00:00:00.000Z"
