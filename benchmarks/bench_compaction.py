"""Compaction preparation on a 200k-token session: everything a compaction does before asking the model.

    python -m benchmarks.bench_compaction [--tokens 200000] [--reps 5] [--no-pi]

The timed step is what ``Compactor`` runs before its LLM call: the branch (root to leaf),
``prepare_compaction`` (context token estimate, cut point, the messages to summarise, file operations) and
``serialize_conversation`` of those messages into the summarisation prompt. No LLM is called.

With the runner, the same session is also compacted through RPC ``compact`` by pisces and pi alternating,
the summary coming from the scripted LLM on 127.0.0.1, in a process that has answered one prompt already
(so the provider SDK is loaded): that figure includes the HTTP round trip with the serialised conversation
and writing the compaction entry. Prints numbers; asserts nothing.
"""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make ``benchmarks`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pisces.core.compaction import prepare_compaction, prompts, serialize_conversation
from pisces.core.store import SessionManager, convert_to_llm

KEEP_RECENT_TOKENS = 20000  # the settings default (compaction.keepRecentTokens)


def prepare(sm: SessionManager, keep_recent_tokens: int = KEEP_RECENT_TOKENS) -> dict:
    """One preparation, with the time of each step in ms."""
    t0 = time.perf_counter()
    branch = sm.get_branch()
    t1 = time.perf_counter()
    prep = prepare_compaction(branch, keep_recent_tokens)
    t2 = time.perf_counter()
    assert prep is not None, "nothing to compact"
    text = serialize_conversation(convert_to_llm(prep.messages_to_summarize))
    prompt = prompts.history_prompt(text, prep.previous_summary, None)
    prefix_chars = 0
    if prep.is_split_turn and prep.turn_prefix_messages:
        prefix_chars = len(prompts.turn_prefix_prompt(
            serialize_conversation(convert_to_llm(prep.turn_prefix_messages))))
    t3 = time.perf_counter()
    return {"total_ms": (t3 - t0) * 1000, "branch_ms": (t1 - t0) * 1000, "prepare_ms": (t2 - t1) * 1000,
            "serialize_ms": (t3 - t2) * 1000, "branch_entries": len(branch),
            "messages_to_summarize": len(prep.messages_to_summarize), "tokens_before": prep.tokens_before,
            "is_split_turn": prep.is_split_turn, "prompt_chars": len(prompt) + prefix_chars}


def run(cfg, res, wl, harness=None) -> None:
    from benchmarks._common import Figure
    from benchmarks.bench_rpc import warm_up_prompt

    path, tokens = wl.compaction_session
    reps = cfg.rounds
    sm = SessionManager.open(path)
    prepare(sm)  # warm-up
    runs = [prepare(sm) for _ in range(reps)]
    sm.close()
    last = runs[-1]
    cfg.log(f"compaction: preparation on a {tokens}-token session ({reps} reps)")
    res.add(Figure("compaction_prepare_ms", f"compaction preparation, {tokens}-token session (in process)", "ms",
                   [r["total_ms"] for r in runs], ref_missing="see the RPC compact row for pi",
                   detail={"branch_ms": [r["branch_ms"] for r in runs],
                           "prepare_ms": [r["prepare_ms"] for r in runs],
                           "serialize_ms": [r["serialize_ms"] for r in runs],
                           **{k: last[k] for k in ("branch_entries", "messages_to_summarize", "tokens_before",
                                                   "is_split_turn", "prompt_chars")},
                           "estimated_tokens": tokens, "keep_recent_tokens": KEEP_RECENT_TOKENS}))
    if harness is None:
        return
    h = harness
    drive = h.drive
    counter = [0]

    def compact(spec) -> dict:
        counter[0] += 1
        copy = Path(h.tmp) / f"compact-{spec.name}-{counter[0]}.jsonl"
        shutil.copyfile(path, copy)  # compact appends to the file: a fresh copy each time
        h.llm.set_script([{"text": "ok"}] + [dict(drive.SUMMARY, label=f"summary-{i}") for i in range(3)])
        a = h.spawn(spec, wl.project)
        try:
            h.ok(a.request({"type": "get_state"}, 60))
            warm_up_prompt(h, a)  # the SDK import is the reply figures' business, not compaction's
            h.ok(a.request({"type": "switch_session", "sessionPath": str(copy)}, 120))
            h.ok(a.request({"type": "set_model", "provider": "scripted", "modelId": "scripted-model"}, 60))
            t = time.perf_counter()
            h.ok(a.request({"type": "compact"}, 300))
            ms = (time.perf_counter() - t) * 1000
        finally:
            a.close()
        copy.unlink(missing_ok=True)
        return {"ms": ms}

    cfg.log(f"compaction: RPC compact of the {tokens}-token session, scripted summary ({reps} rounds)")
    d = h.alternate(reps, compact)
    res.add(h.figure(d, "ms", "rpc_compact_ms", f"RPC compact, {tokens}-token session (scripted summary, warm)",
                     "ms"))


def main() -> int:
    import argparse
    import shutil as _sh
    import tempfile

    from benchmarks.__main__ import print_table
    from benchmarks._common import Config, Results, find_pi
    from benchmarks.bench_rpc import RpcHarness
    from benchmarks.workloads import Workloads

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokens", type=int, default=200000)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--no-pi", action="store_true", help="in process only (no RPC compact)")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="pisces-bench-"))
    cfg = Config(rounds=args.reps, with_pi=not args.no_pi, tmp=tmp)
    cfg.sizes.compaction_tokens = args.tokens
    res = Results()
    h = None
    try:
        if cfg.with_pi:
            cfg.pi_cli, _ = find_pi(cfg.log)
            h = RpcHarness(cfg, res)
        run(cfg, res, Workloads(tmp / "w", cfg.sizes, cfg.log), h)
    finally:
        if h is not None:
            h.close()
        _sh.rmtree(tmp, ignore_errors=True)
    print_table(res)
    return 0


if __name__ == "__main__":
    sys.exit(main())
