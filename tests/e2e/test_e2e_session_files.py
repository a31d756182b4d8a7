"""rename_session and delete_session (newer pi's names) through the real ``pisces --mode rpc``: another file is
renamed with a session_info entry that the listing shows, the open session is renamed in place and never
deleted, and only session files are touched."""

from __future__ import annotations

import os


def test_rename_and_delete_session_files(home, spawn):
    p = spawn("--faux-script", home.faux_script([{"text": "first"}, {"text": "second"}]))
    p.send({"type": "prompt", "message": "one"})
    p.until_type("agent_settled", 30)
    first = p.ok({"type": "get_state"})["sessionFile"]
    p.ok({"type": "new_session"})
    p.send({"type": "prompt", "message": "two"})
    p.until_type("agent_settled", 30)
    current = p.ok({"type": "get_state"})["sessionFile"]
    assert first != current

    assert p.ok({"type": "rename_session", "sessionPath": first, "name": " Old work "}) == {
        "path": first, "name": "Old work"}
    rows = {s["path"]: s for s in p.ok({"type": "list_sessions"})["sessions"]}
    assert rows[first]["name"] == "Old work" and not rows[current].get("name")
    with open(first) as f:
        assert f.read().count('"type":"session_info"') == 1

    # the open session: renamed through the session, with its event
    data = p.ok({"type": "rename_session", "name": "Current"})
    assert data == {"path": current, "name": "Current"}
    assert any(f == {"type": "session_info_changed", "name": "Current"} for f in p.last_events)
    assert p.ok({"type": "get_state"})["sessionName"] == "Current"

    refused = p.request({"type": "delete_session", "sessionPath": current})
    assert refused["success"] is False and "Cannot delete the session that is open" in refused["error"]
    assert os.path.exists(current)
    notes = os.path.join(home.cwd, "notes.jsonl")
    with open(notes, "w") as f:
        f.write('{"not":"a session"}\n')
    for path, needle in ((notes, "not a session file"), (os.path.join(home.cwd, "missing.jsonl"), "No session file"),
                         (None, "sessionPath")):
        resp = p.request({"type": "delete_session", "sessionPath": path})
        assert resp["success"] is False and needle in resp["error"], resp
    assert os.path.exists(notes)
    bad_name = p.request({"type": "rename_session", "sessionPath": first, "name": "  "})
    assert bad_name["success"] is False and bad_name["error"] == "Session name cannot be empty"

    assert p.ok({"type": "delete_session", "sessionPath": first}) == {"path": first, "deleted": True}
    assert not os.path.exists(first)
    assert [s["path"] for s in p.ok({"type": "list_sessions"})["sessions"]] == [current]
