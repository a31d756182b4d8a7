"""``pisces --mode rpc`` start-up imports nothing of the TUI (its toolkit loads only in interactive mode)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "e2e"))

from e2eproc import PISCES, Home  # noqa: E402


def test_rpc_start_up_imports_no_tui(tmp_path):
    home = Home(str(tmp_path))
    run = subprocess.run([*PISCES, "--mode", "rpc", "--provider", "faux", "--no-session"],
                         input=b'{"id":"s","type":"get_state"}\n', capture_output=True,
                         env=home.env(PYTHONPROFILEIMPORTTIME="1"), cwd=home.cwd, timeout=60)
    assert json.loads(run.stdout.splitlines()[-1])["id"] == "s"
    imported = [line.split("|")[-1].strip() for line in run.stderr.decode().splitlines() if "|" in line]
    assert "pisces.modes.host.host" in imported  # the log is real
    assert not [m for m in imported if m.startswith(("prompt_toolkit", "pisces.modes.tui", "pyte", "wcwidth", "pygments"))]


def test_plain_mode_is_line_by_line(tmp_path):
    home = Home(str(tmp_path))
    script = os.path.join(home.cwd, "s.json")
    with open(script, "w") as f:
        json.dump([{"text": "plain **reply**"}], f)
    run = subprocess.run([*PISCES, "--plain", "--faux-script", script, "--no-session"], input=b"hello\n/quit\n",
                         capture_output=True, env=home.env(TERM="dumb"), cwd=home.cwd, timeout=60)
    out = run.stdout.decode()
    assert run.returncode == 0, run.stderr
    assert "plain reply" in out and "› hello" in out
    assert "\x1b" not in out  # no cursor movement, no colour: a screen reader reads it as it comes
