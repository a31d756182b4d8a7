"""The benchmark runner.

    python -m benchmarks [--quick] [--json OUT] [--no-pi] [--rounds N] [--only MODULE,...] [--tiny]

Workloads (sizes as in the issue; ``--tiny`` shrinks them all for the smoke test):

    rpc         spawn -> first get_state; idle peak RSS; a 2000-chunk streamed reply from the scripted
                OpenAI-wire LLM, prompt -> agent_end; stdout bytes per prompt; peak RSS after it;
                the same reply from pisces' faux model (no HTTP, no SDK)
    sessions    list_sessions over 500 files; opening a 20,000-entry session (in process, and through
                RPC switch_session for both agents)
    grep_find   the grep and find tools over 50,000 files against bare rg with the same arguments; a grep
                tool call through RPC for both agents
    compaction  compaction preparation on a 200k-token session (in process); RPC compact for both agents
    export      export_html of a 2,000-message session (in process, and through RPC for both agents)
    providers   import time of pisces and of each provider with its SDK; cost per streamed event of each
                provider against a local SSE server
    batch       pisces batch with the faux model: coordinator overhead per item and peak RSS (100 and 1,000
                items, --parallel 4), and through a local Ray cluster when Ray is installed
    sandbox     the bash tool running `true` inside the OS sandbox (Landlock, workspace-write) against the same
                call unconfined: the sandbox's cost per command
    tui         the terminal UIs of pisces and pi in a 120x40 pseudo-terminal: spawn to an editable prompt, CPU
                time of a 2000-chunk reply, resume of a 20,000-entry session, idle wake-ups and CPU; the
                renderer's cost per delta (pisces only)
    mcp         spawn -> get_state with 3 MCP stdio servers configured against none; the first request's body
                with 80 MCP tools deferred behind mcp_tool_search against all loaded
    long_session
                1,000 prompts in one process, each a read tool call and a reply, session written: the agent's
                CPU time per prompt and wall time minus the LLM server's (medians of 21 prompts around prompt
                1, 100 and 1000), RSS after prompt 1, 100 and 1000; both agents against the scripted LLM
                (whole sessions, alternating), and pisces with the faux model
    web         a 2000-chunk reply fanned out to 1 and 10 WebSocket clients of ``pisces --mode web`` (deltas
                profile): time to the last client's agent_end, server CPU time, bytes per client

pi 0.73.1 runs where node is present (installed by ../shared/conformance/install_pi.sh the first time),
through ``node <cli.js> --mode rpc`` with HOME at a temporary home holding .pi/agent/models.json and
settings.json pointing at the benchmarks' own scripted LLM (benchmarks/_llm.py), so that every figure that does
not compare with pi runs from the repository alone (``--no-pi`` needs nothing beside it). Side-by-side
figures alternate the two agents (pi, pisces, pi, pisces, ...) and report medians; where pi cannot be
measured the table says n/a.
The grep/find rows compare with bare rg instead of pi. Nothing here asserts a timing.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # ``python benchmarks/__main__.py``
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import FULL, RESULTS_DIR, TINY, Config, Results, Sizes, as_dict, find_pi, machine_info

MODULES = ("rpc", "sessions", "grep_find", "compaction", "export", "providers", "web", "batch", "sandbox",
           "tui", "mcp", "long_session")
RPC_MODULES = {"rpc", "sessions", "grep_find", "compaction", "export", "long_session"}


# ---------------------------------------------------------------------------------------------
# Table
# ---------------------------------------------------------------------------------------------
def fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "n/a"
    if unit == "ms":
        return f"{value:.0f} ms" if value >= 1000 else f"{value:.1f} ms"
    if unit == "us":
        return f"{value:.1f} µs"
    if unit == "KiB":
        return f"{value / 1024:.1f} MiB"
    if unit == "bytes":
        return f"{value / 1e6:.2f} MB"
    return f"{value:.1f} {unit}"


def table_rows(data: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    rows = []
    for fig in data["figures"].values():
        p = fig["pisces"]["median"] if fig["pisces"] else None
        r = fig["ref"]["median"] if fig["ref"] else None
        ref = fmt(r, fig["unit"])
        if r is not None and fig["reference"] == "bare rg":
            ref += " (rg)"
        ratio = f"{fig['ratio']:.2f}" if fig["ratio"] is not None else "n/a"
        rows.append((fig["label"], fmt(p, fig["unit"]), ref, ratio))
    return rows


def format_table(data: dict[str, Any]) -> str:
    head = ("figure", "pisces", "pi 0.73.1", "pisces/pi")
    rows = table_rows(data)
    w = [max(len(head[i]), *(len(r[i]) for r in rows)) if rows else len(head[i]) for i in range(4)]
    line = lambda r: f"{r[0]:<{w[0]}}  {r[1]:>{w[1]}}  {r[2]:>{w[2]}}  {r[3]:>{w[3]}}"  # noqa: E731
    out = [line(head), "  ".join("-" * x for x in w)]
    out += [line(r) for r in rows]
    out.append("medians; (rg) = bare ripgrep with the same arguments instead of pi; n/a = not measured")
    return "\n".join(out)


def to_json(res: Results, **extra: Any) -> dict[str, Any]:
    return {**extra, "figures": {f.key: f.to_json() for f in res.figures}, "notes": res.notes,
            "not_measured": res.not_measured}


def print_table(res: Results) -> None:
    print(format_table(to_json(res)))


# ---------------------------------------------------------------------------------------------
# Runner
# ---------------------------------------------------------------------------------------------
def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true",
                    help="2 rounds and no pure-Python grep/find fallback (about two minutes with pi)")
    ap.add_argument("--json", metavar="OUT", help="write the results here (default: benchmarks/results/)")
    ap.add_argument("--no-pi", action="store_true", help="pisces only, even where node is present")
    ap.add_argument("--rounds", type=int, help="rounds per figure (default 5, --quick 2)")
    ap.add_argument("--only", help=f"comma-separated modules: {','.join(MODULES)}")
    ap.add_argument("--tiny", action="store_true", help="tiny workloads (for the smoke test; numbers mean little)")
    return ap.parse_args(argv)


def run_module(name: str, cfg: Config, res: Results, wl: Any, harness: Any) -> None:
    import importlib

    mod = importlib.import_module(f"benchmarks.bench_{name}")
    if name == "rpc":
        if harness is None:
            res.skip("rpc_startup_ms", "spawn -> first get_state", res.notes[-1] if res.notes else "no harness")
            return
        mod.run(cfg, res, harness)
    elif name in ("providers", "web", "batch", "sandbox", "mcp"):
        mod.run(cfg, res)
    else:
        mod.run(cfg, res, wl, harness)


def _compile_package(log: Any) -> None:
    """Bring pisces' bytecode up to date, as its install does (hatch_build.py): with PYTHONDONTWRITEBYTECODE
    set, a module edited since the install would otherwise be compiled again in every process timed."""
    import compileall

    import pisces

    package = os.path.dirname(os.path.abspath(pisces.__file__))
    if os.access(package, os.W_OK) and not compileall.compile_dir(package, quiet=1):
        log(f"bytecode: some modules of {package} did not compile; start-up figures include compiling them")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    only = [m.strip() for m in args.only.split(",")] if args.only else list(MODULES)
    unknown = [m for m in only if m not in MODULES]
    if unknown:
        raise SystemExit(f"unknown module(s) {', '.join(unknown)}: choose from {', '.join(MODULES)}")
    sizes = Sizes(**as_dict(TINY if args.tiny else FULL))
    rounds = args.rounds or (1 if args.tiny else 2 if args.quick else 5)
    tmp = Path(tempfile.mkdtemp(prefix="pisces-bench-"))
    cfg = Config(sizes=sizes, rounds=rounds, quick=args.quick or args.tiny, with_pi=not args.no_pi, tmp=tmp)
    res = Results()
    started = time.time()
    date = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    pi_status = "--no-pi"
    if cfg.with_pi and (RPC_MODULES | {"tui"}) & set(only):
        cfg.pi_cli, why = find_pi(cfg.log)
        pi_status = cfg.pi_cli or why
        if why:
            res.notes.append(f"pi not run: {why}")
            cfg.log(f"pi not run: {why}")
    _compile_package(cfg.log)
    harness = None
    from benchmarks.workloads import Workloads

    wl = Workloads(tmp / "workloads", sizes, cfg.log)
    try:
        if RPC_MODULES & set(only):
            try:
                from benchmarks.bench_rpc import RpcHarness

                harness = RpcHarness(cfg, res)
            except Exception as exc:
                res.notes.append(f"RPC figures not measured: {type(exc).__name__}: {exc}")
                cfg.log(res.notes[-1])
        for name in only:
            t = time.time()
            try:
                run_module(name, cfg, res, wl, harness)
            except Exception as exc:
                msg = f"{name}: {type(exc).__name__}: {exc}"
                res.notes.append(msg)
                res.not_measured.append({"figure": name, "side": "both", "why": msg})
                cfg.log(msg)
            cfg.log(f"{name}: {time.time() - t:.1f} s")
    finally:
        if harness is not None:
            harness.close()
        shutil.rmtree(tmp, ignore_errors=True)
    data = to_json(res, date=date, seconds=round(time.time() - started, 1), machine=machine_info(),
                   args={"quick": args.quick, "tiny": args.tiny, "rounds": rounds, "no_pi": args.no_pi,
                         "only": only},
                   sizes=as_dict(sizes), pi={"version": "0.73.1", "cli": cfg.pi_cli, "status": pi_status})
    out = Path(args.json) if args.json else RESULTS_DIR / f"bench-{date.replace(':', '').replace('+0000', 'Z')}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    data["json_path"] = str(out)
    print(format_table(data))
    for note in res.notes:
        print(f"note: {note}")
    print(f"JSON: {out}")
    return data


if __name__ == "__main__":
    main()
    sys.exit(0)
