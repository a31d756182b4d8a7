"""Settings writers in several processes: pi's lock (settings.json.lock) + re-read + merge + atomic replace,
so nobody's write is lost; stale locks are taken over; a lock that stays held fails the write with a warning
and the change is saved with the next write."""

import json
import os
import subprocess
import sys
import time

from pisces.core.config.file_lock import FileLock, LockTimeout
from pisces.core.config.settings import Settings

WRITER = r"""
import sys
from pisces.core.config.settings import Settings
agent, cwd, tag, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
s = Settings(agent, cwd)
sys.stdout.write("ready\n"); sys.stdout.flush()
sys.stdin.readline()  # both writers start together
for i in range(n):
    s._set_global([(f"{tag}{i}", None, i)])
    s._set_global([("counters", tag, i)])
"""


def test_two_processes_writing_settings_lose_nothing(tmp_path):
    agent, cwd = str(tmp_path / "agent"), str(tmp_path)
    n = 150
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, agent, cwd, tag, str(n)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for tag in ("a", "b")]
    try:
        for p in procs:
            assert p.stdout.readline() == b"ready\n"
        for p in procs:
            p.stdin.write(b"go\n")
            p.stdin.flush()
        for p in procs:
            assert p.wait(timeout=120) == 0, p.stderr.read()
            assert p.stderr.read() == b""
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    with open(os.path.join(agent, "settings.json")) as f:
        data = json.load(f)
    missing = [f"{t}{i}" for t in "ab" for i in range(n) if data.get(f"{t}{i}") != i]
    assert missing == []
    assert data["counters"] == {"a": n - 1, "b": n - 1}  # nested keys of one object, from both processes
    assert not os.path.exists(os.path.join(agent, "settings.json.lock"))


def test_a_stale_lock_left_by_a_dead_process_is_taken_over(tmp_path):
    agent = tmp_path / "agent"
    lock = agent / "settings.json.lock"
    lock.mkdir(parents=True)
    old = time.time() - 60
    os.utime(lock, (old, old))
    Settings(str(agent), str(tmp_path)).set_steering_mode("all")
    assert json.loads((agent / "settings.json").read_text()) == {"steeringMode": "all"}
    assert not lock.exists()


def test_a_held_lock_fails_the_write_which_the_next_one_saves(tmp_path, capsys, monkeypatch):
    agent = tmp_path / "agent"
    agent.mkdir()
    (agent / "settings.json").write_text('{"theme": "dark"}')
    monkeypatch.setattr(FileLock, "__init__", _short_timeout(FileLock.__init__))
    s = Settings(str(agent), str(tmp_path))
    held = FileLock(str(agent / "settings.json"))
    held.acquire()  # another process (pi or pisces) is writing
    try:
        s.set_steering_mode("all")
    finally:
        held.release()
    err = capsys.readouterr().err
    assert "could not save" in err and "is locked by another process" in err
    assert json.loads((agent / "settings.json").read_text()) == {"theme": "dark"}
    assert s.steering_mode == "all"  # kept in memory
    s.set_follow_up_mode("all")
    assert json.loads((agent / "settings.json").read_text()) == {"theme": "dark", "steeringMode": "all",
                                                                 "followUpMode": "all"}


def _short_timeout(init):
    def patched(self, path, *, timeout=1.0, stale=10.0):
        init(self, path, timeout=0.05, stale=stale)
    return patched


def test_lock_timeout_is_an_oserror_with_a_sentence(tmp_path):
    path = str(tmp_path / "f.json")
    with FileLock(path):
        try:
            FileLock(path, timeout=0.05).acquire()
        except LockTimeout as exc:
            assert isinstance(exc, OSError)
            assert str(exc).startswith(f"{path} is locked by another process ({path}.lock exists")
        else:
            raise AssertionError("the second lock was granted")
