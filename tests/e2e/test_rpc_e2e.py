"""End to end: the real ``pisces --mode rpc`` process, the faux model, JSON lines in and out."""

from __future__ import annotations

import json
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rpcproc import RpcProc

from proc_table import live_processes


@pytest.fixture
def script(tmp_path):
    path = tmp_path / "script.json"

    def write(responses, loop=False):
        path.write_text(json.dumps({"responses": responses, "loop": loop}))
        return str(path)

    return write


def start(tmp_path, script_path, *extra):
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    return RpcProc(["--provider", "faux", "--faux-script", script_path, *extra], home=str(tmp_path / "home"),
                   cwd=str(work))


def types(frames):
    return [f.get("type") if f.get("type") != "response" else f"response:{f.get('command')}" for f in frames]


def test_ready_then_state(tmp_path, script):
    with start(tmp_path, script([{"text": "x"}])) as p:
        assert p.next_frame() == {"type": "ready"}
        state = p.request({"id": "s", "type": "get_state"})["data"]
        assert state["model"]["provider"] == "faux"
        assert state["pendingMessageCount"] == 0 and state["queuedMessageCount"] == 0
        assert state["interruptMode"] == "immediate" and state["isStreaming"] is False
        assert p.close() == 0


def test_text_prompt_event_order(tmp_path, script):
    with start(tmp_path, script([{"text": "hello there", "chunkSize": 4}])) as p:
        p.next_frame()
        p.send({"id": "p", "type": "prompt", "message": "hi"})
        frames = p.until(lambda f: f.get("type") == "agent_settled")
        seq = [t for t in types(frames) if t != "message_update"]
        assert seq == ["response:prompt", "agent_start", "turn_start", "message_start", "message_end",
                       "message_start", "message_end", "turn_end", "agent_end", "agent_settled"]
        update_frames = [f for f in frames if f.get("type") == "message_update"]
        updates = [f["assistantMessageEvent"] for f in update_frames]
        assert [u["type"] for u in updates] == ["text_start", "text_delta", "text_delta", "text_delta", "text_end"]
        assert "".join(u.get("delta", "") for u in updates) == "hello there"
        assert all(f["assistantMessageEvent"]["partial"] == f["message"] for f in update_frames)  # pi's shape
        end = [f for f in frames if f.get("type") == "message_end"][-1]["message"]
        assert end["content"] == [{"type": "text", "text": "hello there"}] and end["stopReason"] == "stop"
        text = p.request({"id": "t", "type": "get_last_assistant_text"})
        assert text["data"] == {"text": "hello there"}


def test_tool_turn_with_bash(tmp_path, script):
    with start(tmp_path, script([{"toolCalls": [{"name": "bash", "arguments": {"command": "echo from-bash"}}]},
                                 {"text": "done"}])) as p:
        p.next_frame()
        p.send({"id": "p", "type": "prompt", "message": "run it"})
        frames = p.until(lambda f: f.get("type") == "agent_settled")
        seq = [t for t in types(frames) if t not in ("message_update", "tool_execution_update")]
        assert seq == ["response:prompt", "agent_start", "turn_start", "message_start", "message_end",
                       "message_start", "message_end", "tool_execution_start", "tool_execution_end",
                       "message_start", "message_end", "turn_end", "turn_start", "message_start", "message_end",
                       "turn_end", "agent_end", "agent_settled"]
        end = next(f for f in frames if f.get("type") == "tool_execution_end")
        assert end["isError"] is False and end["result"]["content"][0]["text"] == "from-bash\n"


def test_streaming_queue_and_busy_error(tmp_path, script):
    slow = {"text": "a slow answer " * 6, "chunkSize": 4, "delayMs": 15}
    with start(tmp_path, script([slow, {"text": "steered"}, {"text": "followed"}])) as p:
        p.next_frame()
        p.send({"id": "p", "type": "prompt", "message": "go"})
        p.until(lambda f: f.get("type") == "message_update")
        busy = p.request({"id": "b", "type": "prompt", "message": "again"})
        assert busy["success"] is False
        assert busy["error"] == ("Agent is already processing. Specify streamingBehavior ('steer' or 'followUp') "
                                 "to queue the message.")
        p.send({"id": "s", "type": "steer", "message": "steer one"})
        frames = p.until(lambda f: f.get("id") == "s")
        queued = [f for f in frames if f.get("type") == "queue_update"]
        assert queued[-1] == {"type": "queue_update", "steering": ["steer one"], "followUp": []}
        p.send({"id": "f", "type": "follow_up", "message": "follow one"})
        p.response("f")
        frames = p.until(lambda f: f.get("type") == "agent_settled", timeout=20)
        users = [f["message"]["content"][0]["text"] for f in frames
                 if f.get("type") == "message_start" and f["message"]["role"] == "user"]
        assert users == ["steer one", "follow one"]
        assert sum(1 for f in frames if f.get("type") == "agent_end") == 1


def test_abort_answers_after_agent_end(tmp_path, script):
    with start(tmp_path, script([{"text": "x" * 400, "chunkSize": 4, "delayMs": 20}])) as p:
        p.next_frame()
        p.send({"id": "p", "type": "prompt", "message": "go"})
        p.until(lambda f: f.get("type") == "message_update")
        p.send({"id": "a", "type": "abort"})
        frames = p.until(lambda f: f.get("id") == "a")
        kinds = types(frames)
        assert kinds.index("agent_end") < kinds.index("response:abort")
        end = [f for f in frames if f.get("type") == "message_end"][-1]["message"]
        assert end["stopReason"] == "aborted" and end["errorMessage"] == "Request was aborted"


def test_protocol_errors(tmp_path, script):
    with start(tmp_path, script([{"text": "x"}])) as p:
        p.next_frame()
        cases = [
            (b"this is not json", "Failed to parse command: Unexpected token 'h', \"this is not json\" is not valid JSON"),
            (b'{"id":"x1","type":"get_state"', "Failed to parse command: Expected ',' or '}' after property value in "
                                                "JSON at position 29"),
            (b"", "Failed to parse command: Unexpected end of JSON input"),
        ]
        for line, error in cases:
            p.send_raw(line)
            frame = p.next_frame()
            assert frame == {"type": "response", "command": "parse", "success": False, "error": error}
        r = p.request({"id": "u1", "type": "no_such_command"})
        assert r == {"id": "u1", "type": "response", "command": "no_such_command", "success": False,
                     "error": "Unknown command: no_such_command"}
        r = p.request({"id": "u7"})
        assert r["error"] == "Unknown command: undefined" and "command" not in r
        r = p.request({"id": "r7", "type": "prompt"})
        assert r["error"] == "Cannot read properties of undefined (reading 'startsWith')"
        r = p.request({"id": "r10", "type": "switch_session"})
        assert r["error"] == 'The "paths[0]" argument must be of type string. Received undefined'
        r = p.request({"id": "m", "type": "prompt", "message": 42})
        assert r["success"] is False and "expected a string" in r["error"]
        p.send_raw(b'{"id":"crlf","type":"get_state"}\r')
        assert p.response("crlf")["success"] is True
        r = p.request({"id": 42, "type": "get_state"})
        assert r["id"] == 42
        r = p.request({"id": "al", "type": "get_branch_messages"})
        assert r["command"] == "get_branch_messages" and r["success"] is True


def test_long_line_and_line_separator(tmp_path, script):
    with start(tmp_path, script([{"text": "ok"}], loop=True)) as p:
        p.next_frame()
        p.request({"id": "c", "type": "set_auto_compaction", "enabled": False})  # 2.6M tokens would compact
        text = "a\u2028b " + "x" * (10 * 1024 * 1024)
        p.send({"id": "big", "type": "prompt", "message": text})
        assert p.response("big", timeout=60)["success"] is True
        p.until(lambda f: f.get("type") == "agent_settled", timeout=60)
        msgs = p.request({"id": "m", "type": "get_messages"}, timeout=60)["data"]["messages"]
        assert msgs[0].get("role") == "user", {k: str(v)[:300] for k, v in msgs[0].items()}
        assert msgs[0]["content"][0]["text"] == text


# no NaN/Infinity: json.dumps writes them, but they are not JSON (JSON.parse, and pisces, reject the line)
_json_values = st.recursive(st.none() | st.booleans() | st.integers(-10**20, 10**20)
                            | st.floats(allow_nan=False, allow_infinity=False)
                            | st.text(max_size=20), lambda c: st.lists(c, max_size=3)
                            | st.dictionaries(st.text(max_size=8), c, max_size=3), max_leaves=8)
_types = st.sampled_from(["get_state", "get_messages", "steer", "follow_up", "set_model", "cycle_model",
                          "set_thinking_level", "set_steering_mode", "get_session_stats", "fork", "get_fork_messages",
                          "set_session_name", "get_last_assistant_text", "get_commands", "get_tools", "bogus",
                          "set_entry_label", "get_session_tree", "list_sessions", "get_context_usage", "clear_queue",
                          "set_interrupt_mode", "get_available_models", "cycle_thinking_level"])
_commands = st.builds(lambda t, fields: {**fields, "type": t}, _types,
                      st.dictionaries(st.sampled_from(["message", "mode", "level", "entryId", "name", "provider",
                                                       "modelId", "targetId", "label", "images", "scope"]),
                                      _json_values, max_size=3))
_garbage = st.one_of(st.binary(max_size=40).filter(lambda b: b"\n" not in b),
                     st.text(max_size=40).filter(lambda s: "\n" not in s and "\r" not in s).map(str.encode),
                     _json_values.map(lambda v: json.dumps(v).encode()))
_lines = st.lists(st.one_of(_commands.map(lambda c: ("cmd", c)), _garbage.map(lambda g: ("raw", g))),
                  min_size=100, max_size=100)


@settings(max_examples=10, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large])
@given(batch=_lines)
def test_random_and_malformed_lines(tmp_path_factory, batch):
    """10 batches of 100 lines (1,000 in all) against one process each: alive, every line answered."""
    tmp = tmp_path_factory.mktemp("fuzz")
    script_path = tmp / "s.json"
    script_path.write_text(json.dumps({"responses": [{"text": "ok"}], "loop": True}))
    work = tmp / "w"
    work.mkdir()
    with RpcProc(["--provider", "faux", "--faux-script", str(script_path), "--no-session"], home=str(tmp / "h"),
                 cwd=str(work)) as p:
        p.next_frame()
        ids = []
        for i, (kind, item) in enumerate(batch):
            if kind == "cmd":
                item = {**item, "id": f"f{i}"}
                ids.append(item["id"])
                p.send(item)
            else:
                p.send_raw(item)
        p.send({"id": "last", "type": "get_state"})
        frames = p.until(lambda f: f.get("id") == "last", timeout=60)
        # (garbage lines may be JSON objects with an "id" of any type, which is echoed too: count ours only)
        answered = {f.get("id") for f in frames if f.get("type") == "response" and isinstance(f.get("id"), str)}
        missing = [i for i in ids if i not in answered]
        if missing:  # a command that waits (a prompt's run, say) may answer after the last get_state
            pending = set(missing)
            frames += p.until(lambda f: f.get("type") == "response" and isinstance(f.get("id"), str)
                              and pending.discard(f.get("id")) is None and not pending, timeout=60)
        responses = [f for f in frames if f.get("type") == "response"]
        by_id = {}
        for r in responses:
            if isinstance(r.get("id"), str):
                by_id.setdefault(r["id"], []).append(r)
        for rid in ids:
            assert len(by_id.get(rid, [])) == 1, (rid, by_id.get(rid))
        assert len(responses) >= len(batch) + 1  # every line answered (commands once, garbage with `parse`)
        assert all("__not_json__" not in f for f in frames)
        assert p.proc.poll() is None
        assert p.close() == 0


def test_stdin_eof_mid_run_exits_zero_and_kills_children(tmp_path, script):
    with start(tmp_path, script([{"toolCalls": [{"name": "bash", "arguments": {"command": "sleep 30"}}]},
                                 {"text": "never"}])) as p:
        p.next_frame()
        p.send({"id": "p", "type": "prompt", "message": "sleep"})
        start_frame = p.until(lambda f: f.get("type") == "tool_execution_start")
        assert start_frame
        time.sleep(0.2)
        pid = p.proc.pid
        t0 = time.monotonic()
        assert p.close(timeout=20) == 0
        assert time.monotonic() - t0 < 20  # well before the 30 s sleep would end
        left = [(p, info) for p, info in live_processes().items()
                if pid in (info.ppid, info.pgid, info.sid) and info.comm == "sleep"]
        assert not left, left
