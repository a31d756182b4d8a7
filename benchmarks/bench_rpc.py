"""``pisces --mode rpc`` side by side with pi 0.73.1 (when node is present), alternating runs A B A B.

    python -m benchmarks.bench_rpc [--rounds 3] [--words 2000] [--no-pi]

Measured as the conformance kit's ``drive.py bench`` measures them, each in a fresh process:
spawn to the first ``get_state`` response and the peak RSS of a process that only answered it (idle RSS,
from ``wait4``); a prompt whose reply is ``--words`` streamed chunks from the scripted OpenAI-wire LLM
(``benchmarks/_llm.py`` on 127.0.0.1, the same server for both agents), from the prompt line to
``agent_end``, the stdout bytes it produced and the peak RSS of that process. pisces' stdout is also measured
with its lean and deltas stream profiles (``--stream-profile``), beside pi's. Nothing here needs ``../shared``;
pi is found (and installed the first time) by the conformance kit's ``install_pi.sh`` when it is there.

:class:`RpcHarness` is also what the sessions, export, compaction and grep modules use for their RPC
figures (``switch_session``, ``export_html``, ``compact``, a scripted grep tool call).

``run_faux`` times the same reply from the built-in faux model (no network, no SDK), so that round trip is
pisces' own cost: the loop, the events, encoding and writing the message_update frames, and this reader
parsing them. Prints numbers; asserts nothing.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

if __package__ in (None, ""):  # run as a script: make ``benchmarks`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import _agent
from benchmarks._common import Config, Figure, Results, find_pi

LLM_SCRIPT = Path(__file__).resolve().parent / "_llm.py"


class ScriptedLLM:
    """The benchmarks' scripted LLM (``_llm.py``), in a subprocess on a free 127.0.0.1 port."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen([sys.executable, str(LLM_SCRIPT), "--port", "0"],
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        line = self.proc.stdout.readline() if self.proc.stdout else ""
        if not line.startswith("LISTENING"):
            self.close()
            raise RuntimeError(f"scripted_llm.py did not start: {line!r}")
        self.port = int(line.split()[1])

    def set_script(self, turns: list[dict], answer_after_ms: float = 0) -> None:
        """The turns to answer with; ``answer_after_ms``: no reply starts sooner after its request arrived."""
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}/_script", method="POST",
                                     data=json.dumps({"turns": turns, "answer_after_ms": answer_after_ms}).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as r:
            r.read()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()  # the server this object started, by handle
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()


@dataclass
class AgentSpec:
    name: str  # "pisces" | "pi"
    cmd: list[str]


def pisces_cmd() -> list[str]:
    script = Path(sys.executable).parent / "pisces"
    if script.is_file():
        return [str(script), "--mode", "rpc"]
    return [sys.executable, "-m", "pisces", "--mode", "rpc"]


class RpcError(RuntimeError):
    pass


class RpcHarness:
    """One scripted LLM, one agent HOME (models.json / settings.json as drive.py writes them) and the agents
    to compare. ``alternate`` runs a workload function on each agent in turn, round after round."""

    def __init__(self, cfg: Config, res: Results) -> None:
        self.cfg = cfg
        self.drive = _agent  # the script turns (T, TOOL, SUMMARY) and the process wrapper
        self.llm = ScriptedLLM()
        self.tmp = Path(tempfile.mkdtemp(prefix="rpc-", dir=cfg.tmp))
        self.home = str(self.tmp / "home")
        self.drive.write_agent_config(self.home, self.llm.port)
        self.cwd = self.tmp / "cwd"
        self.cwd.mkdir()
        env = self.drive.agent_env(self.home)
        # rg for the grep tool: pi looks on PATH (and would try to download it otherwise)
        env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
        self.env = env
        self.agents = []
        self.pi_missing = ""
        if cfg.with_pi and cfg.pi_cli:
            self.agents.append(AgentSpec("pi", ["node", cfg.pi_cli, "--mode", "rpc"]))
        elif not cfg.with_pi:
            self.pi_missing = "--no-pi"
        else:
            self.pi_missing = "pi not available"
        self.agents.append(AgentSpec("pisces", pisces_cmd()))
        self._warm()

    def _warm(self) -> None:
        """One untimed start of each agent (file cache)."""
        for spec in self.agents:
            try:
                a = self.spawn(spec)
                a.request({"type": "get_state"}, 60)
                a.close()
            except Exception as exc:
                self.cfg.log(f"warm-up of {spec.name} failed: {exc}")

    def spawn(self, spec: AgentSpec, cwd: Path | str | None = None, args: list[str] | None = None,
              tee: str | None = None) -> Any:
        return self.drive.Agent(spec.cmd + (args or []), Path(cwd or self.cwd), dict(self.env), tee=tee)

    @staticmethod
    def ok(resp: dict) -> dict:
        if not resp.get("success"):
            raise RpcError(f"{resp.get('command')}: {resp.get('error')}")
        return resp

    def alternate(self, rounds: int, fn: Callable[[AgentSpec], dict[str, float]]
                  ) -> dict[str, dict[str, list[float]]]:
        """``{agent: {metric: samples}}`` from ``rounds`` rounds of pi, pisces (A B A B). A failing sample
        is logged and dropped; ``errors`` collects the messages per agent."""
        out: dict[str, dict[str, list[float]]] = {s.name: {} for s in self.agents}
        self.errors: dict[str, str] = {}
        for _ in range(rounds):
            for spec in self.agents:
                try:
                    metrics = fn(spec)
                except Exception as exc:
                    msg = f"{type(exc).__name__}: {exc}"
                    self.errors[spec.name] = msg
                    self.cfg.log(f"  {spec.name}: {msg}")
                    continue
                for k, v in metrics.items():
                    out[spec.name].setdefault(k, []).append(v)
        return out

    def figure(self, data: dict[str, dict[str, list[float]]], metric: str, key: str, label: str, unit: str,
               pi_missing: str = "", scale: float = 1.0) -> Figure:
        """A side-by-side figure from ``alternate``'s output."""
        p = [v * scale for v in data.get("pisces", {}).get(metric, [])]
        pi = [v * scale for v in data.get("pi", {}).get(metric, [])] if "pi" in data else None
        why = ""
        if not pi:
            pi = None
            why = pi_missing or self.pi_missing or self.errors.get("pi", "") or "no sample"
        detail: dict[str, Any] = {}
        if not p:
            detail["error"] = self.errors.get("pisces", "no sample")
        return Figure(key, label, unit, p, pi, "pi", why, detail)

    def close(self) -> None:
        self.llm.close()


# ---------------------------------------------------------------------------------------------
# Workloads
# ---------------------------------------------------------------------------------------------
def startup(h: RpcHarness, spec: AgentSpec) -> dict[str, float]:
    h.llm.set_script([])
    a = h.spawn(spec)
    try:
        a.send({"id": "s", "type": "get_state"})
        h.ok(a.wait(lambda o: o.get("id") == "s", 60))
        ms = a.ms()
    finally:
        a.close()
    return {"startup_ms": ms, "idle_rss_kb": a.rusage.ru_maxrss}


def warm_up_prompt(h: RpcHarness, a: Any) -> None:
    """A one-word prompt and its reply (the script's first turn without "match"), so that what is timed next
    finds the provider SDK loaded."""
    n = a.count("agent_end")
    h.ok(a.request({"type": "prompt", "message": "warm up"}, 60))
    a.wait_count("agent_end", n + 1, 120)


def streamed_reply(h: RpcHarness, spec: AgentSpec, words: int, warm: bool = False,
                   idle_s: float = 0.0, args: list[str] | None = None, tee: str | None = None) -> dict[str, float]:
    """The reply in a fresh process right after get_state (as drive.py bench); with ``idle_s``, that long
    after get_state (a person reading, then typing: time for an agent to warm up while idle); or with
    ``warm`` after a first one-word prompt in the same process. ``tee`` gets the process's stdout bytes."""
    turns = [{"words": words, "usage": {"prompt_tokens": 1500, "completion_tokens": words}}]
    h.llm.set_script(([{"text": "ok"}] if warm else []) + turns)
    a = h.spawn(spec, args=args, tee=tee)
    try:
        h.ok(a.request({"type": "get_state"}, 60))
        if warm:
            warm_up_prompt(h, a)
        time.sleep(idle_s)
        with a.cond:
            start = len(a.records)
            first_out = len(a.out)
        t = time.perf_counter()
        a.send({"id": "p", "type": "prompt", "message": f"Write {words} words"})
        a.wait(lambda o: o.get("type") == "agent_end", 120, since=first_out)
        ms = (time.perf_counter() - t) * 1000
        with a.cond:
            recs = a.records[start:]
            outs = a.out[first_out:]
        out_bytes = sum(r["bytes"] for r in recs if r["dir"] == "out")
        updates = sum(1 for o in outs if o.get("type") == "message_update")
    finally:
        a.close()
    return {"reply_ms": ms, "stdout_bytes": out_bytes, "message_updates": updates,
            "rss_after_kb": a.rusage.ru_maxrss}


def reader_floor(h: RpcHarness, words: int, reps: int) -> list[float]:
    """Milliseconds this benchmark's reader (``_agent.Agent``) takes to parse pisces' frames of a ``words``-chunk
    second reply when they come from ``cat`` instead of an agent, spawn of cat included: the share of a reply's
    figure that is the instrument's own work, and so the least any agent could show with it on this machine."""
    spec = next(s for s in h.agents if s.name == "pisces")
    recorded = h.tmp / "reply-frames.jsonl"
    streamed_reply(h, spec, words, warm=True, tee=str(recorded))
    data = recorded.read_bytes()
    cut = data.index(b'{"type":"agent_end"')  # the warm-up's end; the second reply starts on the next line
    reply = recorded.with_name("reply-only.jsonl")
    reply.write_bytes(data[data.index(b"\n", cut) + 1:])
    out = []
    for _ in range(reps):
        t = time.perf_counter()
        r = h.drive.Agent(["cat", str(reply)], h.cwd, dict(h.env))
        try:
            r.wait(lambda o: o.get("type") == "agent_end", 60)
            out.append((time.perf_counter() - t) * 1000)
        finally:
            r.close()
    return out


IDLE_S = 1.0  # the pause before the first prompt in the "after start-up" figure


def run(cfg: Config, res: Results, harness: RpcHarness) -> None:
    h = harness
    words = cfg.sizes.words
    cfg.log(f"rpc: spawn -> get_state, idle RSS ({cfg.rounds} rounds)")
    d = h.alternate(cfg.rounds, lambda s: startup(h, s))
    res.add(h.figure(d, "startup_ms", "rpc_startup_ms", "spawn -> first get_state", "ms"))
    res.add(h.figure(d, "idle_rss_kb", "rpc_idle_rss_kib", "idle peak RSS", "KiB"))
    cfg.log(f"rpc: {words}-chunk streamed reply ({cfg.rounds} rounds)")
    d = h.alternate(cfg.rounds, lambda s: streamed_reply(h, s, words))
    f = res.add(h.figure(d, "reply_ms", "rpc_reply_ms", f"{words}-chunk reply, prompt -> agent_end", "ms"))
    f.detail["message_updates"] = {k: v.get("message_updates") for k, v in d.items()}
    res.add(h.figure(d, "stdout_bytes", "rpc_stdout_bytes", f"stdout bytes per prompt ({words} chunks)", "bytes"))
    full_stdout = d.get("pisces", {}).get("stdout_bytes", [])
    pi_stdout = d.get("pi", {}).get("stdout_bytes")
    for profile in ("lean", "deltas"):
        cfg.log(f"rpc: {words}-chunk streamed reply, pisces --stream-profile {profile} ({cfg.rounds} rounds)")
        pisces_only = [s for s in h.agents if s.name == "pisces"]
        dp = {"pisces": {}}
        for _ in range(cfg.rounds):
            for spec in pisces_only:
                m = streamed_reply(h, spec, words, args=["--stream-profile", profile])
                for k, v in m.items():
                    dp["pisces"].setdefault(k, []).append(v)
        if pi_stdout:
            dp["pi"] = {"stdout_bytes": pi_stdout}
        f = res.add(h.figure(dp, "stdout_bytes", f"rpc_stdout_bytes_{profile}",
                             f"stdout bytes per prompt, --stream-profile {profile} (pi: its only stream)", "bytes"))
        ours = dp["pisces"].get("stdout_bytes", [])
        if ours and full_stdout:
            f.detail["of_full_profile"] = round(statistics.median(ours) / statistics.median(full_stdout), 4)
    res.add(h.figure(d, "rss_after_kb", "rpc_rss_after_reply_kib", f"peak RSS after {words}-chunk reply", "KiB"))
    cfg.log(f"rpc: {words}-chunk streamed reply, first prompt {IDLE_S:g} s after start-up ({cfg.rounds} rounds)")
    d = h.alternate(cfg.rounds, lambda s: streamed_reply(h, s, words, idle_s=IDLE_S))
    res.add(h.figure(d, "reply_ms", "rpc_reply_after_idle_ms",
                     f"{words}-chunk reply, first prompt {IDLE_S:g} s after start-up", "ms"))
    cfg.log(f"rpc: {words}-chunk streamed reply after a first prompt in the same process ({cfg.rounds} rounds)")
    d = h.alternate(cfg.rounds, lambda s: streamed_reply(h, s, words, warm=True))
    res.add(h.figure(d, "reply_ms", "rpc_reply_warm_ms", f"{words}-chunk reply, second prompt of the process",
                     "ms"))
    if "pisces" in d and d["pisces"].get("reply_ms"):
        cfg.log(f"rpc: this reader alone on pisces' {words}-chunk reply, replayed by cat ({cfg.rounds} reps)")
        try:
            floor = reader_floor(h, words, cfg.rounds)
            res.add(Figure("rpc_reader_floor_ms", f"{words}-chunk reply: this benchmark's reader alone, the same "
                           "frames from cat (ratio: to pi's second prompt)", "ms", floor,
                           ref=d.get("pi", {}).get("reply_ms"), ref_name="pi's second prompt",
                           ref_missing="" if "pi" in d else h.pi_missing))
        except Exception as exc:
            res.skip("rpc_reader_floor_ms", f"{words}-chunk reply: the reader alone", f"{type(exc).__name__}: {exc}")
    cfg.log(f"rpc: {words}-chunk reply from the faux model, pisces alone ({cfg.rounds} reps)")
    try:
        fx = run_faux(cfg.rounds, words)["samples"]
        res.add(Figure("rpc_faux_reply_ms", f"{words}-chunk reply, faux model (no HTTP, no SDK)", "ms",
                       fx["roundtrip_ms"], ref_missing="pi 0.73.1 has no faux model"))
    except Exception as exc:
        res.skip("rpc_faux_reply_ms", f"{words}-chunk reply, faux model", f"{type(exc).__name__}: {exc}")


# ---------------------------------------------------------------------------------------------
# pisces alone, faux model: no HTTP, no SDK
# ---------------------------------------------------------------------------------------------
def _spawn(args: list[str], home: str, cwd: str) -> subprocess.Popen:
    env = {**os.environ, "HOME": home, "PISCES_CODING_AGENT_DIR": os.path.join(home, ".pisces", "agent")}
    return subprocess.Popen([*pisces_cmd()[:-2], "--mode", "rpc", *args], stdin=subprocess.PIPE,
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


def run_faux(reps: int, chunks: int) -> dict:
    """pisces with ``--provider faux``: spawn -> get_state, idle RSS, a ``chunks``-chunk reply end to end,
    stdout bytes and RSS after it. Medians, plus the raw samples under ``samples``."""
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
        "samples": {"startup_ms": startup, "idle_rss_kb": idle_rss, "roundtrip_ms": roundtrip,
                    "stdout_bytes": out_bytes, "rss_after_kb": rss_after},
    }


def main() -> int:
    import argparse
    import shutil

    from benchmarks.__main__ import print_table

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--words", type=int, default=2000)
    ap.add_argument("--no-pi", action="store_true")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="pisces-bench-"))
    cfg = Config(rounds=args.rounds, with_pi=not args.no_pi, tmp=tmp)
    cfg.sizes.words = args.words
    res = Results()
    if cfg.with_pi:
        cfg.pi_cli, why = find_pi(cfg.log)
        if why:
            cfg.log(f"pi: {why}")
    h = RpcHarness(cfg, res)
    try:
        run(cfg, res, h)
    finally:
        h.close()
        shutil.rmtree(tmp, ignore_errors=True)
    print_table(res)
    return 0


if __name__ == "__main__":
    sys.exit(main())
