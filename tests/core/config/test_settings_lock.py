"""Settings writers in several processes: pi's lock (settings.json.lock) + re-read + merge + atomic replace,
so nobody's write is lost; a writer waits for a holder that is alive (it refreshes the lock) however long the
machine makes it wait, and takes over only a stale lock."""

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


HOLDER = r"""
import sys, time
from pisces.core.config.file_lock import FileLock
lock = FileLock(sys.argv[1])
lock.acquire()
sys.stdout.write("held\n"); sys.stdout.flush()
time.sleep(float(sys.argv[2]))  # a slow writer: far longer than any fixed wait a busy machine could exceed
open(sys.argv[3], "w").close()  # written before the release: whoever gets the lock next finds it
lock.release()
"""


def test_a_write_waits_for_a_live_holder_instead_of_giving_up(tmp_path, capsys):
    agent = tmp_path / "agent"
    agent.mkdir()
    (agent / "settings.json").write_text('{"theme": "dark"}')
    s = Settings(str(agent), str(tmp_path))
    released = tmp_path / "released"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(agent / "settings.json"), "2.5", str(released)],
                              stdout=subprocess.PIPE)
    try:
        assert holder.stdout.readline() == b"held\n"
        s.set_steering_mode("all")  # waits for the holder (2.5 s), then writes
        assert released.exists(), "the write went ahead while the lock was held"
    finally:
        if holder.poll() is None:
            holder.kill()
        holder.wait()
    assert capsys.readouterr().err == ""
    assert json.loads((agent / "settings.json").read_text()) == {"theme": "dark", "steeringMode": "all"}


def test_a_holder_that_refreshes_is_never_taken_over(tmp_path):
    path = str(tmp_path / "f.json")
    stale = 0.4
    released: list[float] = []
    holder = FileLock(path, stale=stale)
    holder.acquire()

    def release_later() -> None:
        time.sleep(stale * 4)  # four times the stale age: only the refreshing keeps the lock fresh
        released.append(time.monotonic())
        holder.release()

    import threading

    t = threading.Thread(target=release_later)
    t.start()
    try:
        waiter = FileLock(path, stale=stale)
        waiter.acquire()
        got = time.monotonic()
        waiter.release()
    finally:
        t.join()
    assert released and got >= released[0], "the waiter took over a lock whose holder was alive"


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
