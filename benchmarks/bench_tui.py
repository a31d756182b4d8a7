"""The interactive UI's figures: spawn to an editable prompt, the CPU of a 2000-chunk reply at 120x40, and
the renderer's cost per delta for a 1k- and a 100k-character answer. Run alone on a quiet machine:

    python -m benchmarks.bench_tui [--rounds N]

pisces runs under a pseudo-terminal with the faux model. pi's TUI is not driven here (pisces' figures only).
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import pty
import resource
import select
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import time

BIN = os.path.join(os.path.dirname(sys.executable), "pisces")


def _spawn(args: list[str], cwd: str, cols: int = 120, rows: int = 40) -> tuple[subprocess.Popen, int]:
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    env = {**os.environ, "TERM": "xterm-256color", "HOME": cwd, "PISCES_CODING_AGENT_DIR": os.path.join(cwd, ".a")}
    p = subprocess.Popen([BIN, *args], stdin=slave, stdout=slave, stderr=slave, cwd=cwd, env=env,
                         start_new_session=True)
    os.close(slave)
    return p, master


def _read_until(fd: int, needle: bytes, timeout: float = 60) -> bytes:
    buf = b""
    deadline = time.monotonic() + timeout
    while needle not in buf:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"{needle!r} not seen; got {buf[-300:]!r}")
        r, _, _ = select.select([fd], [], [], left)
        if r:
            try:
                buf += os.read(fd, 65536)
            except OSError:
                break
    return buf


def _quit(p: subprocess.Popen, fd: int) -> float:
    """Ctrl+D, wait; the child's CPU seconds (user + system)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    os.write(fd, b"\x04")
    deadline = time.monotonic() + 30
    while p.poll() is None and time.monotonic() < deadline:
        select.select([fd], [], [], 0.1)
        try:
            os.read(fd, 65536)
        except OSError:
            pass
    p.wait(10)
    os.close(fd)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def spawn_to_prompt(work: str, script: str) -> float:
    t0 = time.perf_counter()
    p, fd = _spawn(["--faux-script", script, "--no-session"], work)
    _read_until(fd, "›".encode())
    elapsed = time.perf_counter() - t0
    _quit(p, fd)
    return elapsed


def reply_cpu(work: str, script: str, chunks: int) -> float:
    p, fd = _spawn(["--faux-script", script, "--no-session"], work)
    _read_until(fd, "›".encode())
    if chunks:
        os.write(fd, b"go\r")
        _read_until(fd, b"THE-END", 120)
        time.sleep(0.2)
    return _quit(p, fd)


def per_delta_us(total: int, deltas: int = 2000) -> float:
    from pisces.modes.tui.render import Renderer
    from pisces.modes.tui.transcript import Transcript

    out: list[str] = []
    r = Renderer(out.append, 120, 40)
    t = Transcript(r.commit, 120)
    chunk = "lorem ipsum dolor sit amet, consectetur adipiscing "
    fed = 0
    while fed < total:
        t.on_event({"type": "message_update", "assistantMessageEvent": {"type": "text_delta", "delta": chunk}})
        fed += len(chunk)
    r.set_live(t.live(), None)
    r.flush()
    start = time.process_time()
    for _ in range(deltas):
        t.on_event({"type": "message_update", "assistantMessageEvent": {"type": "text_delta", "delta": "word "}})
        r.set_live(t.live() + ["> "], None)
        r.flush()
    return (time.process_time() - start) / deltas * 1e6


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as work:
        script = os.path.join(work, "s.json")
        text = "".join(f"word{i:04d} " for i in range(2000))[: 2000 * 5 - 8] + " THE-END"
        with open(script, "w") as f:
            json.dump([{"text": text, "chunkSize": 5}], f)
        spawn = [spawn_to_prompt(work, script) for _ in range(a.rounds)]
        idle = [reply_cpu(work, script, 0) for _ in range(a.rounds)]
        busy = [reply_cpu(work, script, 2000) for _ in range(a.rounds)]
    figures = {
        "spawn_to_prompt_ms": round(statistics.median(spawn) * 1000, 1),
        "reply_2000_chunks_cpu_ms": round((statistics.median(busy) - statistics.median(idle)) * 1000, 1),
        "start_and_quit_cpu_ms": round(statistics.median(idle) * 1000, 1),
        "per_delta_us_1k": round(per_delta_us(1_000), 1),
        "per_delta_us_100k": round(per_delta_us(100_000), 1),
    }
    print(json.dumps(figures, indent=2))
    return figures


if __name__ == "__main__":
    main()
