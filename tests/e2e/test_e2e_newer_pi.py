"""End to end: names that later pi versions gave their own shapes answer in those shapes (``get_tree``,
``set_label``, ``get_entries``, ``get_fork_messages`` timestamps, ``get_available_thinking_levels``,
``list_sessions{includeSearchText}``), while seed 002's names keep seed 002's shapes."""

from __future__ import annotations

import re


def _two_prompts(home, spawn):
    p = spawn("--faux-script", home.faux_script([{"text": "first answer"},
                                                 {"toolCalls": [{"name": "bash", "arguments": {"command": "true"}}]},
                                                 {"text": "second answer"}]))
    for text in ("hello", "run it"):
        p.ok({"type": "prompt", "message": text})
        p.until_type("agent_settled", 30)
    return p


def _walk(nodes):
    for n in nodes:
        yield n
        yield from _walk(n["children"])


ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


def test_get_tree_is_later_pis_projection_and_get_session_tree_stays_seed_002(home, spawn):
    p = _two_prompts(home, spawn)
    entries = p.ok({"type": "get_entries"})["entries"]
    user_ids = [e["id"] for e in entries if e["type"] == "message" and e["message"]["role"] == "user"]
    assert p.ok({"type": "set_label", "entryId": user_ids[0], "label": " start "}) is None
    p.ok({"type": "set_session_name", "name": "named"})

    data = p.ok({"type": "get_tree"})
    assert set(data) == {"tree", "leafId"}
    nodes = list(_walk(data["tree"]))
    by_id = {n["id"]: n for n in nodes}
    # metadata entries (label, session_info) are not nodes; every kept entry is
    kept = [e for e in p.ok({"type": "get_entries"})["entries"] if e["type"] not in ("label", "session_info")]
    assert [n["id"] for n in nodes] == [e["id"] for e in kept]
    assert data["leafId"] in by_id  # the leaf is a session_info entry: it stands in for its kept parent
    assert data["leafId"] == kept[-1]["id"]
    for n in nodes:
        assert ISO.match(n["timestamp"]) and isinstance(n["children"], list)
        assert n["parentId"] is None or n["parentId"] in by_id
    first = by_id[user_ids[0]]
    assert first["type"] == "message" and first["role"] == "user" and first["preview"] == "hello"
    assert first["label"] == "start" and "content" not in first
    results = [n for n in nodes if n["type"] == "tool_result"]
    assert len(results) == 1 and results[0]["toolName"] == "bash" and results[0]["toolArgs"] == {"command": "true"}
    assert {n["type"] for n in nodes} >= {"model_change", "thinking_level_change", "message", "tool_result"}

    full = list(_walk(p.ok({"type": "get_tree", "includeContent": True})["tree"]))
    assistant = [n for n in full if n.get("role") == "assistant"]
    assert assistant[0]["content"] == "first answer" and assistant[-1]["content"] == "second answer"

    seed = p.ok({"type": "get_session_tree"})  # seed 002's name, seed 002's shape
    assert set(seed) == {"leafId", "nodes"} and set(seed["nodes"][0]) == {"entry", "children"}
    assert p.close() == 0


def test_get_entries_since_is_a_cursor(home, spawn):
    p = _two_prompts(home, spawn)
    data = p.ok({"type": "get_entries"})
    entries = data["entries"]
    assert data["leafId"] == entries[-1]["id"]
    assert all(e["type"] != "session" for e in entries)  # the header is not an entry
    middle = entries[3]["id"]
    assert p.ok({"type": "get_entries", "since": middle})["entries"] == entries[4:]
    assert p.ok({"type": "get_entries", "since": entries[-1]["id"]})["entries"] == []
    r = p.request({"id": "bad", "type": "get_entries", "since": "no-such-entry"})
    assert r["success"] is False and "no-such-entry" in r["error"]
    assert p.close() == 0


def test_fork_messages_carry_iso_timestamps_and_set_label_takes_entry_id(home, spawn):
    p = _two_prompts(home, spawn)
    forks = p.ok({"type": "get_fork_messages"})["messages"]
    assert [m["text"] for m in forks] == ["hello", "run it"]
    assert all(ISO.match(m["timestamp"]) for m in forks)
    r = p.request({"id": "l", "type": "set_label", "label": "x"})
    assert r["success"] is False and "entryId" in r["error"]
    assert p.ok({"type": "set_entry_label", "targetId": forks[1]["entryId"], "label": "seed"}) is None
    assert [n.get("label") for n in _walk(p.ok({"type": "get_tree"})["tree"]) if n["id"] == forks[1]["entryId"]] \
        == ["seed"]
    assert p.close() == 0


def test_available_thinking_levels_follow_the_model(home, spawn):
    p = spawn("--provider", "faux", "--no-session")
    assert p.ok({"type": "get_available_thinking_levels"}) == {"levels": ["off"]}
    p.ok({"type": "set_model", "provider": "faux", "modelId": "faux-reasoning"})
    assert p.ok({"type": "get_available_thinking_levels"}) == {
        "levels": ["off", "minimal", "low", "medium", "high"]}
    assert p.close() == 0


def test_list_sessions_search_text_can_be_left_out(home, spawn):
    p = _two_prompts(home, spawn)
    default = p.ok({"type": "list_sessions"})["sessions"]
    assert "hello" in default[0]["allMessagesText"]  # seed 002 wins: present by default
    lean = p.ok({"type": "list_sessions", "scope": "current", "includeSearchText": False})["sessions"]
    assert "allMessagesText" not in lean[0] and lean[0]["path"] == default[0]["path"]
    assert p.close() == 0
