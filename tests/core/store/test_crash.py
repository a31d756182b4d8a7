"""A writer killed with SIGKILL at random moments never leaves a file that fails to load, and loses at most
the entry it was writing."""

import os
import random
import signal
import subprocess
import sys
import time

import pytest

from pisces.core.store import MessageEntry, build_session_context, load_session_file

WRITER = r"""
import os, random, sys, time
from pisces.ai.types import AssistantMessage, TextContent, UserMessage
from pisces.core.store import SessionManager

path, tag, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])

# A slow disk: write(2) may legally write less than asked. Hand out 64 KiB per call with a pause, so a
# kill often lands in the middle of a large line, as it can on a loaded machine.
_real_write = os.write
def _partial_write(fd, data):
    n = _real_write(fd, bytes(data[:65536]))
    if len(data) > 65536:
        time.sleep(0.0005)
    return n
os.write = _partial_write
rng = random.Random(seed)
sm = SessionManager.open(path)
print("ready", flush=True)
i = 0
unconfirmed = []
while True:
    # mostly small entries, sometimes one large enough that a kill can land inside its write
    size = rng.choice([50, 500, 5000]) if rng.random() < 0.93 else rng.randint(3, 10) * 100_000
    text = f"{tag}-{i} " + "x" * size
    if i % 2 == 0:
        msg = UserMessage(content=[TextContent(text=text)])
    else:
        msg = AssistantMessage(content=[TextContent(text=text)], api="faux", provider="faux", model="faux")
    unconfirmed.append(sm.append_message(msg))
    if sm.is_on_disk():  # a new file is written from the first assistant message on; until then nothing is
        print("\n".join(unconfirmed), flush=True)  # on disk, so nothing is reported as written
        unconfirmed.clear()
    i += 1
    time.sleep(0.0005)  # pace the writer so the file stays small
"""


def _run_and_kill(path: str, tag: str, seed: int, rng: random.Random) -> list[str]:
    proc = subprocess.Popen([sys.executable, "-c", WRITER, path, tag, str(seed)], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        ready = proc.stdout.readline()
        assert ready == b"ready\n", ready
        time.sleep(rng.uniform(0.01, 0.1))
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    out = proc.stdout.read()
    proc.stdout.close()
    lines = out.split(b"\n")
    return [line.decode() for line in lines[:-1]]  # the last piece is incomplete (or empty)


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_sigkill_at_random_moments(tmp_path):
    rng = random.Random(1234)
    path = str(tmp_path / "crash.jsonl")
    reported: list[str] = []
    crashes = 0
    deadline = time.monotonic() + 4
    header_id = None
    for iteration in range(8):
        if time.monotonic() > deadline and iteration >= 3:
            break
        reported += _run_and_kill(path, f"it{iteration}", rng.randrange(1 << 30), rng)
        crashes += 1
        loaded = load_session_file(path)
        if loaded is None:  # killed before the first assistant message: nothing on disk yet, nothing reported
            assert not reported
            continue
        assert loaded.header is not None
        header_id = header_id or loaded.header.id
        assert loaded.header.id == header_id  # every run continued the same session
        ids = [e.id for e in loaded.entries]
        # Every entry a writer confirmed is on disk, in order; at most one unconfirmed entry per crash.
        it = iter(ids)
        assert all(r in it for r in reported)
        assert len(ids) - len(reported) <= crashes
        # The chain is intact: each entry hangs off the one before it.
        assert [e.parentId for e in loaded.entries] == [None, *ids[:-1]]
        assert all(isinstance(e, MessageEntry) for e in loaded.entries)
        assert len(build_session_context(loaded.entries).messages) == len(ids)
    assert len(reported) > 0
