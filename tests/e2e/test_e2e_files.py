"""End to end: hostile paths against the real ``pisces --mode rpc`` process. A read of /dev/stdin must not
steal the client's command lines; aborted tool calls must not pile up workers (nor keep the process from
ending at stdin EOF); switch_session and --session to a FIFO or a device answer with an error and the
process keeps serving; a checkout whose configuration files are FIFOs or links to devices starts.

Each process runs with an address-space limit (a regression that reads /dev/zero fails with MemoryError
instead of taking the machine) and every wait is bounded.
"""

from __future__ import annotations

import json
import os
import sys
import time

from e2eproc import PISCES, Home, Proc

MEMORY = 3 << 30
LIMIT = ("import os, resource, sys; resource.setrlimit(resource.RLIMIT_AS, ({0}, {0})); "
         "os.execv(sys.argv[1], sys.argv[1:])").format(MEMORY)


def bounded(home: Home, *args: str, cwd: str | None = None) -> Proc:
    """``pisces --mode rpc *args`` with its address space capped (the cap is set, then pisces is exec'd)."""
    env = home.env(MALLOC_ARENA_MAX="2")
    return Proc([sys.executable, "-c", LIMIT, *PISCES, "--mode", "rpc", *args], env, cwd or home.cwd)


def started(p: Proc) -> Proc:
    first = p.next(30)
    assert first == {"type": "ready"}, first
    return p


def tool_ends(frames: list[dict]) -> list[dict]:
    return [f for f in frames if f.get("type") == "tool_execution_end"]


def until_all(p: Proc, preds: list, timeout: float = 30.0) -> list[dict]:
    """Frames read until each predicate has matched one of them (in any order)."""
    left = list(preds)
    frames: list[dict] = []

    def seen(f: dict) -> bool:
        for pred in list(left):
            if pred(f):
                left.remove(pred)
        return not left

    frames += p.until(seen, timeout)
    return frames


def task_count(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/task"))


# ---------------------------------------------------------------------------------------------
def test_read_of_dev_stdin_never_steals_command_lines(home):
    script = home.faux_script([{"toolCalls": [{"name": "read", "arguments": {"path": "/dev/stdin"}}]},
                               {"text": "done"}])
    with started(bounded(home, "--faux-script", script)) as p:
        p.send({"id": "p", "type": "prompt", "message": "read stdin"})
        p.until(lambda f: f.get("type") == "tool_execution_start", 30)
        for i in range(200):
            p.send({"id": f"s{i}", "type": "get_state"})
        answered: set[str] = set()

        def all_answered(f: dict) -> bool:
            if f.get("type") == "response":
                answered.add(str(f.get("id")))
            return len(answered - {"p"}) == 200

        frames = until_all(p, [all_answered, lambda f: f.get("type") == "agent_settled"], 60)
        assert answered - {"p"} == {f"s{i}" for i in range(200)}
        end = tool_ends(frames)[0]
        assert end["isError"] is True
        assert end["result"]["content"][0]["text"].startswith(
            "Cannot read /dev/stdin: it is a FIFO (named pipe), not a regular file")
        assert p.close(30) == 0


def test_aborted_reads_do_not_pile_up_workers_and_eof_still_ends_the_process(home):
    """Eight reads of a 64 GiB sparse file, each aborted while it scans, then a read of a FIFO and of a
    small file: both answer (the default executor has six threads; stuck workers used to take them all),
    the workers of the aborted reads stop, and stdin EOF still ends the process with 0."""
    with open(os.path.join(home.cwd, "huge.txt"), "wb") as f:
        f.truncate(64 << 30)
    os.mkfifo(os.path.join(home.cwd, "pipe"))
    with open(os.path.join(home.cwd, "small.txt"), "w") as f:
        f.write("small and fine\n")
    # from a line the file does not have: the scan goes on through the whole file (no output is decided
    # before it), so the abort finds it scanning however late it comes on a busy machine
    huge = {"toolCalls": [{"name": "read", "arguments": {"path": "huge.txt", "offset": 1_000_000}}]}
    script = home.faux_script([huge] * 8 + [
        {"toolCalls": [{"name": "read", "arguments": {"path": "pipe"}},
                       {"name": "read", "arguments": {"path": "small.txt"}}]},
        {"text": "done"}])
    with started(bounded(home, "--faux-script", script)) as p:
        p.ok({"type": "get_state"})
        baseline = task_count(p.p.pid)
        for i in range(8):
            p.send({"id": f"p{i}", "type": "prompt", "message": "read the huge file"})
            p.until(lambda f: f.get("type") == "tool_execution_start", 30)
            p.send({"id": f"a{i}", "type": "abort"})
            frames = until_all(p, [lambda f: f.get("type") == "agent_settled",
                                   lambda f: f.get("type") == "response" and f.get("id") == f"a{i}"])
            assert tool_ends(frames)[0]["result"]["content"][0]["text"] == "Operation aborted"
        p.send({"id": "last", "type": "prompt", "message": "read the others"})
        frames = p.until(lambda f: f.get("type") == "agent_settled", 60)
        pipe_end, small_end = tool_ends(frames)
        assert pipe_end["isError"] is True and "it is a FIFO (named pipe)" in pipe_end["result"]["content"][0]["text"]
        assert small_end["isError"] is False
        assert small_end["result"]["content"][0]["text"] == "small and fine\n"
        deadline = time.monotonic() + 60  # the aborted workers notice the abort between two chunks
        while task_count(p.p.pid) > baseline + 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert task_count(p.p.pid) <= baseline + 1, "workers of aborted reads are still running"
        # and with one more long read in flight, EOF ends the process at once
        p.send({"id": "again", "type": "prompt", "message": "one more"})
        p.close_stdin()
        assert p.wait(30) == 0


def test_switch_session_to_a_fifo_or_a_device_is_an_error_and_the_process_keeps_serving(home):
    os.mkfifo(os.path.join(home.root, "pipe.jsonl"))
    os.symlink("/dev/zero", os.path.join(home.root, "zero.jsonl"))
    script = home.faux_script([{"text": "first answer"}, {"text": "second answer"}])
    with started(bounded(home, "--faux-script", script)) as p:
        p.send({"id": "p", "type": "prompt", "message": "hello"})
        p.until(lambda f: f.get("type") == "agent_settled", 30)
        before = p.ok({"type": "get_state"})
        for target, kind in ((os.path.join(home.root, "pipe.jsonl"), "a FIFO (named pipe)"),
                             ("/dev/zero", "a character device"), ("/dev/stdin", "a FIFO (named pipe)"),
                             (os.path.join(home.root, "zero.jsonl"), "a character device")):
            r = p.request({"id": "sw", "type": "switch_session", "sessionPath": target}, timeout=30)
            assert r == {"id": "sw", "type": "response", "command": "switch_session", "success": False,
                         "error": f"Cannot use {target} as the session file: it is {kind}, not a regular file"}
            state = p.ok({"type": "get_state"}, timeout=30)
            assert state["sessionFile"] == before["sessionFile"] and state["sessionId"] == before["sessionId"]
        p.send({"id": "p2", "type": "prompt", "message": "still there?"})
        frames = p.until(lambda f: f.get("type") == "agent_settled", 30)
        assert any(f.get("type") == "message_end" and f["message"].get("role") == "assistant" for f in frames)
        assert p.ok({"type": "get_last_assistant_text"}) == {"text": "second answer"}
        with open(before["sessionFile"], encoding="utf-8") as f:
            kinds = [json.loads(line)["type"] for line in f]
        assert kinds[0] == "session" and kinds.count("message") == 4  # both exchanges, nothing lost


def test_session_flag_naming_a_fifo_or_a_device_exits_with_a_clear_error(home):
    fifo = os.path.join(home.root, "pipe.jsonl")
    os.mkfifo(fifo)
    for target, kind in ((fifo, "a FIFO (named pipe)"), ("/dev/zero", "a character device")):
        p = bounded(home, "--session", target)
        try:
            code = p.wait(30)
        finally:
            p.close()
        assert code == 1
        assert p.stderr == f"pisces: Cannot use {target} as the session file: it is {kind}, not a regular file\n"


def test_a_checkout_whose_configuration_is_fifos_and_device_links_starts_and_serves(home):
    cfg = os.path.join(home.cwd, ".pisces")
    os.makedirs(os.path.join(cfg, "prompts"))
    os.mkfifo(os.path.join(cfg, "settings.json"))
    os.symlink("/dev/zero", os.path.join(cfg, "prompts", "x.md"))
    os.mkfifo(os.path.join(cfg, "SYSTEM.md"))
    os.symlink("/dev/urandom", os.path.join(cfg, "APPEND_SYSTEM.md"))
    os.symlink("/dev/zero", os.path.join(home.cwd, "AGENTS.md"))
    script = home.faux_script([{"text": "hi"}])
    with started(bounded(home, "--faux-script", script)) as p:
        assert p.ok({"type": "get_state"}, timeout=30)["isStreaming"] is False
        assert p.ok({"type": "get_commands"}, timeout=30) == {"commands": []}
        p.send({"id": "p", "type": "prompt", "message": "/x hello"})
        frames = p.until(lambda f: f.get("type") == "agent_settled", 30)
        user = next(f for f in frames if f.get("type") == "message_end" and f["message"]["role"] == "user")
        assert user["message"]["content"][0]["text"] == "/x hello"
        assert p.close(30) == 0
    for name in ("settings.json", "x.md", "SYSTEM.md", "APPEND_SYSTEM.md", "AGENTS.md"):
        p.wait_stderr(name)
