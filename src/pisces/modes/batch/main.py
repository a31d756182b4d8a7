"""The batch runner: reads the manifest, skips what ``results.jsonl`` already holds, runs the rest through the
chosen executor with a progress display, records each result as it finishes, prints a summary table.

Exit status: 0 when every item succeeded, 1 when any failed (or the total budget stopped the run), 2 for a bad
manifest or flags, 130 on Ctrl+C (the items that finished are recorded; the interrupted ones are not, and run
again on the next invocation).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
from typing import Any

from pisces.core.executor import make_executor
from pisces.core.executor.spec import ItemSpec, ManifestError, RunDefaults, read_manifest
from pisces.modes.batch.progress import Progress, summary_table
from pisces.modes.batch.results import ResultsDir

RUN_FLAGS = ("provider", "model", "thinking", "tools", "faux_script", "approval_mode")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="pisces batch", description="Run one prompt per repository over a manifest "
                                "(one JSON object a line; docs/batch.md).")
    p.add_argument("manifest", help="the manifest: {id, repo, prompt | prompt_file, ...} per line")
    p.add_argument("--out", default="batch-out", help="the output directory (results.jsonl, patches/, sessions/)")
    p.add_argument("--parallel", type=int, default=2, help="items at once (default 2)")
    p.add_argument("--executor", choices=("local", "ray"), default="local", help="where items run")
    p.add_argument("--ray-address", default=None, help="a Ray cluster to join (default: start a local one)")
    p.add_argument("--index", type=int, default=None, help="run only the item at this 0-based index "
                   "(a Kubernetes pod's $JOB_COMPLETION_INDEX)")
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds per item unless it says (default 1800)")
    p.add_argument("--max-cost", type=float, default=None, help="stop starting items once this many US dollars "
                   "are spent in all")
    p.add_argument("--fail-fast", action="store_true", help="stop at the first item that does not succeed")
    p.add_argument("--plain", action="store_true", help="a line per finished item, even on a terminal")
    p.add_argument("--emit", choices=("k8s",), default=None, help="print a Kubernetes Indexed Job instead of running")
    p.add_argument("--image", default="python:3.11-slim", help="--emit k8s: the pods' image")
    p.add_argument("--install", default="pip install --quiet pisces-agent",
                   help="--emit k8s: the command that installs pisces in the pod ('' when the image has it)")
    p.add_argument("--job-name", default="pisces-batch", help="--emit k8s: the Job's name")
    p.add_argument("--namespace", default=None, help="--emit k8s: the namespace")
    p.add_argument("--results-claim", default="pisces-batch-results",
                   help="--emit k8s: the PersistentVolumeClaim the pods write their results to")
    p.add_argument("--secret", default=None, help="--emit k8s: a Secret whose keys become the pods' environment "
                   "(API keys)")
    # the run flags pisces already takes, for every item unless it overrides them
    p.add_argument("--provider")
    p.add_argument("--model")
    p.add_argument("--thinking")
    p.add_argument("--tools")
    p.add_argument("--faux-script", dest="faux_script")
    p.add_argument("--approval-mode", dest="approval_mode")
    return p


def _run_flags(args: argparse.Namespace) -> list[str]:
    flags: list[str] = []
    for dest in RUN_FLAGS:
        value = getattr(args, dest)
        if value:
            flags += ["--" + dest.replace("_", "-"), value]
    return flags


def run_batch(argv: list[str]) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.parallel < 1:
        parser.error("--parallel must be at least 1")
    try:
        items = read_manifest(args.manifest)
    except ManifestError as exc:
        sys.stderr.write(f"pisces batch: {exc}\n")
        return 2
    if args.emit == "k8s":
        return _emit(args, items)
    if args.index is not None:
        if not 0 <= args.index < len(items):
            sys.stderr.write(f"pisces batch: --index {args.index} is outside the manifest's "
                             f"{len(items)} items (0 to {len(items) - 1})\n")
            return 2
        items = [items[args.index]]
    faux = os.path.abspath(args.faux_script) if args.faux_script else None
    defaults = RunDefaults(provider=args.provider or ("faux" if faux else None), model=args.model,
                           thinking=args.thinking, tools=args.tools, faux_script=faux,
                           approval_mode=args.approval_mode, timeout=args.timeout)
    return asyncio.run(_run(args, items, defaults))


def _emit(args: argparse.Namespace, items: list[ItemSpec]) -> int:
    from pisces.modes.batch.k8s import dumps, emit  # noqa: PLC0415 - only --emit k8s needs it

    with open(args.manifest, encoding="utf-8") as f:
        text = f.read()
    try:
        doc = emit(items, text, _run_flags(args), name=args.job_name, image=args.image, install=args.install,
                   parallel=args.parallel, results_claim=args.results_claim, secret=args.secret,
                   namespace=args.namespace)
    except ValueError as exc:
        sys.stderr.write(f"pisces batch: {exc}\n")
        return 2
    sys.stdout.write(dumps(doc))
    return 0


async def _run(args: argparse.Namespace, items: list[ItemSpec], defaults: RunDefaults) -> int:
    out = ResultsDir(args.out)
    todo = [i for i in items if i.id not in out.done]
    progress = Progress(len(items), len(items) - len(todo), plain=True if args.plain else None)
    if len(todo) < len(items):
        progress.note(f"pisces batch: {len(items) - len(todo)} of {len(items)} items are already in "
                      f"{out.file}: skipping them")
    try:
        executor = make_executor(args.executor, parallel=args.parallel, ray_address=args.ray_address)
    except (RuntimeError, ValueError) as exc:
        sys.stderr.write(f"pisces batch: {exc}\n")
        return 2
    stop_reason: str | None = None
    spent = sum(float(r.get("cost") or 0) for r in out.done.values())
    interrupted = False
    loop = asyncio.get_running_loop()
    main = asyncio.current_task()

    def on_sigint() -> None:
        nonlocal interrupted
        interrupted = True
        if main is not None:
            main.cancel()

    with contextlib.suppress(NotImplementedError, RuntimeError):
        loop.add_signal_handler(signal.SIGINT, on_sigint)
        loop.add_signal_handler(signal.SIGTERM, on_sigint)
    queue = list(todo)
    running: set[asyncio.Task[dict[str, Any]]] = set()

    async def one(spec: ItemSpec) -> dict[str, Any]:
        progress.started_item()
        return await executor.submit(spec, defaults)

    try:
        while queue or running:
            while queue and stop_reason is None and len(running) < args.parallel:
                running.add(asyncio.create_task(one(queue.pop(0))))
            if not running:
                break
            finished, _ = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
            for task in finished:
                running.discard(task)
                row = out.record(task.result())
                progress.finished(row)
                spent += float(row.get("cost") or 0)
                if args.fail_fast and row["status"] != "succeeded" and stop_reason is None:
                    stop_reason = f"--fail-fast: {row['id']} {row['status']}"
                if args.max_cost is not None and spent >= args.max_cost and stop_reason is None:
                    stop_reason = f"--max-cost: ${spent:.4f} spent of ${args.max_cost:g}"
            if stop_reason and args.fail_fast:
                for task in running:
                    task.cancel()
                await asyncio.gather(*running, return_exceptions=True)
                running.clear()
    except asyncio.CancelledError:
        for task in running:
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)
        if not interrupted:
            raise
    finally:
        progress.close()
        out.close()
        await executor.close()
    rows = [out.done[i.id] for i in items if i.id in out.done]
    sys.stderr.write(summary_table(rows) + "\n")
    if interrupted:
        sys.stderr.write(f"pisces batch: interrupted; {len(queue) + len(running)} items not recorded "
                         f"(run the same command again to do them)\n")
        return 130
    if stop_reason:
        sys.stderr.write(f"pisces batch: stopped ({stop_reason}); {len(queue)} items not started\n")
    failed = any(r["status"] != "succeeded" for r in rows)
    return 1 if failed or stop_reason else 0
