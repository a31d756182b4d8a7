"""SIGINT, SIGTERM and SIGHUP end the real process as cleanly as stdin EOF (pisces.modes.signals).

Supervisors, IDEs and ``docker stop`` send SIGTERM; a closed terminal sends SIGHUP. Their default action left
every tool process running (3 of 3). Now, in every mode (rpc, print, json):
- the agent's tool processes (a bash tool call or an RPC ``bash`` running ``sleep 30 & sleep 31; wait``, each
  in its own process group) are gone after the exit, and nothing else in their process groups lives on;
- the exit status is what a shell expects after that signal: 130 (SIGINT), 143 (SIGTERM), 129 (SIGHUP);
- the session file holds every entry of the run so far, each a whole JSON line;
- stdout carries whole frames only.
A signal the process was started ignoring (nohup's SIGHUP) stays ignored.
"""

from __future__ import annotations

import glob
import json
import os
import signal
import subprocess
import sys
import time

import pytest
from robust_harness import Agent, agent_env, default_signals, strict_frame, write_faux_script

from proc_table import descendants, in_groups, live_processes

SLEEPER = "sleep 30 & sleep 31; wait"
EXIT_TIMEOUT = 15.0  # only bounds a hang: a clean exit takes well under a second


def wait_descendants(pid: int, want: int, timeout: float = 10.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while True:
        found = descendants(pid)
        if len(found) >= want or time.monotonic() > deadline:
            return found
        time.sleep(0.02)


def assert_all_gone(watched: list[int], groups: set[int]) -> None:
    """Nothing watched (nor anything in their groups) may be alive; a killed child may take a moment to be
    reaped by init once its parent is gone."""
    deadline = time.monotonic() + 5
    while True:
        left = sorted(set(p for p in watched if p in live_processes()) | set(in_groups(groups)))
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    for pid in left:  # ours to clean up, by pid
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    assert not left, f"processes left behind after the signal: {left}"


def session_lines(home: str) -> list[dict]:
    files = glob.glob(os.path.join(home, ".pisces", "agent", "sessions", "*", "*.jsonl"))
    assert len(files) == 1, files
    with open(files[0], "rb") as f:
        data = f.read()
    assert data.endswith(b"\n"), "the session file ends with a whole line"
    return [json.loads(line) for line in data.splitlines()]


def faux_agent(tmp_path, responses: list[dict]) -> tuple[Agent, str]:
    home = str(tmp_path / "home")
    script = write_faux_script(str(tmp_path / "script.json"), responses, loop=False)
    agent = Agent(["--provider", "faux", "--faux-script", script], home=home, cwd=str(tmp_path / "work"))
    agent.wait_for(lambda f: f.get("type") == "ready")
    return agent, home


def signal_and_check(agent: Agent, signum: int, kids: list[int]) -> None:
    procs = live_processes()
    groups = {procs[p].pgid for p in kids if p in procs}
    os.kill(agent.pid, signum)
    code = agent.wait_exit(EXIT_TIMEOUT)
    assert code == 128 + signum, agent.describe(f"exit status after {signal.Signals(signum).name}: {code}")
    assert_all_gone(kids, groups)
    agent.wait_until(lambda: agent.eof, timeout=5, what="stdout EOF")
    assert not agent.violations, agent.describe("stdout carried a torn or foreign line")


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_rpc_signal_during_a_bash_tool_call(tmp_path, signum):
    agent, home = faux_agent(tmp_path, [{"toolCalls": [{"name": "bash", "arguments": {"command": SLEEPER}}]},
                                        {"text": "never reached"}])
    try:
        agent.send({"id": "p", "type": "prompt", "message": "sleep"})
        agent.wait_for(lambda f: f.get("type") == "tool_execution_start")
        kids = wait_descendants(agent.pid, 3)  # bash, sleep 30, sleep 31
        assert len(kids) >= 3, f"the tool's processes did not start: {kids}"
        signal_and_check(agent, signum, kids)
        entries = session_lines(home)
        calls = [e for e in entries if e.get("type") == "message" and e["message"]["role"] == "assistant"
                 and any(c.get("type") == "toolCall" for c in e["message"]["content"])]
        assert len(calls) == 1, "the tool call that was running is in the session file"
        results = [e for e in entries if e.get("type") == "message" and e["message"]["role"] == "toolResult"]
        assert len(results) == 1, "the aborted tool call's result is recorded too"
    finally:
        agent.cleanup()


def test_rpc_sigterm_during_an_rpc_bash_command(tmp_path):
    agent, _ = faux_agent(tmp_path, [{"text": "x"}])
    try:
        agent.send({"id": "b", "type": "bash", "command": SLEEPER})
        kids = wait_descendants(agent.pid, 3)
        assert len(kids) >= 3, f"the command's processes did not start: {kids}"
        signal_and_check(agent, signal.SIGTERM, kids)
    finally:
        agent.cleanup()


def test_rpc_sighup_ignored_at_start_stays_ignored(tmp_path):
    """``nohup pisces --mode rpc``: the hang-up must not end it."""
    home = str(tmp_path / "home")
    script = write_faux_script(str(tmp_path / "script.json"), [{"text": "x"}], loop=False)
    old = signal.signal(signal.SIGHUP, signal.SIG_IGN)  # inherited by the child, as nohup does it
    try:
        agent = Agent(["--provider", "faux", "--faux-script", script], home=home, cwd=str(tmp_path / "work"),
                      inherit_signals=True)
    finally:
        signal.signal(signal.SIGHUP, old)
    try:
        agent.wait_for(lambda f: f.get("type") == "ready")
        os.kill(agent.pid, signal.SIGHUP)
        assert agent.request({"id": "s", "type": "get_state"})["success"] is True
        assert agent.alive()
    finally:
        agent.cleanup()


@pytest.mark.parametrize("mode,signum", [("json", signal.SIGTERM), ("print", signal.SIGHUP), ("print", signal.SIGINT)])
def test_print_and_json_modes_clean_up_on_a_signal(tmp_path, mode, signum):
    home = str(tmp_path / "home")
    os.makedirs(home)
    work = tmp_path / "work"
    work.mkdir()
    script = write_faux_script(str(tmp_path / "script.json"), [
        {"toolCalls": [{"name": "bash", "arguments": {"command": SLEEPER}}]}, {"text": "never reached"}], loop=False)
    argv = [sys.executable, "-m", "pisces", "--provider", "faux", "--faux-script", script]
    argv += ["--mode", "json", "sleep"] if mode == "json" else ["-p", "sleep"]
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=agent_env(home), cwd=str(work), preexec_fn=default_signals)
    try:
        kids = wait_descendants(proc.pid, 3, timeout=30)
        assert len(kids) >= 3, f"the tool's processes did not start: {kids}"
        procs = live_processes()
        groups = {procs[p].pgid for p in kids if p in procs}
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=EXIT_TIMEOUT)
        assert proc.returncode == 128 + signum, (proc.returncode, err[-2000:])
        assert_all_gone(kids, groups)
        if mode == "json":
            frames = [strict_frame(line + b"\n") for line in out.splitlines()]
            assert any(f["type"] == "tool_execution_start" for f in frames)
        else:
            assert out == b"", "no answer is printed for a run that was stopped"
        entries = session_lines(home)
        assert any(e.get("type") == "message" and e["message"]["role"] == "toolResult" for e in entries)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)


def test_acp_mode_cleans_up_on_sigterm(tmp_path):
    """``pisces --mode acp`` (an editor closing it sends SIGTERM), a local bash tool call running."""
    import asyncio

    acp = pytest.importorskip("acp")
    from acp.schema import ClientCapabilities, FileSystemCapabilities

    home = str(tmp_path / "home")
    work = tmp_path / "work"
    work.mkdir()
    os.makedirs(home)
    script = write_faux_script(str(tmp_path / "script.json"), [
        {"toolCalls": [{"name": "bash", "arguments": {"command": SLEEPER}}]}, {"text": "never reached"}], loop=False)

    class Editor:  # no fs, no terminal: the agent runs its tools itself
        async def session_update(self, session_id, update, **kwargs):
            pass

        async def request_permission(self, session_id, tool_call, options, **kwargs):
            raise acp.RequestError.method_not_found("session/request_permission")

        def on_connect(self, conn):
            pass

    async def body() -> tuple[int, list[int], set[int]]:
        pisces = os.path.join(os.path.dirname(sys.executable), "pisces")
        # --yolo: the default ACP approval mode would ask before this bash call (docs/approval.md)
        async with acp.spawn_agent_process(Editor(), pisces, "--mode", "acp", "--faux-script", script, "--yolo",
                                           env=agent_env(home), cwd=str(work),
                                           transport_kwargs={"stderr": subprocess.DEVNULL}) as (conn, proc):
            await asyncio.wait_for(conn.initialize(protocol_version=1, client_capabilities=ClientCapabilities(
                fs=FileSystemCapabilities(read_text_file=False, write_text_file=False), terminal=False)), 30)
            sid = (await asyncio.wait_for(conn.new_session(cwd=str(work), mcp_servers=[]), 30)).session_id
            turn = asyncio.ensure_future(conn.prompt(session_id=sid, prompt=[acp.text_block("sleep")]))
            kids = await asyncio.to_thread(wait_descendants, proc.pid, 3, 30)
            procs = live_processes()
            groups = {procs[p].pgid for p in kids if p in procs}
            proc.send_signal(signal.SIGTERM)
            code = await asyncio.wait_for(proc.wait(), EXIT_TIMEOUT)
            turn.cancel()
            return code, kids, groups

    code, kids, groups = asyncio.run(asyncio.wait_for(body(), 90))
    assert len(kids) >= 3, f"the tool's processes did not start: {kids}"
    assert code == 128 + signal.SIGTERM
    assert_all_gone(kids, groups)
