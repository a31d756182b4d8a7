"""Long sessions: 1,000 prompts in one process, each a user message, a tool call (``read`` of a small file)
and a text reply, with the session file written as usual (no ``--no-session``). What grows with the session's
length shows up here: context building, serialisation of the request, the session append, the memory kept
per message.

    python -m benchmarks.bench_long_session [--prompts 1000] [--rounds 1] [--no-pi] [--faux-only]

Both agents (pi 0.73.1 where node is present) run the same script against the scripted OpenAI-wire LLM
(``_llm.py``): one whole session each, alternately, pi first. pisces also runs once with its faux model (no
HTTP), a pisces-only row.

What is measured, at prompt 1, 100 and the last (1,000):

- **CPU per prompt** (the headline figure): the agent process's CPU time (user + system, every thread) from
  the prompt line written to its ``agent_end`` read, from ``/proc/<pid>/task/*/schedstat`` (nanoseconds);
  the median over a window of 21 prompts around the point (1-21, 90-110, 980-1000). CPU time, not wall
  time, because the machine is shared: another process's load stretches wall time but not CPU time. The
  window's total from ``/proc/<pid>/stat`` (clock ticks, includes threads that ended) is in the JSON's
  ``detail`` as a check.
- **wall minus server**: prompt line -> ``agent_end`` minus the scripted server's own time for the prompt's
  two requests (``ms`` in ``GET /_requests``), the median over the same window. Noisy on a busy machine.
- **RSS**: ``VmRSS`` of ``/proc/<pid>/status`` right after the prompt's ``agent_end`` (``VmHWM``, the peak,
  in ``detail``).
- the request body's bytes at each point (``detail``): every request carries the whole context, so the
  serialisation of the body grows with the session by nature; the agent's other work per prompt should not.
- **against fresh sessions** (pisces only): its long session and fresh ones, prompts alternating, the median
  ratio of their CPU per prompt around each point (``long_llm_vs_fresh_*``); and the same with every reply
  ``EQUAL_WAIT_MS`` after its request (``long_llm_vs_fresh_equal_wait_*``), so that the long session's
  requests, which the scripted server takes longer to parse, do not make it wait longer than the fresh one.

"flat in the session's length" reads as: CPU per prompt at 1,000 over CPU per prompt at 1 near 1, beyond what
the growing request body costs. Prints numbers; asserts nothing.
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
import urllib.request
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import Config, Figure, Results

HALF = 10  # a window is the point and 10 prompts either side (shifted to stay inside the session)
_TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")
NOTE_TEXT = "A small file read at every prompt of the long-session benchmark.\n" * 4


def _stat_cpu_s(pid: int) -> float:
    """User + system time of the whole process (threads that ended included), in clock ticks."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * _TICK_S  # utime, stime (fields 14 and 15 of stat)


def _thread_cpu_ns(pid: int) -> dict[str, int]:
    """Each live thread's CPU time in ns (first field of its schedstat)."""
    out: dict[str, int] = {}
    base = f"/proc/{pid}/task"
    for tid in os.listdir(base):
        try:
            with open(f"{base}/{tid}/schedstat") as f:
                out[tid] = int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass  # the thread ended between the listing and the read
    return out


def _cpu_delta_ms(before: dict[str, int], after: dict[str, int]) -> float:
    return sum(ns - before.get(tid, 0) for tid, ns in after.items()) / 1e6


def _mem_kb(pid: int) -> dict[str, int]:
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(("VmRSS:", "VmHWM:")):
                out[line.split(":")[0]] = int(line.split()[1])
    return out


def points(prompts: int) -> list[int]:
    """The prompts measured: 1, 100 and the last (the middle one for a session under 200 prompts)."""
    mid = 100 if prompts >= 200 else max(1, prompts // 2)
    return sorted({1, mid, prompts})


def window(point: int, prompts: int) -> tuple[int, int]:
    """First and last prompt (1-based, inclusive) of the window around ``point``."""
    width = min(2 * HALF + 1, prompts)
    lo = min(max(1, point - HALF), prompts - width + 1)
    return lo, lo + width - 1


def _llm_requests(port: int) -> list[dict[str, Any]]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/_requests", timeout=30) as r:
        return list(json.loads(r.read())["requests"])


class _Session:
    """One agent process, started and answering ``get_state``, then driven prompt by prompt."""

    def __init__(self, cmd: list[str], env: dict[str, str], cwd: str, timeout: float = 120.0) -> None:
        self.proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL)
        self.timeout = timeout
        self.prompts = 0
        try:
            self._send({"id": "s", "type": "get_state"})
            self._until(lambda o: o.get("id") == "s")
        except BaseException:
            self.close()
            raise

    def _send(self, obj: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(obj).encode() + b"\n")
        self.proc.stdin.flush()

    def _until(self, pred: Any) -> dict[str, Any]:
        assert self.proc.stdout is not None
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"the agent ended (exit {self.proc.poll()})")
            if line.startswith(b"{") and (b'"agent_end"' in line or b'"id"' in line):
                obj = json.loads(line)
                if pred(obj):
                    return obj
        raise RuntimeError(f"no answer within {self.timeout} s")

    def prompt(self) -> tuple[float, float, dict[str, Any]]:
        """One prompt: the agent's CPU ms for it, the wall ms from the line written to ``agent_end`` read, and
        that ``agent_end``."""
        self.prompts += 1
        line = {"id": f"p{self.prompts}", "type": "prompt", "message": f"Read the notes ({self.prompts})"}
        before = _thread_cpu_ns(self.proc.pid)
        t = time.perf_counter()
        self._send(line)
        end = self._until(lambda o: o.get("type") == "agent_end")
        wall = (time.perf_counter() - t) * 1000
        return _cpu_delta_ms(before, _thread_cpu_ns(self.proc.pid)), wall, end

    def close(self) -> None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.close()
        except OSError:  # the agent is gone already
            pass
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()  # the process this object started, by handle
            self.proc.wait()


def drive(cmd: list[str], env: dict[str, str], cwd: str, prompts: int, llm_port: int | None = None,
          timeout: float = 120.0) -> dict[str, Any]:
    """One process, ``prompts`` prompts one after the other; per prompt the agent's CPU ms and wall ms; the
    memory at each point; with ``llm_port``, the scripted server's time and the body's bytes per request."""
    session = _Session(cmd, env, cwd, timeout)
    pid = session.proc.pid
    pts = points(prompts)
    wins = {p: window(p, prompts) for p in pts}
    cpu_ms: list[float] = []
    wall_ms: list[float] = []
    mem: dict[int, dict[str, int]] = {}
    stat_cpu: dict[int, float] = {}
    errors: list[str] = []
    try:
        time.sleep(1.0)  # both agents idle a moment after start-up, as a person would before typing
        started = time.perf_counter()
        cpu_started = _stat_cpu_s(pid)
        for i in range(1, prompts + 1):
            for p, (lo, _hi) in wins.items():
                if i == lo:
                    stat_cpu[p] = _stat_cpu_s(pid)
            cpu, wall, end = session.prompt()
            cpu_ms.append(cpu)
            wall_ms.append(wall)
            messages = end.get("messages") or [{}]
            last = messages[-1]
            if len(messages) != 4 or last.get("stopReason") == "error" or "script exhausted" in json.dumps(last):
                errors.append(f"prompt {i}: {len(messages)} messages, last {json.dumps(last)[:300]}")
            if i in wins:
                mem[i] = _mem_kb(pid)
            for p, (lo, hi) in wins.items():
                if i == hi:
                    stat_cpu[p] = (_stat_cpu_s(pid) - stat_cpu[p]) * 1000 / (hi - lo + 1)
        total_s = time.perf_counter() - started
        total_cpu_s = _stat_cpu_s(pid) - cpu_started
    finally:
        session.close()
    server_ms: list[float] = []
    body_bytes: list[int] = []
    if llm_port is not None:
        reqs = _llm_requests(llm_port)
        if len(reqs) != 2 * prompts:
            errors.append(f"{len(reqs)} requests for {prompts} prompts")
        else:  # a tool call turn and a reply turn per prompt
            server_ms = [reqs[2 * k].get("ms", 0.0) + reqs[2 * k + 1].get("ms", 0.0) for k in range(prompts)]
            body_bytes = [reqs[2 * k]["bytes"] for k in range(prompts)]
    at: dict[int, dict[str, Any]] = {}
    for p, (lo, hi) in wins.items():
        sl = slice(lo - 1, hi)
        row: dict[str, Any] = {"window": [lo, hi], "cpu_ms": statistics.median(cpu_ms[sl]),
                               "cpu_ms_stat_mean": stat_cpu[p], "wall_ms": statistics.median(wall_ms[sl]),
                               "rss_kb": mem[p]["VmRSS"], "hwm_kb": mem[p]["VmHWM"],
                               "cpu_ms_at_point": cpu_ms[p - 1]}
        if server_ms:
            row["agent_wall_ms"] = statistics.median([w - s for w, s in zip(wall_ms[sl], server_ms[sl], strict=True)])
            row["server_ms"] = statistics.median(server_ms[sl])
            row["body_bytes"] = body_bytes[p - 1]
        at[p] = row
    return {"at": at, "total_s": total_s, "total_cpu_s": total_cpu_s, "errors": errors, "prompts": prompts}


def faux_script(path: Path) -> None:
    path.write_text(json.dumps({"responses": [
        {"toolCalls": [{"name": "read", "arguments": {"path": "notes.txt"}}]},
        {"text": "I read the notes; nothing to add."}], "loop": True}))


# A fixed, small usage: at 1,000 prompts the context is ~150k tokens by size, past the scripted model's
# 128k window, and both agents would compact (an extra request, then a short context) before the end.
USAGE = {"prompt_tokens": 2000, "completion_tokens": 20}


def llm_turns(prompts: int) -> list[dict]:
    turns: list[dict] = []
    for i in range(prompts):
        turns.append({"tool_calls": [{"id": f"call_{i}", "name": "read", "arguments": {"path": "notes.txt"}}],
                      "usage": USAGE})
        turns.append({"text": "I read the notes; nothing to add.", "usage": USAGE})
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


def run_side_by_side(cfg: Config, harness: Any, prompts: int, rounds: int) -> dict[str, list[dict[str, Any]]]:
    """Alternately one whole session per agent (pi first), ``rounds`` times."""
    out: dict[str, list[dict[str, Any]]] = {spec.name: [] for spec in harness.agents}
    Path(harness.cwd, "notes.txt").write_text(NOTE_TEXT)
    for r in range(rounds):
        for spec in harness.agents:
            harness.llm.set_script(llm_turns(prompts))
            cfg.log(f"long_session: {spec.name}, round {r + 1} of {rounds}")
            run = drive(spec.cmd, dict(harness.env), str(harness.cwd), prompts, harness.llm.port)
            for err in run["errors"][:5]:
                cfg.log(f"long_session: {spec.name}: {err}")
            out[spec.name].append(run)
    return out


FRESH_HALF = 25  # the against-fresh figures take the median of 51 pairs around the point


# The scripted LLM's own work per request grows with the body (it parses the whole context): 1-3 ms at prompt
# 1, about 10 at prompt 1,000. An agent that waits longer between its bursts of work spends more processor on
# the same work (its caches are cold when it wakes), so the plain comparison charges the long session for
# the server's slowness too; with every reply this long after its request, both wait alike.
EQUAL_WAIT_MS = 25


def against_fresh(cmd: list[str], env: dict[str, str], cwd: str, prompts: int) -> dict[int, dict[str, Any]]:
    """A long session and fresh ones, prompts alternating (long, fresh, long, fresh, ...): the fresh session is
    started again every ``prompts // 20`` prompts, so it stays young. Per point, the median over the pairs
    around it of the long session's CPU for a prompt over the fresh one's for the next: the machine's speed
    drifts over a run, and this ratio, taken within the same second, does not."""
    restart = max(2, prompts // 20)
    long_run = _Session(cmd, env, cwd)
    fresh: _Session | None = None
    pairs: list[tuple[float, float, int]] = []
    try:
        for _ in range(prompts):
            mine = long_run.prompt()[0]
            if fresh is None or fresh.prompts >= restart:
                if fresh is not None:
                    fresh.close()
                    fresh = None
                fresh = _Session(cmd, env, cwd)
            pairs.append((mine, fresh.prompt()[0], fresh.prompts))
    finally:
        long_run.close()
        if fresh is not None:
            fresh.close()
    out: dict[int, dict[str, Any]] = {}
    for p in points(prompts):
        lo = max(1, p - FRESH_HALF)
        hi = min(prompts, lo + 2 * FRESH_HALF)
        lo = max(1, hi - 2 * FRESH_HALF)
        window_pairs = pairs[lo - 1:hi]
        out[p] = {"window": [lo, hi], "ratio": statistics.median(a / b for a, b, _ in window_pairs if b > 0),
                  "long_cpu_ms": statistics.median(a for a, _, _ in window_pairs),
                  "fresh_cpu_ms": statistics.median(b for _, b, _ in window_pairs),
                  "fresh_prompts": [min(k for _, _, k in window_pairs), max(k for _, _, k in window_pairs)]}
    return out


METRICS = (  # (key in drive's "at", figure key, label, unit)
    ("cpu_ms", "cpu", "agent CPU per prompt", "ms"),
    ("agent_wall_ms", "wall", "prompt -> agent_end minus the LLM server's time", "ms"),
    ("rss_kb", "rss", "RSS", "KiB"),
)


def _figures(res: Results, prefix: str, label: str, pisces: list[dict[str, Any]],
             ref: list[dict[str, Any]] | None, ref_missing: str) -> None:
    def vals(runs: list[dict[str, Any]] | None, p: int, key: str) -> list[float] | None:
        if not runs:
            return None
        out = [float(r["at"][p][key]) for r in runs if key in r["at"][p]]
        return out or None

    first = pisces[0]
    n = first["prompts"]
    for key, short, what, unit in METRICS:
        for p in sorted(first["at"]):
            mine = vals(pisces, p, key)
            if mine is None:
                continue
            lo, hi = first["at"][p]["window"]
            where = f"after prompt {p}" if key == "rss_kb" else f"prompt {p} (median of {lo}-{hi})"
            fig = res.add(Figure(f"{prefix}_{short}_{p}", f"{label}: {what}, {where}", unit, mine,
                                 vals(ref, p, key), ref_missing=ref_missing))
            fig.detail = {"pisces": [r["at"][p] for r in pisces], "of": n}
            if ref:
                fig.detail["pi"] = [r["at"][p] for r in ref]
    res.add(Figure(f"{prefix}_total_cpu", f"{label}: agent CPU for the whole session", "ms",
                   [r["total_cpu_s"] * 1000 for r in pisces],
                   [r["total_cpu_s"] * 1000 for r in ref] if ref else None, ref_missing=ref_missing,
                   detail={"errors": {"pisces": [r["errors"][:20] for r in pisces],
                                      "pi": [r["errors"][:20] for r in ref or []]}}))


def run(cfg: Config, res: Results, wl: Any = None, harness: Any = None, prompts: int | None = None,
        faux: bool = True, rounds: int | None = None) -> None:
    n = prompts or (50 if cfg.sizes.words < 2000 else 1000)
    if faux:
        cfg.log(f"long_session: {n} prompts with a tool call each, faux model, pisces alone")
        faux_run = run_faux(n)
        for err in faux_run["errors"][:5]:
            cfg.log(f"long_session: pisces (faux): {err}")
        _figures(res, "long_faux", f"{n} prompts, faux model", [faux_run], None, "pi 0.73.1 has no faux model")
    if harness is None:
        res.skip("long_llm", f"{n}-prompt session, scripted LLM", "no RPC harness")
        return
    if rounds is None:
        rounds = 1 if n >= 500 else min(cfg.rounds, 2)  # a 1,000-prompt round is minutes per agent
    cfg.log(f"long_session: {n} prompts with a tool call each, scripted LLM, alternating agents ({rounds} rounds)")
    runs = run_side_by_side(cfg, harness, n, rounds)
    _figures(res, "long_llm", f"{n} prompts", runs["pisces"], runs.get("pi"), harness.pi_missing)
    pisces = next(spec for spec in harness.agents if spec.name == "pisces")
    for answer_after_ms, key, how in ((0, "long_llm_vs_fresh", ""),
                                      (EQUAL_WAIT_MS, "long_llm_vs_fresh_equal_wait",
                                       f", every reply {EQUAL_WAIT_MS} ms after its request")):
        cfg.log(f"long_session: pisces, a {n}-prompt session against fresh ones, prompts alternating{how}")
        harness.llm.set_script(llm_turns(2 * n), answer_after_ms=answer_after_ms)
        fresh = against_fresh(pisces.cmd, dict(harness.env), str(harness.cwd), n)
        waited: dict[str, Any] = {}
        if answer_after_ms:  # how often the server's own work took longer than the wait it pads to
            served = _llm_requests(harness.llm.port)
            work = [float(r.get("work_ms", 0)) for r in served]
            waited = {"server_work_ms_max": max(work, default=0.0),
                      "server_ms_min": min((float(r.get("ms", 0)) for r in served), default=0.0),
                      "requests_beyond_the_wait": sum(w > answer_after_ms for w in work), "requests": len(work)}
        for p, row in fresh.items():
            lo, hi = row["window"]
            res.add(Figure(f"{key}_{p}", f"{n} prompts: agent CPU per prompt over a fresh session's, prompts "
                           f"alternating{how}, at prompt {p} (median of pairs {lo}-{hi})", "x", [row["ratio"]],
                           ref_missing="pisces alone: its own fresh session is the reference",
                           detail={**row, **waited}))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--prompts", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--no-pi", action="store_true")
    ap.add_argument("--no-faux", action="store_true", help="skip the faux-model session")
    ap.add_argument("--faux-only", action="store_true", help="pisces with the faux model only")
    ap.add_argument("--json", metavar="OUT", help="write the figures (with every window's detail) here")
    args = ap.parse_args()
    import shutil

    from benchmarks.__main__ import print_table, to_json
    from benchmarks._common import find_pi, machine_info
    from benchmarks.bench_rpc import RpcHarness

    tmp = Path(tempfile.mkdtemp(prefix="pisces-long-"))
    cfg = Config(rounds=args.rounds, with_pi=not args.no_pi, tmp=tmp)
    res = Results()
    harness = None
    try:
        if not args.faux_only:
            if cfg.with_pi:
                cfg.pi_cli, why = find_pi(cfg.log)
                if why:
                    cfg.log(f"pi: {why}")
            harness = RpcHarness(cfg, res)
        run(cfg, res, None, harness, args.prompts, faux=not args.no_faux, rounds=args.rounds)
    finally:
        if harness is not None:
            harness.close()
        shutil.rmtree(tmp, ignore_errors=True)
    print_table(res)
    if args.json:
        Path(args.json).write_text(json.dumps(to_json(res, machine=machine_info()), indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
