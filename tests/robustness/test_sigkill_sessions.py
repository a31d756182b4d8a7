"""SIGKILL at random moments while the real process writes its session: every file still loads.

Each round spawns ``pisces --mode rpc`` on one session directory (a new session, or ``--continue`` of the
last one, so appends after a crash are covered too), drives prompts (large replies, tool calls, steering,
session names) with the faux model and SIGKILLs the process at a random moment. Some rounds also tear the
file's last line by hand afterwards, as a crash in the middle of a write would.

Afterwards every file must load with ``load_session_file``: a header, entries that parse, ids unique and
every ``parentId`` known. A line that does not parse is allowed only where a crash or a tear left the end of
the file (the line being written). Nothing the client saw completed may be missing: once a frame follows
a message's ``message_end`` (the entry is appended right after that event is sent), the entry is on disk.
"""

from __future__ import annotations

import glob
import json
import os
import random
import threading
import time

from robust_harness import Agent, write_faux_script

ROUNDS = 12
BIG = "The quick brown fox jumps over the lazy dog. \u00e9\u2028\u4e2d " * 3000  # ~150 KB per reply


def faux_script(path: str) -> str:
    return write_faux_script(path, [
        {"text": BIG, "chunkSize": 40_000},
        {"text": "Listing.", "toolCalls": [{"name": "ls", "arguments": {}}]},
        {"thinking": "short thought", "text": "short answer", "delayMs": 2},
        {"toolCalls": [{"name": "write", "arguments": {"path": "out.txt", "content": BIG[:20_000]}}]},
        {"text": "after the tool " * 50, "chunkSize": 64, "delayMs": 1},
    ], loop=True)


def message_lines(path: str) -> int:
    """Message entries in the file, as pisces loads it."""
    from pisces.core.store import entry_type, load_session_file

    loaded = load_session_file(path)
    if loaded is None or loaded.header is None:
        return 0
    return sum(1 for e in loaded.entries if entry_type(e) == "message")


def committed_messages(frames: list[dict]) -> int:
    """Messages whose entries must be on disk: every ``message_end`` followed by another frame, once the
    session has an assistant message (before that nothing is written, as in pi)."""
    settled = frames[:-1]
    if not any(f.get("type") == "message_end" and f["message"].get("role") == "assistant" for f in settled):
        return 0
    return sum(1 for f in settled if f.get("type") == "message_end")


def drive(agent: Agent, rng: random.Random, stop: threading.Event) -> None:
    """Prompts, steering and names until the process dies."""
    n = 0
    try:
        while not stop.is_set():
            n += 1
            start = agent.count()
            agent.send({"id": f"p{n}", "type": "prompt", "message": f"prompt {n} " + "x" * rng.randint(0, 3000)})
            if rng.random() < 0.4:
                agent.send({"id": f"s{n}", "type": "steer", "message": f"steer {n}"})
            if rng.random() < 0.3:
                agent.send({"id": f"n{n}", "type": "set_session_name", "name": f"name {n} \u2028"})
            agent.wait_for(lambda f: f.get("type") == "agent_settled", start, timeout=10)
    except AssertionError:
        pass  # stdout ended: killed


def check_file(path: str, eof_marks: set[int]) -> int:
    """Loads, parses; returns the number of torn lines. ``eof_marks`` are the file sizes crashes left."""
    from pisces.core.store import load_session_file

    loaded = load_session_file(path)
    assert loaded is not None and loaded.header is not None, f"{path}: no header after a crash"
    assert loaded.header.id, f"{path}: header without a session id"
    with open(path, "rb") as f:
        data = f.read()
    first = data.split(b"\n", 1)[0]
    assert json.loads(first)["type"] == "session", f"{path}: first line is not the header"
    torn = 0
    offset = 0
    ids: list[str] = []
    parents: list[str | None] = []
    lines = data.split(b"\n")
    for i, line in enumerate(lines):
        end = offset + len(line)
        if line.strip():
            try:
                obj = json.loads(line)
            except ValueError:
                torn += 1
                last = i == len(lines) - 1 or (i == len(lines) - 2 and not lines[-1])
                assert last or end in eof_marks, (
                    f"{path}: line {i + 1} is broken but no crash left the file end there "
                    f"(line ends at byte {end}, crashes left {sorted(eof_marks)})")
            else:
                if i > 0:
                    assert obj.get("type") != "session", f"{path}: a second header at line {i + 1}"
                    ids.append(obj["id"])
                    parents.append(obj.get("parentId"))
        offset = end + 1
    assert len(ids) == len(set(ids)), f"{path}: an entry was written twice"
    known = set(ids)
    assert all(p is None or p in known for p in parents), f"{path}: an entry's parent is missing"
    assert len(loaded.entries) == len(ids), f"{path}: {len(ids)} entry lines but {len(loaded.entries)} loaded"
    return torn


def test_sigkill_during_session_writes_leaves_loadable_files(tmp_path):
    rng = random.Random(20240521)
    home, work = str(tmp_path / "home"), str(tmp_path / "work")
    sessions = str(tmp_path / "sessions")
    script = faux_script(str(tmp_path / "script.json"))
    eof_marks: dict[str, set[int]] = {}
    kills_with_data = 0
    stats: list[tuple] = []
    for round_no in range(ROUNDS):
        cont = round_no > 0 and rng.random() < 0.5
        args = ["--provider", "faux", "--faux-script", script, "--session-dir", sessions]
        agent = Agent(args + (["--continue"] if cont else []), home=home, cwd=work)
        stop = threading.Event()
        try:
            agent.wait_for(lambda f: f.get("type") == "ready")
            path = agent.request({"id": "st", "type": "get_state"})["data"]["sessionFile"]
            before = message_lines(path) if os.path.exists(path) else 0
            driver = threading.Thread(target=drive, args=(agent, random.Random(round_no), stop), daemon=True)
            driver.start()
            time.sleep(rng.uniform(0.05, 0.7))
            agent.kill()
            stop.set()
            driver.join(timeout=10)
            agent.wait_until(lambda: agent.eof, timeout=5, what="stdout EOF after the kill")
            frames = agent.snapshot()
            # the kill may cut the frame being written; anything else on stdout must be whole frames
            assert len(agent.violations) <= 1 and all(v.startswith("line does not end with LF")
                                                      for v in agent.violations), agent.describe("bad stdout")
        finally:
            stop.set()
            agent.cleanup()
        if not os.path.exists(path):
            assert committed_messages(frames) == 0, f"round {round_no}: messages were sent but no file exists"
            continue
        kills_with_data += 1
        stats.append((round_no, "continue" if cont else "new", len(frames)))
        on_disk = message_lines(path)
        saw = committed_messages(frames)
        total_seen = sum(1 for f in frames if f.get("type") == "message_end")
        assert on_disk >= before + saw, (
            f"round {round_no}: the client saw {saw} messages completed, but only {on_disk - before} reached "
            f"{path}")
        assert on_disk <= before + total_seen, (
            f"round {round_no}: {on_disk - before} new messages on disk but only {total_seen} were ever sent")
        marks = eof_marks.setdefault(path, set())
        marks.add(os.path.getsize(path))
        if rng.random() < 0.4:  # tear the last line, as a crash in the middle of its write would
            size = os.path.getsize(path)
            with open(path, "rb") as f:
                data = f.read()
            last_start = data.rstrip(b"\n").rfind(b"\n") + 1
            if 0 < last_start < size - 2:
                cut = rng.randint(last_start + 1, size - 2)
                os.truncate(path, cut)
                marks.add(cut)
    assert kills_with_data >= ROUNDS // 2, "most rounds must have written something before the kill"
    files = glob.glob(os.path.join(sessions, "*.jsonl"))
    assert files, "no session file was written"
    torn = sum(check_file(path, eof_marks.get(path, set())) for path in files)
    print(f"rounds with a file: {stats}; files: {len(files)}; torn lines: {torn}")

