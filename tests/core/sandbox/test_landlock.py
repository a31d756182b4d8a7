"""The Landlock primitive against this machine's kernel (skipped, saying why, where there is none): a real
shell confined to a workspace cannot write outside it but can inside, reads still work, and with the network
off it cannot connect to a server on 127.0.0.1 that an unconfined one reaches."""

from __future__ import annotations

import os
import socket
import subprocess
import threading

import pytest

from pisces.core.sandbox import landlock

pytestmark = pytest.mark.skipif(landlock.available() < 4, reason="needs Landlock ABI 4 or later in the kernel")


def run(ruleset, command: str, cwd: str) -> subprocess.CompletedProcess:
    return subprocess.run(["/bin/sh", "-c", command], cwd=cwd, capture_output=True, text=True, timeout=60,
                          preexec_fn=ruleset.preexec if ruleset else None,
                          pass_fds=(ruleset.fd,) if ruleset else ())


def test_writes_are_confined_to_the_workspace(tmp_path):
    work, outside = tmp_path / "work", tmp_path / "outside"
    work.mkdir()
    outside.mkdir()
    (outside / "seen.txt").write_text("readable\n")
    ruleset = landlock.Ruleset.build([str(work)])
    try:
        out = run(ruleset, f"echo in > inside.txt && cat {outside}/seen.txt && echo x > /dev/null && "
                           f"echo out > {outside}/escaped.txt", str(work))
    finally:
        ruleset.close()
    assert (work / "inside.txt").read_text() == "in\n"
    assert "readable" in out.stdout
    assert out.returncode != 0 and "Permission denied" in out.stderr
    assert not (outside / "escaped.txt").exists()
    out = run(None, f"echo out > {outside}/escaped.txt", str(work))  # the same command, unconfined
    assert out.returncode == 0 and (outside / "escaped.txt").read_text() == "out\n"


def test_network_off_refuses_a_connection_to_127_0_0_1(tmp_path):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    port = server.getsockname()[1]
    stop = threading.Event()

    def serve() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
                conn.close()
            except OSError:
                continue

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    probe = f"python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {port}), timeout=10); print(\"up\")'"
    try:
        ruleset = landlock.Ruleset.build([str(tmp_path)], network=False)
        try:
            confined = run(ruleset, probe, str(tmp_path))
        finally:
            ruleset.close()
        free = run(None, probe, str(tmp_path))
    finally:
        stop.set()
        thread.join(5)
        server.close()
    assert free.returncode == 0 and free.stdout.strip() == "up"
    assert confined.returncode != 0 and "PermissionError" in confined.stderr


def test_the_abi_is_reported():
    assert landlock.available() >= 4
    assert os.uname().sysname == "Linux"
