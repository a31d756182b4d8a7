"""The interactive UIs side by side: pisces' TUI and pi 0.73.1's, each in a 120x40 pseudo-terminal, talking to
the benchmarks' scripted LLM (``_llm.py``, the OpenAI wire on 127.0.0.1) with the same HOME files.

    python -m benchmarks --only tui [--quick] [--no-pi]
    python -m benchmarks.bench_tui [--rounds N] [--no-pi]      # the same figures alone

Figures (medians of alternating rounds, pi then pisces):
    tui_spawn_ms        spawn -> the editable prompt (the footer naming the working directory drawn: both
                        agents draw it in the frame that shows the editor)
    tui_reply_cpu_ms    CPU time of the agent process (user + system, /proc, every thread) from the prompt to
                        the reply's last chunk drawn, for a ``words``-chunk reply (5 characters a chunk), after
                        a first short exchange in the same process (so the provider's client is loaded)
    tui_resume_ms       spawn with ``--session`` on a ``session_entries``-entry session -> the editable prompt
                        (one round with --quick; a side not there within RESUME_LIMIT_S is reported missing)
    tui_*_cpu_ms        the agent's CPU time (user + system, every thread) at the editable prompt: on a busy
                        machine a steadier comparison than the wall-clock figures
    tui_idle_wakeups    context switches a second of the agent's threads while it sits idle at the prompt
                        (IDLE_S seconds, after a settling second): how often it wakes up with nothing to do
    tui_idle_cpu_ms     CPU milliseconds a second over the same idle window
and, pisces only, the renderer's cost per streamed delta for a 1k- and a 100k-character answer (in process).

The driver answers no terminal query (pi asks for the kitty keyboard protocol and goes on without an answer).
Nothing here asserts a timing.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import pty
import select
import signal
import struct
import subprocess
import sys
import tempfile
import termios
import time
from pathlib import Path
from typing import Any, Callable

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import _agent
from benchmarks._common import Config, Figure, Results

COLS, ROWS = 120, 40
IDLE_S = 5.0
RESUME_LIMIT_S = 420.0  # a resume that has not reached the prompt by then is reported as not finished


def _pisces() -> list[str]:
    exe = os.path.join(os.path.dirname(sys.executable), "pisces")
    return [exe] if os.path.exists(exe) else [sys.executable, "-m", "pisces"]


class Pty:
    """One agent in a pseudo-terminal of COLS x ROWS; its output is read and kept (``buf``)."""

    def __init__(self, cmd: list[str], cwd: str, env: dict[str, str]) -> None:
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLS, 0, 0))
        self.started = time.monotonic()
        self.p = subprocess.Popen(cmd, stdin=slave, stdout=slave, stderr=slave, cwd=cwd,
                                  env={**env, "TERM": "xterm-256color", "COLUMNS": str(COLS), "LINES": str(ROWS)},
                                  start_new_session=True)
        os.close(slave)
        self.fd = master
        self.buf = b""

    def _read(self, timeout: float) -> bool:
        r, _, _ = select.select([self.fd], [], [], max(0.0, timeout))
        if not r:
            return False
        try:
            data = os.read(self.fd, 1 << 16)
        except OSError:
            return False
        self.buf += data
        return bool(data)

    def until(self, needle: bytes, timeout: float = 120, since: int = 0) -> float:
        """Seconds since the spawn when ``needle`` appeared (in the output after byte ``since``)."""
        deadline = time.monotonic() + timeout
        while needle not in self.buf[max(0, since - len(needle)):]:
            if time.monotonic() > deadline or self.p.poll() is not None:
                tail = self.buf[-400:].decode(errors="replace")
                raise TimeoutError(f"{needle.decode()!r} not seen (exit {self.p.poll()}); last output: {tail!r}")
            self._read(deadline - time.monotonic())
        return time.monotonic() - self.started

    def quiet(self, quiet_s: float = 0.3, limit_s: float = 10.0) -> None:
        """Read until nothing has come for ``quiet_s`` (at most ``limit_s``)."""
        end = time.monotonic() + limit_s
        while time.monotonic() < end and self._read(quiet_s):
            pass

    def write(self, data: bytes) -> None:
        os.write(self.fd, data)

    def threads(self) -> list[str]:
        try:
            return os.listdir(f"/proc/{self.p.pid}/task")
        except OSError:
            return []

    def cpu_s(self) -> float:
        fields = Path(f"/proc/{self.p.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def switches(self) -> int:
        total = 0
        for tid in self.threads():
            try:
                for line in Path(f"/proc/{self.p.pid}/task/{tid}/status").read_text().splitlines():
                    if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                        total += int(line.split()[1])
            except OSError:
                continue
        return total

    def close(self) -> None:
        try:
            if self.p.poll() is None:
                self.write(b"\x03")  # clear, then Ctrl+D on the empty editor (both agents leave)
                time.sleep(0.1)
                self.write(b"\x04")
            end = time.monotonic() + 10
            while self.p.poll() is None and time.monotonic() < end:
                self._read(0.1)
        finally:
            if self.p.poll() is None:
                os.killpg(self.p.pid, signal.SIGKILL)  # the group this driver started
            self.p.wait(10)
            os.close(self.fd)


class Side:
    def __init__(self, name: str, cmd: list[str]) -> None:
        self.name, self.cmd = name, cmd


class TuiBench:
    def __init__(self, cfg: Config, session: tuple[str, str] | None) -> None:
        from benchmarks.bench_rpc import ScriptedLLM

        self.cfg = cfg
        self.llm = ScriptedLLM()
        self.tmp = Path(tempfile.mkdtemp(prefix="tui-", dir=cfg.tmp))
        self.home = str(self.tmp / "home")
        _agent.write_agent_config(self.home, self.llm.port)
        self.cwd = str(self.tmp / "cwd")
        os.makedirs(self.cwd)
        self.env = _agent.agent_env(self.home)
        self.session = session  # (path, its cwd)
        self.sides: list[Side] = []
        self.errors: dict[str, str] = {}
        if cfg.with_pi and cfg.pi_cli:
            self.sides.append(Side("pi", ["node", cfg.pi_cli]))
        self.sides.append(Side("pisces", _pisces()))

    def spawn(self, side: Side, args: list[str], cwd: str | None = None) -> Pty:
        return Pty(side.cmd + args, cwd or self.cwd, self.env)

    def ready(self, term: Pty, cwd: str | None = None) -> float:
        """Seconds to the editable prompt: the footer naming the working directory is drawn."""
        return term.until((cwd or self.cwd).encode())

    # -- workloads ---------------------------------------------------------------------------------
    def spawn_ms(self, side: Side) -> dict[str, float]:
        term = self.spawn(side, ["--no-session"])
        try:
            return {"spawn": self.ready(term) * 1000, "cpu": term.cpu_s() * 1000}
        finally:
            term.close()

    def reply(self, side: Side) -> dict[str, float]:
        words = self.cfg.sizes.words
        text = "".join(f"w{i % 1000:03d} " for i in range(words - 1)) + "ZEND"
        self.llm.set_script([{"text": "warm WARMED"}, {"text": text, "chunk_chars": 5}])
        term = self.spawn(side, ["--no-session"])
        try:
            self.ready(term)
            term.write(b"hi\r")  # a first exchange loads what a prompt loads (the provider's client)
            term.until(b"WARMED", 60)
            term.quiet(0.5)
            before = term.cpu_s()
            mark = len(term.buf)
            term.write(b"go\r")
            term.until(b"ZEND", 300, since=mark)
            term.quiet(0.3)
            return {"cpu": (term.cpu_s() - before) * 1000}
        finally:
            term.close()

    def resume(self, side: Side) -> dict[str, float]:
        assert self.session is not None
        path, cwd = self.session
        term = self.spawn(side, ["--session", path], cwd=cwd)
        try:
            return {"resume": term.until(cwd.encode(), RESUME_LIMIT_S) * 1000, "cpu": term.cpu_s() * 1000}
        except TimeoutError:
            raise TimeoutError(f"no editable prompt within {RESUME_LIMIT_S:.0f} s") from None
        finally:
            term.close()

    def idle(self, side: Side) -> dict[str, float]:
        term = self.spawn(side, ["--no-session"])
        try:
            self.ready(term)
            term.quiet(1.0, 5.0)
            cpu0, sw0, t0 = term.cpu_s(), term.switches(), time.monotonic()
            end = t0 + (IDLE_S if not self.cfg.quick else 2.0)
            while time.monotonic() < end:
                term._read(end - time.monotonic())
            secs = time.monotonic() - t0
            return {"wakeups": (term.switches() - sw0) / secs, "cpu": (term.cpu_s() - cpu0) * 1000 / secs}
        finally:
            term.close()

    def alternate(self, rounds: int, fn: Callable[[Side], dict[str, float]]) -> dict[str, dict[str, list[float]]]:
        out: dict[str, dict[str, list[float]]] = {s.name: {} for s in self.sides}
        for _ in range(rounds):
            for side in self.sides:
                try:
                    for k, v in fn(side).items():
                        out[side.name].setdefault(k, []).append(v)
                except Exception as exc:  # a failed sample is reported, the others go on
                    self.errors[side.name] = f"{type(exc).__name__}: {exc}"[:300]
                    self.cfg.log(f"  tui {side.name}: {self.errors[side.name]}")
        return out

    def figure(self, data: dict[str, dict[str, list[float]]], metric: str, key: str, label: str, unit: str
               ) -> Figure:
        p = data.get("pisces", {}).get(metric, [])
        pi = data.get("pi", {}).get(metric) or None
        why = "" if pi else ("--no-pi" if not self.cfg.with_pi else self.errors.get("pi", "pi not available"))
        detail = {} if p else {"error": self.errors.get("pisces", "no sample")}
        return Figure(key, label, unit, p, pi, "pi", why, detail)

    def close(self) -> None:
        self.llm.close()


def per_delta_us(total: int, deltas: int = 2000) -> float:
    from pisces.modes.tui.render import Renderer
    from pisces.modes.tui.transcript import Transcript

    out: list[str] = []
    r = Renderer(out.append, COLS, ROWS)
    t = Transcript(r.commit, COLS)
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


def run(cfg: Config, res: Results, wl: Any = None, harness: Any = None) -> None:
    session = None
    if wl is not None:
        path, _n = wl.long_session
        session = (path, str(wl.project))
    b = TuiBench(cfg, session)
    try:
        for side in b.sides:  # one untimed start each (the file cache)
            try:
                b.spawn_ms(side)
            except Exception as exc:  # reported by the timed rounds if it persists
                cfg.log(f"tui warm-up of {side.name} failed: {exc}")
        cfg.log(f"tui: spawn -> editable prompt ({cfg.rounds} rounds)")
        data = b.alternate(cfg.rounds, b.spawn_ms)
        res.add(b.figure(data, "spawn", "tui_spawn_ms", "TUI: spawn -> editable prompt (120x40)", "ms"))
        res.add(b.figure(data, "cpu", "tui_spawn_cpu_ms", "TUI: CPU time to the editable prompt", "ms"))
        cfg.log(f"tui: {cfg.sizes.words}-chunk reply, CPU time")
        data = b.alternate(cfg.rounds, b.reply)
        res.add(b.figure(data, "cpu", "tui_reply_cpu_ms",
                         f"TUI: CPU time of a {cfg.sizes.words}-chunk reply (120x40)", "ms"))
        if session is not None:
            cfg.log(f"tui: resume of a {cfg.sizes.session_entries}-entry session")
            data = b.alternate(1 if cfg.quick else cfg.rounds, b.resume)  # pi takes minutes here
            res.add(b.figure(data, "resume", "tui_resume_ms",
                             f"TUI: resume a {cfg.sizes.session_entries}-entry session -> editable prompt", "ms"))
            res.add(b.figure(data, "cpu", "tui_resume_cpu_ms", "TUI: CPU time of that resume", "ms"))
        cfg.log("tui: idle at the prompt")
        data = b.alternate(max(1, cfg.rounds // 2), b.idle)
        res.add(b.figure(data, "wakeups", "tui_idle_wakeups", "TUI idle: context switches a second", "/s"))
        res.add(b.figure(data, "cpu", "tui_idle_cpu_ms", "TUI idle: CPU ms a second", "ms"))
        for size, key in ((1_000, "tui_delta_us_1k"), (100_000, "tui_delta_us_100k")):
            res.add(Figure(key, f"TUI renderer: cost per delta, {size // 1000}k-character answer (pisces only)",
                           "us", [per_delta_us(size) for _ in range(max(1, cfg.rounds // 2))],
                           ref_missing="in process, pisces only"))
    finally:
        b.close()


def main(argv: list[str] | None = None) -> int:
    from benchmarks.__main__ import main as bench_main

    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--no-pi", action="store_true")
    a = ap.parse_args(argv)
    bench_main(["--only", "tui", *(["--rounds", str(a.rounds)] if a.rounds else []),
                *(["--quick"] if a.quick else []), *(["--no-pi"] if a.no_pi else [])])
    return 0


if __name__ == "__main__":
    sys.exit(main())
