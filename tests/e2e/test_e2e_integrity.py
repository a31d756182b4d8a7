"""End to end: session data integrity against the real process (docs/sessions.md, "What pisces guarantees").
Clones and forks past a label keep the conversation; switch_session refuses paths it would destroy or lose
messages in; a file truncated by another process gets its header back; malformed files cost only
themselves at start-up, in --export and in list_sessions; an RPC bash finishing after new_session stays out
of the new session; a second compact never overlaps a reply; a non-UTF-8 working directory exports."""

from __future__ import annotations

import json
import os
import subprocess

from e2eproc import PISCES, Proc

from pisces.core.store import encode_cwd


def _texts(p) -> list[str]:
    out = []
    for m in p.ok({"type": "get_messages"})["messages"]:
        content = m.get("content")
        out.append(content[0]["text"] if isinstance(content, list) and content else m.get("role"))
    return out


def _prompt(p, text: str) -> None:
    p.ok({"type": "prompt", "message": text})
    p.until_type("agent_settled", 30)


def _lines(path: str) -> list[dict]:
    with open(path, "rb") as f:
        return [json.loads(x) for x in f.read().splitlines() if x.strip()]


def test_clone_and_fork_after_a_label_keep_the_whole_conversation(home, spawn):
    p = spawn("--faux-script", home.faux_script([{"text": "a1"}, {"text": "a2"}, {"text": "a3"}]))
    _prompt(p, "q1")
    first = p.ok({"type": "get_fork_messages"})["messages"][0]["entryId"]
    p.ok({"type": "set_entry_label", "targetId": first, "label": "start"})
    _prompt(p, "q2")
    _prompt(p, "q3")
    original = p.ok({"type": "get_state"})["sessionFile"]
    q3 = p.ok({"type": "get_fork_messages"})["messages"][2]["entryId"]

    assert p.ok({"type": "clone"}) == {"cancelled": False}
    assert _texts(p) == ["q1", "a1", "q2", "a2", "q3", "a3"]
    clone = p.ok({"type": "get_state"})["sessionFile"]
    labels = [e for e in _lines(clone) if e["type"] == "label"]
    assert [(e["targetId"], e["label"]) for e in labels] == [(first, "start")]

    p.ok({"type": "switch_session", "sessionPath": original})
    assert p.ok({"type": "fork", "entryId": q3})["text"] == "q3"
    assert _texts(p) == ["q1", "a1", "q2", "a2"]
    fork = p.ok({"type": "get_state"})["sessionFile"]
    for path in (clone, fork):  # reopened from disk: the same conversation
        p.ok({"type": "switch_session", "sessionPath": path})
        assert _texts(p)[:4] == ["q1", "a1", "q2", "a2"]
    tree = p.ok({"type": "get_session_tree"})
    assert tree  # the tree of the fork is one chain from its root
    ids = {e["id"] for e in _lines(fork)[1:]}
    assert all(e["parentId"] in ids for e in _lines(fork)[2:])


def test_switch_session_refuses_what_it_would_destroy_or_lose(home, spawn):
    readme = os.path.join(home.cwd, "README.md")
    with open(readme, "w") as f:
        f.write("# Project\n\nDo not lose me.\n")
    notes_link = os.path.join(home.root, "notes.jsonl")
    os.symlink(readme, notes_link)
    p = spawn("--faux-script", home.faux_script([{"text": "a1"}, {"text": "a2"}]))
    _prompt(p, "q1")
    before = p.ok({"type": "get_state"})
    for path, why in ((readme, "it is not a session file (its first line is not a session header)"),
                      (notes_link, "it is not a session file (its first line is not a session header)"),
                      (home.cwd, "it is a directory"),
                      ("/sys/pisces-session.jsonl", "no file can be created in /sys (Permission denied)")):
        r = p.request({"type": "switch_session", "sessionPath": path})
        assert r["success"] is False and r["error"] == f"Cannot use {path} as the session file: {why}"
        assert "session_changed" not in [f.get("type") for f in p.last_events]
    after = p.ok({"type": "get_state"})
    assert after["sessionFile"] == before["sessionFile"] and after["sessionId"] == before["sessionId"]
    _prompt(p, "q2")  # the current session goes on, in its own file
    assert _texts(p) == ["q1", "a1", "q2", "a2"]
    assert [e.get("message", {}).get("role") for e in _lines(before["sessionFile"])[3:]] == \
        ["user", "assistant", "user", "assistant"]
    with open(readme) as f:
        assert f.read() == "# Project\n\nDo not lose me.\n"


def test_a_session_file_truncated_by_another_process_gets_its_header_back(home, spawn):
    p = spawn("--faux-script", home.faux_script([{"text": "a1"}, {"text": "a2"}]))
    _prompt(p, "q1")
    path = p.ok({"type": "get_state"})["sessionFile"]
    with open(path, "r+b") as f:
        f.truncate(0)
    _prompt(p, "q2")
    lines = _lines(path)
    assert lines[0]["type"] == "session" and lines[0]["id"] == p.ok({"type": "get_state"})["sessionId"]
    p.wait_stderr("was truncated by another process")
    assert p.close() == 0
    q = spawn("--faux-script", home.faux_script([{"text": "x"}]), "--session", path)
    assert _texts(q) == ["q1", "a1", "q2", "a2"]


DEEP = b"[" * 100_000 + b"]" * 100_000


def _broken_files(directory: str) -> dict[str, str]:
    os.makedirs(directory, exist_ok=True)
    files = {
        "deep-header": b'{"type":"session","id":' + DEEP + b"}\n",
        "latin1-header": b'{"type":"session","version":3,"id":"01a20000-0000-7000-8000-000000000001",'
                         b'"timestamp":"2026-01-01T00:00:00.000Z","cwd":"/caf\xe9"}\n',
    }
    out = {}
    for name, data in files.items():
        path = os.path.join(directory, f"2099-01-01T00-00-00-000Z_{name}.jsonl")
        with open(path, "wb") as f:
            f.write(data)
        out[name] = path
    return out


def test_malformed_session_files_cost_only_themselves(home, spawn):
    p = spawn("--faux-script", home.faux_script([{"text": "a1"}]))
    _prompt(p, "q1")
    good = p.ok({"type": "get_state"})["sessionFile"]
    good_id = p.ok({"type": "get_state"})["sessionId"]
    assert p.close() == 0
    with open(good, "ab") as f:  # a deep line inside a good session is skipped, the rest opens
        f.write(b'{"type":"custom","id":"deadbeef","parentId":null,"data":' + DEEP + b"}\n")
    directory = os.path.join(home.agent_dir, "sessions", encode_cwd(home.cwd))
    broken = _broken_files(directory)

    q = spawn("--faux-script", home.faux_script([{"text": "x"}]), "--continue")
    assert q.ok({"type": "get_state"})["sessionFile"] == good and _texts(q) == ["q1", "a1"]
    listed = q.ok({"type": "list_sessions"})["sessions"]
    assert [s["path"] for s in listed] == [good]
    assert [s["path"] for s in q.ok({"type": "list_sessions", "scope": "all"})["sessions"]] == [good]
    assert "Traceback" not in q.wait_stderr("nested too deeply")
    assert q.close() == 0

    for name, path in broken.items():
        run = subprocess.run([*PISCES, "--mode", "rpc", "--provider", "faux", "--session", path], cwd=home.cwd,
                             env=home.env(), input=b"", capture_output=True, timeout=60)
        assert run.returncode == 1 and b"Traceback" not in run.stderr, (name, run.stderr[-500:])
        assert run.stderr.decode().splitlines()[-1] == (
            f"pisces: Cannot use {path} as the session file: it is not a session file (its first line is not a "
            "session header)")
        run = subprocess.run([*PISCES, "--export", path, os.path.join(home.root, "x.html")], cwd=home.cwd,
                             env=home.env(), capture_output=True, timeout=60)
        assert run.returncode == 1 and b"Traceback" not in run.stderr
        assert b"Not a session file" in run.stderr
    run = subprocess.run([*PISCES, "--mode", "rpc", "--provider", "faux", "--session", good_id[:13]], cwd=home.cwd,
                         env=home.env(), input=b'{"id":"s","type":"get_state"}\n', capture_output=True, timeout=60)
    assert run.returncode == 0 and b"Traceback" not in run.stderr
    assert json.loads(run.stdout.splitlines()[-1])["data"]["sessionFile"] == good
    run = subprocess.run([*PISCES, "--export", good, os.path.join(home.root, "good.html")], cwd=home.cwd,
                         env=home.env(), capture_output=True, timeout=60)
    assert run.returncode == 0 and os.path.getsize(os.path.join(home.root, "good.html")) > 1000


def test_a_bash_still_running_at_new_session_stays_with_its_own_session(home, spawn):
    go = os.path.join(home.root, "go")
    p = spawn("--faux-script", home.faux_script([{"text": "a1"}, {"text": "a2"}]))
    _prompt(p, "q1")
    old_file = p.ok({"type": "get_state"})["sessionFile"]
    p.send({"id": "b", "type": "bash", "command": f"while [ ! -e {go} ]; do sleep 0.02; done; echo finished"})
    p.ok({"type": "new_session"})
    open(go, "w").close()
    bash = p.until(lambda f: f.get("id") == "b", 30)[-1]
    assert bash["success"] is True and bash["data"]["output"] == "finished\n"
    assert p.ok({"type": "get_messages"})["messages"] == []
    _prompt(p, "q2")
    assert [m["role"] for m in p.ok({"type": "get_messages"})["messages"]] == ["user", "assistant"]
    new_file = p.ok({"type": "get_state"})["sessionFile"]
    assert "bashExecution" not in open(new_file).read()
    old = _lines(old_file)  # as pi: the session the command ran in keeps its result
    assert old[-1]["message"]["role"] == "bashExecution" and old[-1]["message"]["output"] == "finished\n"
    assert old[-1]["parentId"] == old[-2]["id"]


def test_a_second_compact_never_runs_while_a_reply_streams(home, spawn):
    slow = {"chunkSize": 4, "delayMs": 15}
    p = spawn("--faux-script", home.faux_script([
        {"text": "first answer " * 5},
        {"text": "summary one " * 6, **slow},  # compaction 1
        {"text": "reply to the prompt sent during compaction " * 3, **slow},
        {"text": "summary two " * 6, **slow},  # compaction 2
    ]))
    _prompt(p, "q1")
    start = len(p.frames)
    p.send({"id": "c1", "type": "compact"})
    p.send({"id": "p", "type": "prompt", "message": "during compaction"})
    p.send({"id": "c2", "type": "compact"})
    p.until(lambda f: f.get("id") == "c2" and f.get("type") == "response", 60)
    frames = p.frames[start:]
    assert "agent_settled" in [f.get("type") for f in frames]  # the prompt's run ended before c2 answered
    streaming = False
    for f in frames:
        if f.get("type") == "agent_start":
            streaming = True
        elif f.get("type") == "agent_end":
            streaming = False
        elif f.get("type") in ("compaction_start", "compaction_end"):
            assert not streaming, [x.get("type") for x in frames]
    c1 = next(f for f in frames if f.get("id") == "c1")
    c2 = next(f for f in frames if f.get("id") == "c2")
    assert c1["success"] is True and c1["data"]["summary"].startswith("summary one")
    assert c2["success"] is True and c2["data"]["summary"].startswith("summary two")
    reply = [f for f in frames if f.get("type") == "message_end" and f["message"]["role"] == "assistant"]
    assert reply[0]["message"]["content"][0]["text"].startswith("reply to the prompt")


def test_a_working_directory_that_is_not_utf8_exports(home):
    cwd = os.path.join(os.fsencode(home.root), b"caf\xe9")
    os.makedirs(cwd)
    out = os.path.join(home.root, "out.html")
    p = Proc([*PISCES, "--mode", "rpc", "--faux-script", home.faux_script([{"text": "hello"}])], home.env(), cwd)
    try:
        assert p.next(15) == {"type": "ready"}
        _prompt(p, "hi")
        r = p.request({"type": "export_html", "outputPath": out})
        assert r["success"] is True and r["data"] == {"path": out}, r
        page = open(out, "rb").read()
        assert b"hello" in page and "caf\ufffd".encode() in page
        assert "Traceback" not in p.stderr
    finally:
        p.close()


def test_abort_cancels_a_compact_still_waiting_for_its_turn(home, spawn):
    slow = {"chunkSize": 2, "delayMs": 20}
    p = spawn("--faux-script", home.faux_script([{"text": "first answer " * 5}, {"text": "summary " * 20, **slow},
                                                 {"text": "never used"}]))
    _prompt(p, "q1")
    p.send({"id": "c1", "type": "compact"})
    p.send({"id": "c2", "type": "compact"})
    p.until_type("compaction_start", 30)
    p.send({"id": "ab", "type": "abort"})
    got = {}
    p.until(lambda f: got.update({f["id"]: f} if f.get("type") == "response" else {}) or
            {"c1", "c2", "ab"} <= set(got), 30)
    assert got["ab"]["success"] is True
    assert got["c1"] == {"id": "c1", "type": "response", "command": "compact", "success": False,
                         "error": "Compaction cancelled"}
    assert got["c2"] == {"id": "c2", "type": "response", "command": "compact", "success": False,
                         "error": "Compaction cancelled"}
    assert [f["type"] for f in p.frames].count("compaction_start") == 1  # the second never started
    assert _texts(p) == ["q1", "first answer " * 5]


def test_a_prompt_sent_during_a_branch_summary_runs_after_the_navigation(home, spawn):
    slow = {"chunkSize": 2, "delayMs": 10}
    p = spawn("--faux-script", home.faux_script([{"text": "a1"}, {"text": "a2"}, {"text": "what was tried " * 4, **slow},
                                                 {"text": "a3"}]))
    _prompt(p, "q1")
    _prompt(p, "q2")
    q2 = p.ok({"type": "get_fork_messages"})["messages"][1]["entryId"]
    start = len(p.frames)
    p.send({"id": "nv", "type": "navigate_tree", "targetId": q2, "summarize": True})
    p.send({"id": "p3", "type": "prompt", "message": "q3"})
    p.until(lambda f: f.get("type") == "agent_settled", 30)
    order = [f.get("id") or f.get("type") for f in p.frames[start:]
             if f.get("type") in ("response", "session_changed", "agent_start")]
    assert order.index("session_changed") < order.index("agent_start") and order.index("nv") < order.index("agent_start")
    roles = [(m["role"], (m.get("content") or [{}])[0].get("text") if isinstance(m.get("content"), list) else None)
             for m in p.ok({"type": "get_messages"})["messages"]]
    assert roles == [("user", "q1"), ("assistant", "a1"), ("branchSummary", None), ("user", "q3"), ("assistant", "a3")]
