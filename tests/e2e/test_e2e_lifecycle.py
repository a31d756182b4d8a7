"""End to end: how the real process ends (stdin EOF: exit 0 at once, even mid-stream or mid-tool, no child
left behind) and print mode (``-p``, piped stdin, errors, ``--mode json``)."""

from __future__ import annotations

import json
import os
import subprocess
import time

from e2eproc import PISCES, compact, pgrp_alive


def _wait_for_file(path: str, timeout: float = 10.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if os.path.exists(path):
            with open(path) as f:
                text = f.read().strip()
            if text:
                return text
        time.sleep(0.02)
    raise AssertionError(f"{path} was not written")


def _eof_exit(p, limit: float = 2.0) -> float:
    t0 = time.monotonic()
    p.close_stdin()
    assert p.wait(timeout=10) == 0
    took = time.monotonic() - t0
    assert took < limit, took
    return took


def test_stdin_eof_when_idle_exits_zero(home, spawn):
    p = spawn("--faux-script", home.faux_script([{"text": "x"}]))
    p.ok({"type": "get_state"})
    _eof_exit(p, 1.0)
    assert p.drain(0.1) == []
    assert p.stderr == ""


def test_the_last_line_without_a_newline_is_answered_at_eof(home, spawn):
    p = spawn("--faux-script", home.faux_script([{"text": "x"}]))
    p.write(b'{"id":"last","type":"get_last_assistant_text"}')
    _eof_exit(p)
    assert p.drain(0.2) == [{"id": "last", "type": "response", "command": "get_last_assistant_text",
                             "success": True, "data": {}}]


def test_stdin_eof_mid_stream_exits_zero_at_once(home, spawn):
    p = spawn("--faux-script", home.faux_script([{"text": "w" * 2000, "chunkSize": 4, "delayMs": 20}]))
    p.send({"id": "p", "type": "prompt", "message": "go"})
    p.until(lambda f: f.get("type") == "message_update")
    _eof_exit(p)
    rest = p.drain(0.2)
    # the run was aborted and its end written, never left half-way
    assert [f["type"] for f in rest][-3:] == ["turn_end", "agent_end", "agent_settled"]
    ended = [f for f in rest if f["type"] == "message_end"][-1]["message"]
    assert ended["stopReason"] == "aborted"
    for path in home.session_files():  # and the session file is whole: one JSON object per line
        with open(path, encoding="utf-8") as f:
            lines = [json.loads(line) for line in f]
        assert lines[0]["type"] == "session" and lines[-1]["message"]["stopReason"] == "aborted"


def test_stdin_eof_mid_tool_and_mid_bash_kills_the_children(home, spawn):
    tool_pid = os.path.join(home.root, "tool.pid")
    rpc_pid = os.path.join(home.root, "rpc.pid")
    p = spawn("--faux-script", home.faux_script([
        {"toolCalls": [{"name": "bash", "arguments": {"command": f"echo $$ > {tool_pid}; sleep 30"}}]},
        {"text": "never"}]))
    p.send({"id": "p", "type": "prompt", "message": "sleep"})
    p.until_type("tool_execution_start")
    p.send({"id": "b", "type": "bash", "command": f"echo $$ > {rpc_pid}; sleep 30"})
    groups = [int(_wait_for_file(tool_pid)), int(_wait_for_file(rpc_pid))]
    p.extra_pgids.update(groups)  # killed at teardown should the test fail
    for pgid in groups:  # each runs in its own process group, led by the shell
        assert pgrp_alive(pgid), pgid
    _eof_exit(p)
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline and any(pgrp_alive(g) for g in groups):
        time.sleep(0.02)
    assert [pgrp_alive(g) for g in groups] == [[], []]  # no shell, no sleep left


def test_stdin_eof_during_the_retry_back_off(home, spawn):
    home.write_json("settings.json", {"retry": {"baseDelayMs": 30_000}})
    p = spawn("--faux-script", home.faux_script([{"error": "503 Service Unavailable"}, {"text": "never"}]))
    p.send({"id": "p", "type": "prompt", "message": "go"})
    frames = p.until_type("auto_retry_start")
    assert frames[-1]["delayMs"] == 30_000
    _eof_exit(p)


# -- print mode -----------------------------------------------------------------------------------
def run_print(home, *args: str, stdin: bytes | None = None, timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run([*PISCES, *args], input=stdin, stdin=None if stdin is not None else subprocess.DEVNULL,
                          capture_output=True, env=home.env(), cwd=home.cwd, timeout=timeout)


def user_texts_in_sessions(home) -> list[str]:
    texts = []
    for path in home.session_files():
        with open(path, encoding="utf-8") as f:
            for line in f:
                e = json.loads(line)
                if e["type"] == "message" and e["message"]["role"] == "user":
                    texts.append(e["message"]["content"][0]["text"])
    return texts


def test_print_mode_prints_the_reply(home):
    script = home.faux_script([{"text": "Hello from faux."}])
    r = run_print(home, "-p", "hi", "--provider", "faux", "--faux-script", script)
    assert (r.returncode, r.stdout, r.stderr) == (0, b"Hello from faux.\n", b"")
    assert user_texts_in_sessions(home) == ["hi"]


def test_print_mode_joins_piped_stdin_to_the_prompt(home):
    script = home.faux_script({"responses": [{"text": "ok"}], "loop": True})
    r = run_print(home, "-p", "what is this?", "--faux-script", script, stdin=b"some piped text\n")
    assert (r.returncode, r.stdout) == (0, b"ok\n"), r.stderr
    r = run_print(home, "-p", "--faux-script", script, stdin=b"only stdin\n")
    assert (r.returncode, r.stdout) == (0, b"ok\n"), r.stderr
    assert sorted(user_texts_in_sessions(home)) == sorted(["some piped text\n\nwhat is this?", "only stdin\n"])


def test_print_mode_error_reply_exits_non_zero(home):
    script = home.faux_script([{"text": "half an ans", "error": "scripted failure: bad things"}])
    r = run_print(home, "-p", "hi", "--faux-script", script)
    assert r.returncode == 1
    assert r.stdout == b""  # a failed reply's partial text is not printed as the answer
    assert r.stderr.decode().strip().endswith("scripted failure: bad things")


def test_print_mode_without_a_prompt_is_a_usage_error(home):
    r = run_print(home, "-p", "--provider", "faux")
    assert r.returncode == 2 and r.stdout == b""
    assert b"no prompt given" in r.stderr


def test_json_mode_prints_every_event_as_a_json_line(home):
    script = home.faux_script([{"toolCalls": [{"name": "bash", "arguments": {"command": "echo hi"}}]},
                               {"text": "done"}])
    r = run_print(home, "--mode", "json", "run echo", "--faux-script", script)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.decode().splitlines()
    events = [json.loads(line) for line in lines]
    assert all(isinstance(e, dict) for e in events)
    assert events[0]["type"] == "session" and events[0]["version"] == 3  # pi's header line comes first
    seq = [t for t in compact(events[1:]) if not t.startswith("tool_execution_update")]
    assert seq == ["agent_start", "turn_start", "message_start:user", "message_end:user",
                   "message_start:assistant", "message_update*", "message_end:assistant",
                   "tool_execution_start:bash", "tool_execution_end:bash", "message_start:toolResult",
                   "message_end:toolResult", "turn_end", "turn_start", "message_start:assistant", "message_update*",
                   "message_end:assistant", "turn_end", "agent_end", "agent_settled"]
    end = next(e for e in events if e["type"] == "tool_execution_end")
    assert end["result"]["content"] == [{"type": "text", "text": "hi\n"}]
