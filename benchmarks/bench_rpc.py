"""``pisces --mode rpc`` end to end: spawn to the first get_state answer, and a 2000-chunk streamed reply.

    python benchmarks/bench_rpc.py [--reps 5] [--chunks 2000]

The reply comes from the built-in faux model (no network, no SDK), so the round trip is pisces' own cost:
the loop, the events, encoding and writing ~2000 message_update frames, and this reader parsing them.
For the same workloads side by side with pi 0.73.1 over a local OpenAI-wire server, run
``../shared/conformance/bench_vs_pi.sh "pisces --mode rpc"``. Prints numbers; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def _spawn(args: list[str], home: str, cwd: str) -> subprocess.Popen:
    env = {**os.environ, "HOME": home, "PISCES_CODING_AGENT_DIR": os.path.join(home, ".pisces", "agent")}
    return subprocess.Popen([sys.executable, "-m", "pisces", "--mode", "rpc", *args], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, cwd=cwd)


def _read_until(proc: subprocess.Popen, pred) -> int:
    """Read frames until ``pred(frame)``; returns the bytes read."""
    total = 0
    assert proc.stdout is not None
    for line in proc.stdout:
        total += len(line)
        if pred(json.loads(line)):
            return total
    raise RuntimeError("the agent exited early")


def _wait(proc: subprocess.Popen) -> int:
    assert proc.stdin is not None
    proc.stdin.close()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return usage.ru_maxrss


def run(reps: int, chunks: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        home, cwd = os.path.join(tmp, "home"), os.path.join(tmp, "work")
        os.makedirs(cwd)
        script = os.path.join(tmp, "script.json")
        with open(script, "w") as f:
            json.dump({"responses": [{"text": "word " * chunks, "chunkSize": 5}], "loop": True}, f)
        args = ["--provider", "faux", "--faux-script", script, "--no-session"]
        startup, idle_rss, roundtrip, out_bytes, rss_after = [], [], [], [], []
        warm = _spawn(args, home, cwd)  # file cache, not counted
        warm.stdin.write(b'{"id":"s","type":"get_state"}\n')
        warm.stdin.flush()
        _read_until(warm, lambda fr: fr.get("id") == "s")
        _wait(warm)
        for _ in range(reps):
            t0 = time.perf_counter()
            p = _spawn(args, home, cwd)
            p.stdin.write(b'{"id":"s","type":"get_state"}\n')
            p.stdin.flush()
            _read_until(p, lambda fr: fr.get("id") == "s")
            startup.append((time.perf_counter() - t0) * 1000)
            idle_rss.append(_wait(p))
        for _ in range(reps):
            p = _spawn(args, home, cwd)
            p.stdin.write(b'{"id":"s","type":"get_state"}\n')
            p.stdin.flush()
            _read_until(p, lambda fr: fr.get("id") == "s")
            t0 = time.perf_counter()
            p.stdin.write(b'{"id":"p","type":"prompt","message":"Write 2000 words"}\n')
            p.stdin.flush()
            out_bytes.append(_read_until(p, lambda fr: fr.get("type") == "agent_end"))
            roundtrip.append((time.perf_counter() - t0) * 1000)
            rss_after.append(_wait(p))
    return {
        "spawn_to_first_get_state_ms": statistics.median(startup),
        "peak_rss_idle_kb": statistics.median(idle_rss),
        f"prompt_roundtrip_{chunks}_chunks_ms": statistics.median(roundtrip),
        "stdout_bytes_per_prompt": statistics.median(out_bytes),
        "peak_rss_after_prompt_kb": statistics.median(rss_after),
        "samples": {"startup_ms": startup, "roundtrip_ms": roundtrip},
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--chunks", type=int, default=2000)
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args()
    res = run(args.reps, args.chunks)
    for k, v in res.items():
        if k != "samples":
            print(f"{k:40} {v:14.1f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
