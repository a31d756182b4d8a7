"""stdin closed while work is in flight: the process exits with 0 within 1 s and leaves no process behind.

"In flight" covers a streaming reply, a bash tool call and an RPC ``bash`` command each running a
``sleep 30`` (with a background grandchild in the same process group), an HTTP request whose stream has
gone silent, and an auto-retry back-off. Before stdin is closed the agent's descendants are read from /proc
(pids and process groups); after the exit none of them, and nothing else in their process groups, may be
alive.
"""

from __future__ import annotations

import os
import signal
import time

import pytest
from robust_harness import Agent, write_faux_script, write_scripted_config

from proc_table import children_of, descendants, in_groups, live_processes
from scripted_server import Reply, Stall

EXIT_WITHIN = 10.0  # a bound on a hang, far below the sleepers' 30 s
SLEEPER = "sleep 30 & sleep 31; wait"


def close_and_check(agent: Agent, watched: list[int]) -> None:
    """Close stdin; the agent must exit 0 within EXIT_WITHIN and take ``watched`` (and their groups) along."""
    procs = live_processes()
    groups = {procs[p].pgid for p in watched if p in procs}
    t0 = time.monotonic()
    agent.close_stdin()
    code = agent.wait_exit(EXIT_WITHIN)
    elapsed = time.monotonic() - t0
    assert code is not None, agent.describe(f"still running {EXIT_WITHIN} s after stdin was closed")
    assert code == 0, agent.describe(f"stdin EOF must end the process with 0, got {code}")
    # a killed child may take a moment to be reaped by init once its parent is gone
    deadline = time.monotonic() + 5
    while True:
        left = sorted(set(p for p in watched if p in live_processes()) | set(in_groups(groups)))
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.02)
    if left:
        names = [open(f"/proc/{p}/cmdline", "rb").read() for p in left if _exists(p)]
        for pid in left:  # ours to clean up, by pid
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        raise AssertionError(f"processes left behind after exit: {left} ({names})")
    assert not children_of(agent.pid)
    agent.wait_until(lambda: agent.eof, timeout=2, what="stdout EOF")
    assert not agent.violations, agent.describe("stdout carried something that is not a frame")
    assert elapsed < EXIT_WITHIN


def _exists(pid: int) -> bool:
    try:
        open(f"/proc/{pid}/cmdline", "rb").close()
        return True
    except OSError:
        return False


def wait_descendants(agent: Agent, want: int, timeout: float = 5.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while True:
        found = descendants(agent.pid)
        if len(found) >= want or time.monotonic() > deadline:
            return found
        time.sleep(0.02)


def faux_agent(tmp_path, responses: list[dict]) -> Agent:
    script = write_faux_script(str(tmp_path / "script.json"), responses, loop=False)
    agent = Agent(["--provider", "faux", "--faux-script", script], home=str(tmp_path / "home"),
                  cwd=str(tmp_path / "work"))
    agent.wait_for(lambda f: f.get("type") == "ready")
    return agent


def test_stdin_closed_while_a_reply_streams(tmp_path):
    agent = faux_agent(tmp_path, [{"text": "slow words " * 400, "chunkSize": 3, "delayMs": 20}])
    try:
        agent.send({"id": "p", "type": "prompt", "message": "talk"})
        agent.wait_for(lambda f: f.get("type") == "message_update")
        close_and_check(agent, descendants(agent.pid))
    finally:
        agent.cleanup()


def test_stdin_closed_during_a_bash_tool_call(tmp_path):
    agent = faux_agent(tmp_path, [{"toolCalls": [{"name": "bash", "arguments": {"command": SLEEPER}}]},
                                  {"text": "never reached"}])
    try:
        agent.send({"id": "p", "type": "prompt", "message": "sleep"})
        agent.wait_for(lambda f: f.get("type") == "tool_execution_start")
        kids = wait_descendants(agent, 3)  # bash, sleep 30, sleep 31
        assert len(kids) >= 3, f"the tool's processes did not start: {kids}"
        close_and_check(agent, kids)
    finally:
        agent.cleanup()


def test_stdin_closed_during_an_rpc_bash_command(tmp_path):
    agent = faux_agent(tmp_path, [{"text": "x"}])
    try:
        agent.send({"id": "b", "type": "bash", "command": SLEEPER})
        kids = wait_descendants(agent, 3)
        assert len(kids) >= 3, f"the command's processes did not start: {kids}"
        close_and_check(agent, kids)
    finally:
        agent.cleanup()


@pytest.mark.parametrize("where", ["silent stream", "retry back-off"])
def test_stdin_closed_while_a_request_is_in_flight(tmp_path, server, where):
    home = str(tmp_path / "home")
    # long timeouts: only the shutdown may end the wait
    write_scripted_config(home, server.url, idle_timeout_ms=60_000, base_delay_ms=30_000)
    if where == "silent stream":
        server.push(Reply.sse([{"id": "c", "object": "chat.completion.chunk", "model": "scripted-model",
                                "choices": [{"index": 0, "delta": {"content": "Hel"}, "finish_reason": None}]},
                               Stall(10.0)]))
    else:
        server.push(Reply.json(503, {"error": {"message": "Service Unavailable"}}))
    agent = Agent([], home=home, cwd=str(tmp_path / "work"))
    try:
        agent.wait_for(lambda f: f.get("type") == "ready")
        agent.send({"id": "p", "type": "prompt", "message": "hello"})
        if where == "silent stream":
            agent.wait_for(lambda f: f.get("type") == "message_update", timeout=10)
        else:
            agent.wait_for(lambda f: f.get("type") == "auto_retry_start", timeout=10)
        close_and_check(agent, descendants(agent.pid))
    finally:
        agent.cleanup()
