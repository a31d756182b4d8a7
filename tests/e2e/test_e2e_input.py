"""End to end, the real ``pisces --mode rpc``: bad input of every kind. pi's exact error strings, the request
id on every response that had one, CRLF, a 10 MB line, U+2028 inside a string, and 1,000 random and malformed
lines (hypothesis) sent to one process that must answer each of them and stay alive."""

from __future__ import annotations

import json
import os
import re
import time

from e2eproc import loads
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

PARSE = "Failed to parse command: "


def parse_error(error: str) -> dict:
    return {"type": "response", "command": "parse", "success": False, "error": PARSE + error}


def test_pi_parse_error_strings(home, spawn):
    p = spawn("--faux-script", home.faux_script([{"text": "x"}]))
    cases = [
        (b"this is not json", "Unexpected token 'h', \"this is not json\" is not valid JSON"),
        (b'{"id":"x1","type":"get_state"', "Expected ',' or '}' after property value in JSON at position 29"),
        (b"", "Unexpected end of JSON input"),
        (b"this is not json\r", "Unexpected token 'h', \"this is not json\" is not valid JSON"),  # CR dropped
        (b"NaN", "Unexpected token 'N', \"NaN\" is not valid JSON"),  # JSON.parse has no NaN
        (b'{"a":Infinity}', "Unexpected token 'I', \"{\"a\":Infinity}\" is not valid JSON"),
        (b'{"id":"x2","type":"get_state"} x', "Unexpected non-whitespace character after JSON at position 31"),
    ]
    for line, error in cases:
        p.send(line)
        assert p.next() == parse_error(error), line
    assert p.close() == 0


def test_unknown_missing_and_mistyped_commands(home, spawn):
    p = spawn("--faux-script", home.faux_script([{"text": "x"}]))

    def err(cmd: dict, error: str, command: object = "same") -> None:
        r = p.request(cmd)
        expect = {"id": cmd["id"], "type": "response"}
        if command == "same":
            expect["command"] = cmd["type"]
        elif command is not None:
            expect["command"] = command
        expect.update(success=False, error=error)
        assert r == expect, r
        assert p.last_events == [], p.last_events

    # pi's errors, with the id kept (a deliberate improvement: pi drops it and clients waiting on it hang)
    err({"id": "u1", "type": "no_such_command"}, "Unknown command: no_such_command")
    err({"id": "u7"}, "Unknown command: undefined", command=None)
    err({"id": "u8", "type": None}, "Unknown command: undefined", command=None)
    err({"id": "u9", "type": 5}, "Unknown command: 5", command=5)
    err({"id": "r4", "type": "prompt"}, "Cannot read properties of undefined (reading 'startsWith')")
    err({"id": "r5", "type": "steer"}, "Cannot read properties of undefined (reading 'startsWith')")
    err({"id": "r6", "type": "follow_up"}, "Cannot read properties of undefined (reading 'startsWith')")
    err({"id": "r7", "type": "abort_and_prompt"}, "Cannot read properties of undefined (reading 'startsWith')")
    err({"id": "r10", "type": "switch_session"},
        'The "paths[0]" argument must be of type string. Received undefined')
    err({"id": "r11", "type": "set_session_name", "name": "   "}, "Session name cannot be empty")
    err({"id": "r12", "type": "fork", "entryId": "nope"}, "Invalid entry ID for forking")
    err({"id": "r13", "type": "export_html"}, "Nothing to export yet - start a conversation first")
    err({"id": "r14", "type": "set_model", "provider": "x"}, "Model not found: x/undefined")
    # mistyped fields: a sentence saying which field and what was expected
    err({"id": "t1", "type": "prompt", "message": 42}, "Invalid 'message': expected a string, got a number")
    err({"id": "t2", "type": "steer", "message": ["a"]}, "Invalid 'message': expected a string, got an array")
    err({"id": "t3", "type": "set_auto_retry", "enabled": "yes"},
        "Invalid 'enabled': expected true or false, got a string")
    err({"id": "t4", "type": "set_auto_compaction"}, "Invalid 'enabled': expected true or false, got nothing")
    err({"id": "t5", "type": "set_follow_up_mode", "mode": 1}, "Invalid mode a number: use 'all' or 'one-at-a-time'")
    err({"id": "t6", "type": "set_active_tools", "toolNames": "read"},
        "Invalid 'toolNames': expected an array of tool names")
    err({"id": "t7", "type": "prompt", "message": "x", "streamingBehavior": "later"},
        "Invalid streamingBehavior 'later': use 'steer' or 'followUp'")
    err({"id": "t8", "type": "switch_session", "sessionPath": 3},
        'The "paths[0]" argument must be of type string. Received a number')
    err({"id": "t9", "type": "set_thinking_level", "level": "max"},
        "Invalid thinking level 'max': use off, minimal, low, medium, high or xhigh")
    err({"id": "t10", "type": "set_thinking_level"}, "Cannot read properties of undefined (reading 'toLowerCase')")
    err({"id": "t11", "type": "export_html", "outputPath": {}},
        "Invalid 'outputPath': expected a string, got an object")
    err({"id": "t12", "type": "list_sessions", "scope": "nowhere"}, "Invalid scope 'nowhere': use 'cwd' or 'all'")
    err({"id": "t13", "type": "set_entry_label", "label": "x"}, "set_entry_label needs 'targetId'")
    err({"id": "t14", "type": "navigate_tree", "targetId": "zz"}, "Entry zz not found")
    err({"id": "t15", "type": "set_active_tools", "toolNames": ["nope"]},
        "Unknown tool(s): nope. Available: read, bash, edit, write, grep, find, ls, task, todo_write")
    r = p.request({"id": "i1", "type": "prompt", "message": "x", "images": "nope"})
    assert r["success"] is False and r["id"] == "i1" and r["error"]

    # ids of any JSON type come back verbatim; an error with no id has none
    for rid in (42, 1.5, "ünï", {"a": [1, None]}, [1, 2], True):
        r = p.request({"id": rid, "type": "get_last_assistant_text"})
        assert r == {"id": rid, "type": "response", "command": "get_last_assistant_text", "success": True,
                     "data": {}}
    p.send({"type": "nope"})
    assert p.next() == {"type": "response", "command": "nope", "success": False, "error": "Unknown command: nope"}
    for value in ([1, 2, 3], 7, "str", None, True):
        p.send(json.dumps(value))
        assert p.next() == {"type": "response", "success": False, "error": "Unknown command: undefined"}

    # bash without a command runs the literal "undefined", as pi
    r = p.request({"id": "b", "type": "bash"})
    assert r["success"] is True and r["data"]["exitCode"] == 127 and "undefined" in r["data"]["output"]
    # an answer to an extension UI request nobody asked for: ignored, no output at all
    p.send({"id": "e", "type": "extension_ui_response", "value": "x"})
    r = p.request({"id": "after", "type": "get_last_assistant_text"})
    assert p.last_events == []
    assert p.close() == 0


def test_crlf_and_whitespace_framing(home, spawn):
    p = spawn("--faux-script", home.faux_script([{"text": "x"}]))
    p.write(b'{"id":"c1","type":"get_state"}\r\n  {"id":"c2","type":"get_last_assistant_text"}  \r\n')
    assert p.next()["id"] == "c1"
    assert p.next() == {"id": "c2", "type": "response", "command": "get_last_assistant_text", "success": True,
                        "data": {}}
    # several lines in one write, and one line split over several writes
    p.write(b'{"id":"c3","type":"get_last_assistant_text"}\n{"id":"c4","ty')
    assert p.next()["id"] == "c3"
    time.sleep(0.05)
    p.write(b'pe":"get_last_assistant_text"}\n')
    assert p.next()["id"] == "c4"
    assert p.close() == 0


def test_unicode_line_separators_and_non_ascii_are_content(home, spawn):
    p = spawn("--faux-script", home.faux_script([{"text": "réponse\u2028deux\u2029trois ✓", "chunkSize": 100}]))
    text = "a\u2028b\u2029c – ünïcødé ✓ 🐟"
    p.send({"id": "u", "type": "prompt", "message": text})  # sent as raw UTF-8, not escaped
    frames = p.until_type("agent_settled")
    user = next(f for f in frames if f["type"] == "message_start")["message"]
    assert user["content"] == [{"type": "text", "text": text}]
    end = [f for f in frames if f["type"] == "message_end"][-1]["message"]
    assert end["content"] == [{"type": "text", "text": "réponse\u2028deux\u2029trois ✓"}]
    raw = b"\n".join(p.raw_lines)
    assert text.encode("utf-8") in raw  # output is UTF-8, not \\u-escaped, and U+2028 did not split a line
    assert b"\\u2028" not in raw
    assert p.close() == 0


def test_ten_megabyte_prompt_line(home, spawn):
    p = spawn("--faux-script", home.faux_script({"responses": [{"text": "ok"}], "loop": True}))
    p.ok({"type": "set_auto_compaction", "enabled": False})  # 2.6M estimated tokens would compact first
    text = "start\u2028" + "x" * (10 * 1024 * 1024) + " end"
    t0 = time.monotonic()
    p.send({"id": "big", "type": "prompt", "message": text})
    frames = p.until_type("agent_settled", timeout=60)
    assert frames[0] == {"id": "big", "type": "response", "command": "prompt", "success": True}
    user = next(f for f in frames if f["type"] == "message_end")["message"]
    assert user["content"][0]["text"] == text
    msgs = p.ok({"type": "get_messages"}, timeout=60)["messages"]
    assert msgs[0]["content"][0]["text"] == text and msgs[1]["content"] == [{"type": "text", "text": "ok"}]
    assert time.monotonic() - t0 < 30
    p.ok({"type": "get_state"})  # still answering
    assert p.close() == 0


# -- 1,000 random and malformed lines to one process -------------------------------------------------
_json = st.recursive(
    st.none() | st.booleans() | st.integers(-(2 ** 63), 2 ** 63) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=6), c, max_size=3), max_leaves=6)
_text = st.text(max_size=16)
_modes = st.sampled_from(["all", "one-at-a-time", "sometimes"])
# per command, the fields it takes (mostly well-typed); random extra fields may then override them
_TEMPLATES: dict[str, dict] = {
    "get_state": {}, "get_messages": {}, "prompt": {"message": _text},
    "steer": {"message": _text}, "follow_up": {"message": _text}, "abort": {},
    "abort_and_prompt": {"message": _text}, "new_session": {}, "queue_message": {"message": _text},
    "set_model": {"provider": st.sampled_from(["faux", "x"]), "modelId": st.sampled_from(["faux", "faux-reasoning"])},
    "cycle_model": {}, "get_available_models": {}, "cycle_thinking_level": {},
    "set_thinking_level": {"level": st.sampled_from(["off", "minimal", "low", "medium", "high", "xhigh", "max"])},
    "set_steering_mode": {"mode": _modes}, "set_follow_up_mode": {"mode": _modes}, "set_queue_mode": {"mode": _modes},
    "set_interrupt_mode": {"mode": st.sampled_from(["immediate", "wait", "never"])},
    "compact": {}, "set_auto_compaction": {"enabled": st.booleans()}, "set_auto_retry": {"enabled": st.booleans()},
    "abort_retry": {}, "bash": {}, "abort_bash": {}, "get_session_stats": {}, "export_html": {},
    "switch_session": {"sessionPath": _text}, "fork": {"entryId": _text}, "branch": {"entryId": _text},
    "get_fork_messages": {}, "get_branch_messages": {}, "clone": {}, "get_last_assistant_text": {},
    "set_session_name": {"name": _text}, "get_commands": {}, "get_available_commands": {},
    "list_sessions": {"scope": st.sampled_from(["cwd", "all", "current", "x"])}, "get_sessions": {},
    "get_session_tree": {}, "get_tree": {}, "navigate_tree": {"targetId": _text},
    "set_entry_label": {"targetId": _text, "label": _text}, "set_label": {"targetId": _text},
    "get_context_usage": {}, "get_tools": {},
    "set_active_tools": {"toolNames": st.lists(st.sampled_from(["read", "bash", "ls", "grep", "nope"]), max_size=3)},
    "clear_queue": {}, "reset": {}, "no_such_command": {}, "": {}, "PROMPT": {"message": _text},
}
_fields = st.sampled_from(["message", "images", "streamingBehavior", "mode", "level", "enabled", "provider",
                           "modelId", "entryId", "targetId", "label", "name", "scope", "toolNames", "summarize",
                           "command", "sessionPath", "outputPath", "parentSession", "sessionDir", "customInstructions"])
_field_values = st.one_of(_json, st.sampled_from(["all", "one-at-a-time", "steer", "followUp", "high", "off", "faux",
                                                  "bash", "read", "wait", "immediate", "cwd"]),
                          st.lists(st.sampled_from(["read", "bash", "ls", "nope"]), max_size=3))
# "prompt" first: hypothesis's first batch is its simplest one, 250 prompts in a row (most find the agent busy);
# the commands that start or stop runs are drawn more often than the rest
_WEIGHTED = ["prompt"] * 4 + ["steer", "follow_up", "abort", "abort_and_prompt"] * 2 + list(_TEMPLATES)
_command = st.sampled_from(_WEIGHTED).flatmap(lambda t: st.tuples(
    st.just(t),
    st.fixed_dictionaries(_TEMPLATES[t]),
    st.dictionaries(_fields, _field_values, max_size=2) | st.just({}),
    st.one_of(st.integers(0, 10 ** 12), st.text(min_size=1, max_size=6))))
_garbage = st.one_of(
    st.binary(max_size=30),
    st.text(max_size=30),
    _json.map(lambda v: json.dumps(v, ensure_ascii=False)),
    st.sampled_from(["{", "}", "[", "{\"type\":", "{\"id\":\"x\",", "\"", "nul", "tru", "-", "1e", "{}", "[]", "\t",
                     "\ufeff{}", "{\"type\":\"get_state\",}", "{'type':'get_state'}", "NaN", "Infinity"]),
    _json.map(lambda v: json.dumps(v)[:-1] if len(json.dumps(v)) > 1 else "{"),  # truncated JSON
)
_line = st.one_of(_command.map(lambda c: ("cmd", c)), _garbage.map(lambda g: ("raw", g)))
BATCH = 250
BATCHES = 4
PATH_FIELDS = ("sessionPath", "outputPath", "parentSession", "sessionDir")


def _js_parse(line: bytes):
    """The line as JSON.parse would see it, or a marker when it is not JSON."""
    if line.endswith(b"\r"):
        line = line[:-1]
    try:
        return json.loads(line.decode("utf-8", "replace"), parse_constant=_not_json)
    except (ValueError, RecursionError):
        return _NOT_JSON


_NOT_JSON = object()


def _not_json(name):
    raise ValueError(name)


def test_one_thousand_random_and_malformed_lines(home, spawn):
    p = spawn("--faux-script", home.faux_script({"responses": [{"text": "ok"}], "loop": True}))
    safe_dir = os.path.join(home.root, "fuzz-paths")
    os.makedirs(safe_dir)
    counter = {"lines": 0, "batches": 0, "uid": 0}

    def to_line(item) -> tuple[bytes, object]:
        kind, value = item
        if kind == "raw":
            raw = value if isinstance(value, bytes) else value.encode("utf-8", "surrogatepass")
            raw = raw.replace(b"\n", b" ")
            parsed = _js_parse(raw)
            if isinstance(parsed, dict) and "id" in parsed:  # only the generated commands carry ids
                del parsed["id"]
                raw = json.dumps(parsed, ensure_ascii=False).encode("utf-8", "surrogatepass")
            return raw, None
        ctype, fields, extra, rid = value
        counter["uid"] += 1
        rid = f"{rid}-{counter['uid']}" if isinstance(rid, str) else rid * 10000 + counter["uid"]
        cmd = {"id": rid, "type": ctype, **fields, **extra}
        for key in PATH_FIELDS:  # never let a random path point outside the test's directory
            if isinstance(cmd.get(key), str):
                cmd[key] = os.path.join(safe_dir, re.sub(r"[^A-Za-z0-9]", "_", cmd[key])[:20] or "x") + ".jsonl"
        if ctype == "bash":  # no random shell commands: missing, or of a wrong type
            if isinstance(cmd.get("command"), str):
                del cmd["command"]
        return json.dumps(cmd, ensure_ascii=False).encode("utf-8"), rid

    @settings(max_examples=BATCHES, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(st.lists(_line, min_size=BATCH, max_size=BATCH))
    def one_batch(items):
        lines = [to_line(item) for item in items]
        start = len(p.frames)
        for raw, _rid in lines:
            p.write(raw + b"\n")
        want_ids = [rid for _raw, rid in lines if rid is not None]
        want_idless = sum(1 for _raw, rid in lines if rid is None)
        seen: dict[object, int] = {}
        deadline = time.monotonic() + 30

        def done() -> bool:
            idless = 0
            seen.clear()
            for f in p.frames[start:]:
                if f.get("type") == "response":
                    if "id" in f:
                        key = json.dumps(f["id"])
                        seen[key] = seen.get(key, 0) + 1
                    else:
                        idless += 1
            return all(json.dumps(r) in seen for r in want_ids) and idless >= want_idless

        while not done():
            left = deadline - time.monotonic()
            assert left > 0, (f"unanswered: {[r for r in want_ids if json.dumps(r) not in seen][:10]}; "
                              f"stderr: {p.stderr[-2000:]}")
            p.next(left)
        p.drain(0.3)
        # every command with an id got exactly one response carrying it, and nothing answered twice
        for f in p.frames[start:]:
            if f.get("type") == "response" and "id" in f:
                seen[json.dumps(f["id"])] = seen.get(json.dumps(f["id"]), 0)
        counts: dict[str, int] = {}
        idless = 0
        for f in p.frames[start:]:
            if f.get("type") == "response":
                if "id" in f:
                    counts[json.dumps(f["id"])] = counts.get(json.dumps(f["id"]), 0) + 1
                else:
                    idless += 1
        assert sorted(counts) == sorted(json.dumps(r) for r in want_ids), p.stderr[-2000:]
        assert all(n == 1 for n in counts.values()), {k: n for k, n in counts.items() if n != 1}
        assert idless == want_idless, p.stderr[-2000:]  # every other line got exactly one response too
        assert p.p.poll() is None
        counter["lines"] += len(lines)
        counter["batches"] += 1

    one_batch()
    assert counter["lines"] == BATCH * BATCHES == 1000
    # still alive and answering, stdout still one JSON object per line
    p.ok({"type": "abort"}, timeout=15)
    state = p.ok({"type": "get_state"})
    assert state["isStreaming"] is False
    for raw in p.raw_lines:
        assert isinstance(loads(raw), dict)
    assert p.close() == 0
    assert "Traceback" not in p.stderr


def test_a_deep_session_tree_is_answered(home, spawn):
    """A long session nests get_session_tree's nodes one level per entry: 1,500 entries are far past Python's
    default recursion limit, and the answer must still come (it once killed the process)."""
    p = spawn("--faux-script", home.faux_script([{"text": "x"}]))
    n = 1500
    p.write(b"".join(b'{"type":"set_session_name","name":"n%d"}\n' % i for i in range(n)))
    tree = p.ok({"type": "get_session_tree"}, timeout=30)
    depth, nodes = 0, tree["nodes"]
    while nodes:  # (a loop: the test's own recursion limit must not matter)
        assert len(nodes) == 1
        depth += 1
        nodes = nodes[0]["children"]
    assert depth == n + 2  # model_change, thinking_level_change, then one session_info per name
    assert p.ok({"type": "get_state"})["sessionName"] == f"n{n - 1}"
    assert p.close() == 0
