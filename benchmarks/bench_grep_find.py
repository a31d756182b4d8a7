"""Time the grep and find tools on a 50k-file tree against bare ripgrep.

    python benchmarks/bench_grep_find.py [--files 50000] [--repeat 3]

Builds the tree in a temp dir (a .gitignore'd build/ directory included), then reports the best of
``--repeat`` runs for: bare ``rg`` (the same arguments the tools use), the tools with rg, and the tools'
pure-Python fallback. Not a test: it prints numbers.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import subprocess
import sys
import tempfile
import time

from pisces.ai.abort import AbortSignal
from pisces.core.tools.find import FindTool
from pisces.core.tools.grep import GrepTool, find_rg

WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma tau".split()


def build_tree(root: str, count: int) -> None:
    rng = random.Random(1)
    os.makedirs(os.path.join(root, ".git"))
    with open(os.path.join(root, ".gitignore"), "w") as f:
        f.write("build/\n*.log\n")
    per_dir = 50
    for n in range(count):
        d = os.path.join(root, "build" if n % 25 == 0 else f"pkg{n // 1000}", f"mod{(n // per_dir) % 20}")
        os.makedirs(d, exist_ok=True)
        ext = ".log" if n % 40 == 1 else ".py"
        with open(os.path.join(d, f"file{n}{ext}"), "w") as f:
            for _ in range(20):
                f.write(" ".join(rng.choice(WORDS) for _ in range(8)) + "\n")
            if n % 997 == 0:
                f.write("needle_marker = 42\n")


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def run_tool(tool, params) -> str:
    result = asyncio.run(tool.execute("bench", params, AbortSignal(), lambda u: None))
    return result.content[0].text


def _alternate(reps: int, *fns) -> list[list[float]]:
    """Samples (ms) of each function, run in turn A B A B after one untimed round."""
    for fn in fns:
        fn()
    out: list[list[float]] = [[] for _ in fns]
    for _ in range(reps):
        for i, fn in enumerate(fns):
            t = time.perf_counter()
            fn()
            out[i].append((time.perf_counter() - t) * 1000)
    return out


def run(cfg, res, wl, harness=None) -> None:
    """The runner's entry: the grep and find tools over the ``grep_files`` tree against bare rg with the same
    arguments, alternating; the pure-Python fallback too in a full run; and a grep tool call through RPC,
    timed from tool_execution_start to tool_execution_end, pisces and pi alternating."""
    from benchmarks._common import Figure

    root = wl.grep_tree
    n = wl.sizes.grep_files
    reps = cfg.rounds
    rg = find_rg()
    grep_params = {"pattern": "needle_marker"}
    find_params = {"pattern": "*.py", "limit": 100_000}
    if not rg:
        res.notes.append("rg not found: grep/find compared with nothing")
    cfg.log(f"grep/find: {n} files, tools vs bare rg ({reps} rounds)")
    for key, label, tool, params, bare in (
            ("grep_ms", f"grep tool, {n} files (vs bare rg --json)", GrepTool, grep_params,
             [rg, "--json", "--line-number", "--color=never", "--hidden", "--max-count", "100", "--", "needle_marker",
              root]),
            ("find_ms", f"find tool, {n} files (vs bare rg --files)", FindTool, find_params,
             [rg, "--files", "--hidden", "--no-require-git", root])):
        def tool_fn(tool=tool, params=params):
            return run_tool(tool(root, rg_path=rg), params)

        def py_fn(tool=tool, params=params):
            return run_tool(tool(root, rg_path=None), params)

        def rg_fn(bare=bare):
            return subprocess.run(bare, capture_output=True)

        if rg:
            t_tool, t_rg = _alternate(reps, tool_fn, rg_fn)
            res.add(Figure(key, label, "ms", t_tool, t_rg, "rg", detail={"rg_args": bare[1:-1]}))
        if not cfg.quick or not rg:  # the fallback is slow: full runs only, 3 rounds at most
            py_label = label.replace("tool,", "tool (pure-Python fallback),")
            if rg:
                t_py, t_rg = _alternate(max(1, min(reps, 3)), py_fn, rg_fn)
                res.add(Figure(key.replace("_ms", "_python_ms"), py_label, "ms", t_py, t_rg, "rg"))
            else:
                (t_py,) = _alternate(max(1, min(reps, 3)), py_fn)
                res.add(Figure(key.replace("_ms", "_python_ms"), py_label, "ms", t_py, None, "rg",
                               "rg not found"))
    if harness is None:
        return
    h = harness
    drive = h.drive

    def grep_call(spec) -> dict:
        h.llm.set_script([drive.TOOL("grep", grep_params), drive.T("done")])
        a = h.spawn(spec, root, ["--tools", "read,bash,grep"])  # grep is not among the default tools
        try:
            h.ok(a.request({"type": "get_state"}, 60))
            a.send({"id": "p", "type": "prompt", "message": "grep for needle_marker"})
            a.wait(lambda o: o.get("type") == "agent_end", 120)
            with a.cond:
                pairs = [(r["t"], o) for r, o in zip([r for r in a.records if r["dir"] == "out"], a.out, strict=False)]
        finally:
            a.close()
        start = next(t for t, o in pairs if o.get("type") == "tool_execution_start")
        end, ev = next((t, o) for t, o in pairs if o.get("type") == "tool_execution_end")
        if ev.get("isError"):
            raise RuntimeError(f"grep tool failed: {json.dumps(ev.get('result'))[:300]}")
        return {"ms": end - start}

    cfg.log(f"grep/find: RPC grep tool call in the {n}-file tree ({reps} rounds)")
    d = h.alternate(reps, grep_call)
    res.add(h.figure(d, "ms", "rpc_grep_tool_ms", f"RPC grep tool call, {n} files (tool_execution_start -> end)",
                     "ms"))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=50_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    rg = find_rg()
    with tempfile.TemporaryDirectory(prefix="pisces-bench-") as root:
        t = time.perf_counter()
        build_tree(root, args.files)
        print(f"tree: {args.files} files in {time.perf_counter() - t:.1f}s at {root}; rg: {rg or 'not found'}")
        grep_params = {"pattern": "needle_marker"}
        find_params = {"pattern": "*.py", "limit": 100_000}
        rows: list[tuple[str, float, float | None]] = []
        if rg:
            bare_grep = best(lambda: subprocess.run(
                [rg, "--json", "--line-number", "--color=never", "--hidden", "--max-count", "100", "--",
                 "needle_marker", root], capture_output=True), args.repeat)
            bare_find = best(lambda: subprocess.run([rg, "--files", "--hidden", "--no-require-git", root],
                                                    capture_output=True), args.repeat)
            tool_grep = best(lambda: run_tool(GrepTool(root, rg_path=rg), grep_params), args.repeat)
            tool_find = best(lambda: run_tool(FindTool(root, rg_path=rg), find_params), args.repeat)
            rows += [("grep tool (rg)", tool_grep, bare_grep), ("find tool (rg)", tool_find, bare_find)]
            assert run_tool(GrepTool(root, rg_path=rg), grep_params) == run_tool(
                GrepTool(root, rg_path=None), grep_params)
            assert run_tool(FindTool(root, rg_path=rg), find_params) == run_tool(
                FindTool(root, rg_path=None), find_params)
        else:
            bare_grep = bare_find = None
        py_grep = best(lambda: run_tool(GrepTool(root, rg_path=None), grep_params), args.repeat)
        py_find = best(lambda: run_tool(FindTool(root, rg_path=None), find_params), args.repeat)
        rows += [("grep tool (pure Python)", py_grep, bare_grep), ("find tool (pure Python)", py_find, bare_find)]
        if rg:
            print(f"{'bare rg --json (grep)':28s} {bare_grep * 1000:8.1f} ms")
            print(f"{'bare rg --files (find)':28s} {bare_find * 1000:8.1f} ms")
        for name, secs, base in rows:
            ratio = f"  {secs / base:5.2f}x bare rg" if base else ""
            print(f"{name:28s} {secs * 1000:8.1f} ms{ratio}")
        print(f"python {sys.version.split()[0]}")


if __name__ == "__main__":
    main()
