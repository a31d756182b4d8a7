"""What ``pisces --mode rpc`` leaves for later: the OS sandbox's temp-dir helpers (shutil, tempfile) load with
the first confined command, not before the first get_state is answered."""

from __future__ import annotations

import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "e2e"))

from e2eproc import PISCES, Home  # noqa: E402


def test_rpc_start_up_imports_neither_shutil_nor_tempfile(tmp_path):
    home = Home(str(tmp_path))
    run = subprocess.run([*PISCES, "--mode", "rpc", "--provider", "faux"],
                         input=b'{"id":"s","type":"get_state"}\n', capture_output=True,
                         env=home.env(PYTHONPROFILEIMPORTTIME="1"), cwd=home.cwd, timeout=60)
    assert json.loads(run.stdout.splitlines()[-1])["id"] == "s"
    imported = [line.split("|")[-1].strip() for line in run.stderr.decode().splitlines() if "|" in line]
    assert "pisces.core.sandbox.launch" in imported  # the log is real, and the sandbox module is loaded
    assert not [m for m in imported if m in ("shutil", "tempfile")]
