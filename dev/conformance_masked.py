#!/usr/bin/env python3
"""Re-compare the last conformance run with token counts masked.

The scripted LLM of ../shared/conformance derives ``prompt_tokens`` from the size of the request, and the
request carries the system prompt, which pisces writes in its own words. So every usage, cost and context
figure that follows from an estimated prompt differs from pi's, and check.sh reports the first such figure.
This masks those numbers on both sides (only the numbers: keys and everything else still count) and runs
the kit's own comparison again, to show what else differs.

    ../shared/conformance/check.sh "pisces --mode rpc"; python3 dev/conformance_masked.py
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

KIT = Path(__file__).resolve().parents[1].parent / "shared" / "conformance"
sys.path.insert(0, str(KIT))
import compare  # noqa: E402  (the kit's module, used as is)

MASK_KEYS = {"usage", "cost", "contextUsage", "tokens", "tokensBefore"}


def mask(obj):
    if isinstance(obj, dict):
        return {k: ("<n>" if k in MASK_KEYS else mask(v)) for k, v in obj.items()}
    if isinstance(obj, list):
        return [mask(x) for x in obj]
    return obj


def rewrite(src: Path, dst: Path) -> None:
    with src.open(encoding="utf-8") as f, dst.open("w", encoding="utf-8") as out:
        for line in f:
            rec = json.loads(line)
            try:
                rec["line"] = json.dumps(mask(json.loads(rec["line"])), ensure_ascii=False)
            except json.JSONDecodeError:
                pass
            out.write(json.dumps(rec) + "\n")


def main() -> int:
    cand = Path(os.environ.get("OUT", "/tmp/pi-drive/candidate"))
    ref = KIT / "pi-0.73.1"
    with tempfile.TemporaryDirectory() as tmp:
        r, c = Path(tmp, "ref"), Path(tmp, "cand")
        r.mkdir(), c.mkdir()
        names = sorted(p.name for p in cand.glob("*.transcript.jsonl"))
        for name in names:
            rewrite(ref / name, r / name)
            rewrite(cand / name, c / name)
        ok = 0
        for name in names:
            ok += compare.compare(r / name, c / name, "/tmp/pi-drive/home", "/tmp/pi-drive/home", True, 3)
        print(f"{ok} passed, {len(names) - ok} failed (token figures masked)")
    return 0 if ok == len(names) else 1


if __name__ == "__main__":
    raise SystemExit(main())
