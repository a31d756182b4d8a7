"""Session store timings: listing many files, opening one long session, appending.

    python benchmarks/bench_sessions.py [--files 500] [--entries 20000] [--reps 5]

Prints the numbers; it is not a test. Files are written by SessionManager itself into a temporary dir.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time

from pisces.ai.types import AssistantMessage, TextContent, ToolCall, ToolResultMessage, Usage, UserMessage
from pisces.core.store import SessionManager, list_sessions


def _turn(rng: random.Random, i: int) -> list:
    """One user prompt, an assistant tool call, its result, and a final answer (4 entries)."""
    out = "\n".join(f"line {j}: " + "y" * rng.randint(10, 80) for j in range(rng.randint(5, 60)))
    return [
        UserMessage(content=[TextContent(text=f"prompt {i}: " + "please look at the code " * rng.randint(1, 8))]),
        AssistantMessage(content=[TextContent(text="Let me check."),
                                  ToolCall(id=f"call_{i}", name="bash", arguments={"command": f"cat f{i}.py"})],
                         api="openai-completions", provider="p", model="m", usage=Usage(input=1000 + i, output=20,
                                                                                       totalTokens=1020 + i),
                         stopReason="toolUse"),
        ToolResultMessage(toolCallId=f"call_{i}", toolName="bash", content=[TextContent(text=out)]),
        AssistantMessage(content=[TextContent(text="Done: " + "z" * rng.randint(20, 400))], api="openai-completions",
                         provider="p", model="m", usage=Usage(input=2000 + i, output=50, totalTokens=2050 + i)),
    ]


def _write_session(session_dir: str, turns: int, rng: random.Random, cwd: str = "/bench/project") -> str:
    sm = SessionManager.create(cwd, session_dir)
    sm.append_model_change("p", "m")
    sm.append_thinking_level_change("off")
    for i in range(turns):
        for message in _turn(rng, i):
            sm.append_message(message)
    sm.close()
    return sm.get_session_file() or ""


def _best(fn, reps: int) -> tuple[float, float]:
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times), statistics.median(times)


def run(cfg, res, wl, harness=None) -> None:
    """The runner's entry: ``list_sessions`` over ``session_files`` files and opening the
    ``session_entries``-entry session in process (pisces alone: pi's store is inside its node process),
    then the same open through RPC ``switch_session``, pisces and pi alternating."""
    from benchmarks._common import Figure, samples

    reps = cfg.rounds
    many = wl.many_sessions_dir
    count = len(list_sessions(many))
    why = "pi 0.73.1's RPC has no list_sessions, and its store runs inside its node process"
    cfg.log(f"sessions: list_sessions over {count} files, open a {wl.sizes.session_entries}-entry session")
    res.add(Figure("list_sessions_ms", f"list_sessions, {count} files (in process)", "ms",
                   samples(lambda: list_sessions(many), reps), ref_missing=why,
                   detail={"files": count, "bytes": sum(os.path.getsize(os.path.join(many, f))
                                                        for f in os.listdir(many))}))
    path, n_entries = wl.long_session

    def open_and_build():
        sm = SessionManager.open(path)
        sm.build_session_context()
        sm.close()

    res.add(Figure("session_open_ms", f"open {n_entries}-entry session + build context (in process)", "ms",
                   samples(open_and_build, reps), ref_missing="see the switch_session row for pi",
                   detail={"entries": n_entries, "bytes": os.path.getsize(path)}))
    if harness is None:
        return
    h = harness

    def switch(spec) -> dict:
        a = h.spawn(spec, wl.project)
        try:
            h.ok(a.request({"type": "get_state"}, 60))
            t = time.perf_counter()
            h.ok(a.request({"type": "switch_session", "sessionPath": path}, 120))
            ms = (time.perf_counter() - t) * 1000
        finally:
            a.close()
        return {"ms": ms, "rss_kb": a.rusage.ru_maxrss}

    cfg.log(f"sessions: RPC switch_session to the {n_entries}-entry session ({reps} rounds)")
    d = h.alternate(reps, switch)
    res.add(h.figure(d, "ms", "rpc_switch_session_ms", f"RPC switch_session to {n_entries}-entry session", "ms"))
    res.add(h.figure(d, "rss_kb", "rpc_switch_session_rss_kib", "peak RSS after opening it", "KiB"))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=500)
    ap.add_argument("--entries", type=int, default=20000)
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    rng = random.Random(42)

    with tempfile.TemporaryDirectory(prefix="pisces-bench-") as tmp:
        many = os.path.join(tmp, "many")
        t0 = time.perf_counter()
        for _ in range(args.files):
            _write_session(many, rng.randint(2, 15), rng)
        made = time.perf_counter() - t0
        size = sum(os.path.getsize(os.path.join(many, f)) for f in os.listdir(many))
        count = len(list_sessions(many))
        best, med = _best(lambda: list_sessions(many), args.reps)
        print(f"list_sessions: {count} files, {size / 1e6:.1f} MB: best {best * 1000:.1f} ms, "
              f"median {med * 1000:.1f} ms ({best / count * 1e6:.0f} us/file); writing them took {made:.2f} s")

        long_dir = os.path.join(tmp, "long")
        t0 = time.perf_counter()
        path = _write_session(long_dir, (args.entries - 2) // 4, rng)
        made = time.perf_counter() - t0
        n_entries = (args.entries - 2) // 4 * 4 + 2
        print(f"append: {n_entries} entries written in {made:.2f} s ({made / n_entries * 1e6:.0f} us/entry, "
              f"encode + one write each)")

        def open_and_build():
            sm = SessionManager.open(path)
            ctx = sm.build_session_context()
            assert len(ctx.messages) == n_entries - 2
            sm.close()

        def open_only():
            SessionManager.open(path).close()

        best, med = _best(open_and_build, args.reps)
        obest, _ = _best(open_only, args.reps)
        print(f"open {n_entries}-entry session ({os.path.getsize(path) / 1e6:.1f} MB): load + build context "
              f"best {best * 1000:.0f} ms, median {med * 1000:.0f} ms (load alone {obest * 1000:.0f} ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
