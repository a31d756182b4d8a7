"""A session file after writes that failed half-way (a file-size limit stands in for a full disk) and then
worked again: every line is whole JSON and every message is there (the real process, its limit changed from
outside with prlimit, as space coming back would)."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(not hasattr(resource, "prlimit"), reason="needs Linux prlimit")


def test_no_torn_line_is_left_once_writes_work_again(tmp_path):
    home, sessions = tmp_path / "home", tmp_path / "sessions"
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"responses": [{"text": "x" * 3000}, {"text": "y" * 3000}, {"text": "back"}]}))

    def limit() -> None:  # writes past 5,000 bytes fail half-way (EFBIG), as on a full disk
        resource.setrlimit(resource.RLIMIT_FSIZE, (5000, resource.RLIM_INFINITY))

    p = subprocess.Popen([sys.executable, "-m", "pisces", "--mode", "rpc", "--faux-script", str(script),
                          "--session-dir", str(sessions)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, preexec_fn=limit,
                         env={**os.environ, "PISCES_CODING_AGENT_DIR": str(home)})
    try:
        def prompt(text: str) -> None:
            p.stdin.write((json.dumps({"type": "prompt", "message": text}) + "\n").encode())
            p.stdin.flush()
            for line in p.stdout:
                if json.loads(line).get("type") == "agent_settled":
                    return
            raise AssertionError("the process ended")

        prompt("one")
        prompt("two")  # its lines do not fit under the limit: the write fails part-way
        resource.prlimit(p.pid, resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
        prompt("three")
        p.stdin.close()
        assert p.wait(timeout=60) == 0
        err = p.stderr.read().decode()
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert "cannot write session file" in err  # the failure happened and was reported
    [path] = list(sessions.iterdir())
    lines = path.read_bytes().splitlines()
    entries = [json.loads(line) for line in lines]  # every line is whole JSON
    texts = [e["message"]["content"][0]["text"] for e in entries if e["type"] == "message"]
    assert texts == ["one", "x" * 3000, "two", "y" * 3000, "three", "back"]
