"""No MCP server process outlives pisces killed by SIGKILL (the guard's PR_SET_PDEATHSIG ends the server's whole
process group, its own children too), nor pisces' parent killed by SIGKILL (pisces sees its stdin end and stops
its servers)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from e2eproc import PISCES
from test_e2e_mcp import procs_with, server, tools_ready, wait_gone

pytest.importorskip("mcp")


def wait_count(marker: str, n: int, timeout: float = 90.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and len(procs_with(marker)) < n:
        time.sleep(0.1)
    return procs_with(marker)


def test_kill_9_of_pisces_leaves_no_server_process(home, spawn, tmp_path):
    marker = f"mcpk9-{tmp_path.name}"
    home.write_json("mcp.json", {"mcpServers": {"a": server("parent", marker), "b": server("good", marker)}})
    p = spawn("--faux-script", home.faux_script([]))
    tools_ready(p, "a")
    tools_ready(p, "b")
    # a: guard, server, the server's own child; b: guard, server
    assert len(wait_count(marker, 5)) >= 5, procs_with(marker)
    os.kill(p.p.pid, signal.SIGKILL)
    p.wait(30)
    assert wait_gone(marker, 30) == []


def test_kill_9_of_pisces_parent_leaves_no_server_process(home, tmp_path):
    marker = f"mcpk9p-{tmp_path.name}"
    home.write_json("mcp.json", {"mcpServers": {"a": server("parent", marker)}})
    parent_code = (
        "import subprocess, sys, time\n"
        f"p = subprocess.Popen({[*PISCES, '--mode', 'rpc', '--no-session', '--faux-script', home.faux_script([])]!r},"
        " stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
        "print(p.pid, flush=True)\n"
        "time.sleep(3600)\n")
    parent = subprocess.Popen([sys.executable, "-c", parent_code], stdout=subprocess.PIPE, env=home.env(),
                              cwd=home.cwd, start_new_session=True)
    pisces_pid = 0
    try:
        assert parent.stdout is not None
        pisces_pid = int(parent.stdout.readline())
        assert len(wait_count(marker, 3)) >= 3, procs_with(marker)  # guard, server, its child
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(10)
        assert wait_gone(marker, 60) == []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and os.path.exists(f"/proc/{pisces_pid}"):
            with open(f"/proc/{pisces_pid}/stat", "rb") as f:
                if f.read().rsplit(b")", 1)[1].split()[0] == b"Z":
                    break
            time.sleep(0.1)
        assert not os.path.exists(f"/proc/{pisces_pid}") or b") Z" in open(f"/proc/{pisces_pid}/stat", "rb").read()
    finally:
        for pid in [*procs_with(marker), pisces_pid]:
            if pid:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
        if parent.poll() is None:
            parent.kill()
