"""The cost of the OS sandbox per bash call: the bash tool running ``true`` confined (workspace-write, the
Landlock ruleset built and applied in the child) against the same tool unconfined, alternating.

    python benchmarks/bench_sandbox.py [--reps 50]

In the runner (``python -m benchmarks --only sandbox``) the unconfined call is the reference column, so the
ratio is the sandbox's relative cost; the goal is under 10 ms more per call. Where the kernel has no Landlock
the confined side is reported as not measured.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from typing import Any

from pisces.ai.abort import AbortSignal
from pisces.core.sandbox import landlock
from pisces.core.sandbox.launch import Sandbox
from pisces.core.tools.bash import BashTool


class _Settings:
    project_trusted = False

    def global_settings(self) -> dict[str, Any]:
        return {}

    def project_settings(self) -> dict[str, Any]:
        return {}


def measure(reps: int) -> tuple[list[float], list[float]]:
    """(confined samples, unconfined samples) in ms, alternating the two."""
    work = tempfile.mkdtemp(prefix="pisces-bench-sandbox-")
    confined = BashTool(work, sandbox=Sandbox(_Settings(), "workspace-write"))
    free = BashTool(work)

    async def one(tool: BashTool) -> float:
        t = time.perf_counter()
        await tool.execute("bench", {"command": "true"}, AbortSignal(), lambda _u: None)
        return (time.perf_counter() - t) * 1000

    async def run() -> tuple[list[float], list[float]]:
        a, b = [], []
        await one(confined)  # warm-up: ctypes and the temp dir
        await one(free)
        for _ in range(reps):
            a.append(await one(confined))
            b.append(await one(free))
        return a, b

    return asyncio.run(run())


def run(cfg: Any, res: Any) -> None:
    from benchmarks._common import Figure

    if landlock.available() <= 0:
        res.skip("sandbox_bash_true_ms", "bash tool `true`, sandboxed", "this kernel has no Landlock")
        return
    reps = max(cfg.rounds * 4, 5)
    cfg.log(f"sandbox: bash `true` confined vs unconfined ({reps} reps each)")
    a, b = measure(reps)
    res.add(Figure("sandbox_bash_true_ms", "bash tool `true`, sandboxed (workspace-write) vs unsandboxed", "ms",
                   a, ref=b, ref_name="unsandboxed", detail={"landlock_abi": landlock.available()}))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=50)
    args = ap.parse_args()
    a, b = measure(args.reps)
    out = {"landlock_abi": landlock.available(), "reps": args.reps,
           "sandboxed_ms_median": round(statistics.median(a), 2),
           "unsandboxed_ms_median": round(statistics.median(b), 2),
           "overhead_ms_median": round(statistics.median(a) - statistics.median(b), 2)}
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
