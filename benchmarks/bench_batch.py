"""``pisces batch`` with the faux model: what the coordinator adds per item, and its memory.

- coordinator overhead per item: an item's whole time in the executor minus its clone and its agent process
  (``duration_ms - clone_ms - agent_ms`` of each result line): the checkout bookkeeping, the patch, the
  session file, the result line (median over the items);
- the coordinator's peak RSS over 100 and 1,000 items (``--parallel 4``), read from /proc while it runs;
- the same items through a local Ray cluster when Ray is installed: the overhead per item against local,
  and Ray's start-up (to the first result) reported apart.

pi has no batch runner: no side-by-side figure.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

from benchmarks._common import Figure

NO_PI = "pi has no batch runner"


def _repo(root: str) -> str:
    repo = os.path.join(root, "src")
    os.makedirs(repo)
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    with open(os.path.join(repo, "a.txt"), "w") as f:
        f.write("one\n")
    subprocess.run(["git", "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qam", "x", "--allow-empty"],
                   cwd=repo, check=True)
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run(["git", "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "files"], cwd=repo,
                   check=True)
    return repo


def _run(root: str, items: int, executor: str) -> tuple[list[dict], float, float, float | None]:
    """(result lines, wall s, peak coordinator RSS KiB, seconds to the first result line)."""
    script = os.path.join(root, "faux.json")
    with open(script, "w") as f:
        json.dump({"responses": [{"toolCalls": [{"name": "write", "arguments": {"path": "n.txt", "content": "x"}}]},
                                 {"text": "done"}], "loop": True}, f)
    manifest = os.path.join(root, f"m-{items}-{executor}.jsonl")
    with open(manifest, "w") as f:
        for i in range(items):
            f.write(json.dumps({"id": f"item{i}", "repo": "src", "prompt": "write n.txt"}) + "\n")
    out = os.path.join(root, f"out-{items}-{executor}")
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "pisces", "batch", manifest, "--faux-script", script, "--out",
                             out, "--parallel", "4", "--executor", executor, "--plain"], cwd=root, env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    peak, first = 0.0, None
    results = os.path.join(out, "results.jsonl")
    while proc.poll() is None:
        try:
            with open(f"/proc/{proc.pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        peak = max(peak, float(line.split()[1]))
        except OSError:
            pass
        if first is None and os.path.exists(results) and os.path.getsize(results) > 0:
            first = time.perf_counter() - started
        time.sleep(0.05)
    wall = time.perf_counter() - started
    with open(results) as f:
        rows = [json.loads(line) for line in f]
    return rows, wall, peak, first


def _overheads(rows: list[dict]) -> list[float]:
    return [r["duration_ms"] - r.get("clone_ms", 0) - r.get("agent_ms", 0) for r in rows if "agent_ms" in r]


def run(cfg, res) -> None:
    small = 4 if cfg.quick else 100
    large = 8 if cfg.quick else 1000
    with tempfile.TemporaryDirectory(dir=cfg.tmp) as root:
        _repo(root)
        cfg.log(f"batch: {small} items, --parallel 4, local")
        rows, wall, peak, _ = _run(root, small, "local")
        res.add(Figure("batch_overhead_ms", f"batch coordinator overhead per item ({small} items, local)", "ms",
                       _overheads(rows), ref_missing=NO_PI,
                       detail={"wall_s": round(wall, 2), "items_per_s": round(len(rows) / wall, 2)}))
        res.add(Figure("batch_rss_small", f"batch coordinator peak RSS, {small} items", "KiB", [peak],
                       ref_missing=NO_PI))
        cfg.log(f"batch: {large} items, --parallel 4, local (memory)")
        rows_l, wall_l, peak_l, _ = _run(root, large, "local")
        res.add(Figure("batch_rss_large", f"batch coordinator peak RSS, {large} items", "KiB", [peak_l],
                       ref_missing=NO_PI, detail={"wall_s": round(wall_l, 2), "items": len(rows_l)}))
        try:
            import ray  # noqa: F401 - only to know whether the Ray figures can be taken
        except ImportError:
            res.skip("batch_ray_overhead_ms", "batch overhead per item, Ray", "Ray is not installed")
            return
        cfg.log(f"batch: {small} items through a local Ray cluster")
        rows_r, wall_r, _, first_r = _run(root, small, "ray")
        res.add(Figure("batch_ray_overhead_ms", f"batch overhead per item ({small} items, local Ray cluster)",
                       "ms", _overheads(rows_r), ref_missing=NO_PI, detail={"wall_s": round(wall_r, 2)}))
        if first_r is not None:
            res.add(Figure("batch_ray_startup_ms", "Ray cluster start-up to the first result", "ms",
                           [first_r * 1000], ref_missing=NO_PI))
