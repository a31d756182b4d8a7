"""Long sessions: 1,000 prompts in one process, each a tool call (``read`` of a small file) and a text
reply, with the session file written as usual. What grows with the session's length shows up here:
context building, serialisation of the request, the session append, the memory kept per message.

    python -m benchmarks.bench_long_session [--prompts 1000] [--no-pi]

Two runs, each one process for the whole session:

- pisces with its faux model (no HTTP): per-prompt wall time (prompt line -> ``agent_end``) and process CPU
  time (``/proc/<pid>/stat``, summed over a window of prompts: the clock ticks are 10 ms) in three windows,
  prompts 1-20, 91-110 and the last 20, and the resident memory (VmRSS) after prompt 1, 100 and the last;
- both agents, alternately one whole session each (pi 0.73.1 where node is present), against the scripted
  OpenAI-wire LLM (``_llm.py``), which serves the same tool call and reply turns: the same figures side by
  side. Here every request carries the whole context over HTTP, so some growth is inherent to the wire.

"flat in the session's length" reads as: the last window's per-prompt cost over the first's near 1.
Prints numbers; asserts nothing.
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
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import Config, Figure, Results

WINDOW = 20
_TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")
NOTE_TEXT = "A small file read at every prompt of the long-session benchmark.\n" * 4


def _cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * _TICK_S  # utime, stime (fields 14 and 15 of stat)


def _rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def windows(prompts: int) -> dict[str, tuple[int, int]]:
    """The prompt windows (first and last index, 1-based, inclusive) measured per prompt."""
    w = min(WINDOW, max(1, prompts // 5))
    mid = min(max(91, w + 1), max(1, prompts - 2 * w))
    return {"first": (1, w), "p100": (mid, mid + w - 1), "last": (prompts - w + 1, prompts)}


def drive(cmd: list[str], env: dict[str, str], cwd: str, prompts: int, timeout: float = 120.0) -> dict[str, Any]:
    """One process, ``prompts`` prompts one after the other; per-window wall ms and CPU ms per prompt, RSS."""
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)
    assert proc.stdin is not None and proc.stdout is not None
    stdin, stdout = proc.stdin, proc.stdout

    def until(pred: Any) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = stdout.readline()
            if not line:
                raise RuntimeError(f"{cmd[0]} ended (exit {proc.poll()})")
            if line.startswith(b"{") and pred(json.loads(line)):
                return
        raise RuntimeError(f"no agent_end within {timeout} s")

    wins = windows(prompts)
    wall: dict[str, list[float]] = {k: [] for k in wins}
    cpu: dict[str, float] = {}
    rss: dict[str, int] = {}
    errors = 0
    try:
        stdin.write(b'{"id":"s","type":"get_state"}\n')
        stdin.flush()
        until(lambda o: o.get("id") == "s")
        started = time.perf_counter()
        cpu_at_start: dict[str, float] = {}
        for i in range(1, prompts + 1):
            for key, (lo, _hi) in wins.items():
                if i == lo:
                    cpu_at_start[key] = _cpu_s(proc.pid)
            t = time.perf_counter()
            stdin.write(json.dumps({"id": f"p{i}", "type": "prompt", "message": f"Read the notes ({i})"}).encode()
                        + b"\n")
            stdin.flush()
            end: dict[str, Any] = {}

            def is_end(o: dict[str, Any], end: dict[str, Any] = end) -> bool:
                if o.get("type") == "agent_end":
                    end.update(o)
                    return True
                return False

            until(is_end)
            ms = (time.perf_counter() - t) * 1000
            last = (end.get("messages") or [{}])[-1]
            if last.get("stopReason") == "error":
                errors += 1
            for key, (lo, hi) in wins.items():
                if lo <= i <= hi:
                    wall[key].append(ms)
                if i == hi:
                    cpu[key] = (_cpu_s(proc.pid) - cpu_at_start[key]) * 1000 / (hi - lo + 1)
            if i in (1, 100, prompts):
                rss[f"after_{i}"] = _rss_kb(proc.pid)
        total_s = time.perf_counter() - started
    finally:
        stdin.close()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()  # the process this function started, by handle
            proc.wait()
    return {"wall_ms": {k: statistics.median(v) for k, v in wall.items()}, "cpu_ms_per_prompt": cpu,
            "rss_kb": rss, "total_s": total_s, "errors": errors, "windows": wins}


def faux_script(path: Path) -> None:
    path.write_text(json.dumps({"responses": [
        {"toolCalls": [{"name": "read", "arguments": {"path": "notes.txt"}}]},
        {"text": "I read the notes; nothing to add."}], "loop": True}))


def llm_turns(prompts: int) -> list[dict]:
    turns: list[dict] = []
    for i in range(prompts):
        turns.append({"tool_calls": [{"id": f"call_{i}", "name": "read", "arguments": {"path": "notes.txt"}}]})
        turns.append({"text": "I read the notes; nothing to add."})
    return turns


def run_faux(prompts: int) -> dict[str, Any]:
    from benchmarks.bench_rpc import pisces_cmd

    with tempfile.TemporaryDirectory() as tmp:
        home, cwd = os.path.join(tmp, "home"), os.path.join(tmp, "work")
        os.makedirs(cwd)
        Path(cwd, "notes.txt").write_text(NOTE_TEXT)
        script = Path(tmp, "script.json")
        faux_script(script)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PI_", "PISCES_"))}
        env["HOME"] = home
        return drive(pisces_cmd() + ["--provider", "faux", "--faux-script", str(script)], env, cwd, prompts)


def run_side_by_side(cfg: Config, harness: Any, prompts: int) -> dict[str, list[dict[str, Any]]]:
    """Alternately one whole session per agent (pi first), ``cfg.rounds`` times (at most 2: each is long)."""
    out: dict[str, list[dict[str, Any]]] = {spec.name: [] for spec in harness.agents}
    Path(harness.cwd, "notes.txt").write_text(NOTE_TEXT)
    for _ in range(min(cfg.rounds, 2)):
        for spec in harness.agents:
            harness.llm.set_script(llm_turns(prompts))
            out[spec.name].append(drive(spec.cmd, dict(harness.env), str(harness.cwd), prompts))
    return out


def _figures(res: Results, prefix: str, label: str, pisces: list[dict[str, Any]],
             ref: list[dict[str, Any]] | None, ref_missing: str) -> None:
    def med(runs: list[dict[str, Any]], *path: str) -> list[float]:
        vals = []
        for r in runs:
            v: Any = r
            for p in path:
                v = v[p]
            vals.append(float(v))
        return vals

    any_run = pisces[0]
    last = any_run["windows"]["last"][1]
    for key, (lo, hi) in any_run["windows"].items():
        res.add(Figure(f"{prefix}_cpu_{key}", f"{label}: CPU per prompt, prompts {lo}-{hi}", "ms",
                       med(pisces, "cpu_ms_per_prompt", key),
                       med(ref, "cpu_ms_per_prompt", key) if ref else None, ref_missing=ref_missing))
        res.add(Figure(f"{prefix}_wall_{key}", f"{label}: prompt -> agent_end, prompts {lo}-{hi}", "ms",
                       med(pisces, "wall_ms", key), med(ref, "wall_ms", key) if ref else None,
                       ref_missing=ref_missing))
    for at in sorted({int(k.split("_")[1]) for k in any_run["rss_kb"]}):
        res.add(Figure(f"{prefix}_rss_{at}", f"{label}: RSS after prompt {at} of {last}", "KiB",
                       med(pisces, "rss_kb", f"after_{at}"), med(ref, "rss_kb", f"after_{at}") if ref else None,
                       ref_missing=ref_missing))


def run(cfg: Config, res: Results, wl: Any = None, harness: Any = None, prompts: int | None = None) -> None:
    n = prompts or (50 if cfg.sizes.words < 2000 else 1000)
    cfg.log(f"long_session: {n} prompts with a tool call each, faux model, pisces alone")
    faux = run_faux(n)
    _figures(res, "long_faux", f"{n}-prompt session, faux", [faux], None, "pi 0.73.1 has no faux model")
    if harness is None:
        res.skip("long_llm", f"{n}-prompt session, scripted LLM", "no RPC harness")
        return
    cfg.log(f"long_session: {n} prompts with a tool call each, scripted LLM, alternating agents")
    runs = run_side_by_side(cfg, harness, n)
    _figures(res, "long_llm", f"{n}-prompt session, scripted LLM", runs["pisces"], runs.get("pi"),
             harness.pi_missing)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--prompts", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--no-pi", action="store_true")
    ap.add_argument("--faux-only", action="store_true", help="pisces with the faux model only")
    args = ap.parse_args()
    from benchmarks._common import find_pi
    from benchmarks.bench_rpc import RpcHarness

    tmp = Path(tempfile.mkdtemp(prefix="pisces-long-"))
    cfg = Config(rounds=args.rounds, with_pi=not args.no_pi, tmp=tmp)
    res = Results()
    harness = None
    if not args.faux_only:
        if cfg.with_pi:
            cfg.pi_cli, _why = find_pi(cfg.log)
        harness = RpcHarness(cfg, res)
    try:
        run(cfg, res, None, harness, args.prompts)
    finally:
        if harness is not None:
            harness.close()
    for fig in res.figures:
        p = statistics.median(fig.pisces) if fig.pisces else None
        r = statistics.median(fig.ref) if fig.ref else None
        ratio = f"{p / r:.2f}" if p is not None and r else "n/a"
        print(f"{fig.label:70s} {p if p is not None else 'n/a':>10} {r if r is not None else 'n/a':>10} {ratio}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
