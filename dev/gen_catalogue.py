"""Generate pisces' built-in model catalogue from pi's published model list.

    python dev/gen_catalogue.py [--version 0.73.1] [--package-dir DIR]

pi (the ``@mariozechner/pi-ai`` npm package) ships a model list generated from models.dev's data. This script
fetches that package with ``npm pack`` (or reads an unpacked one given with ``--package-dir``), asks ``node``
to print the list and the key variables as JSON (the facts: ids, names, prices, windows, base URLs, compat
flags; none of pi's code is copied), and writes:

- ``src/pisces/ai/catalogue.jsonl``: JSON lines, read on first use by ``pisces.ai.catalogue``: line 1 is the index
  (source, and per provider its api, base URL, key variables and the byte offset and length of its line), then
  one line per provider holding its models, so that finding one model reads the index and one line;
- ``tests/ai/data/pi_model_ids.txt``: ``provider/id`` per line, what the catalogue test compares against.

Needs ``npm`` and ``node`` on PATH (only for this script; pisces itself never runs node).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "src" / "pisces" / "ai" / "catalogue.jsonl"
IDS = ROOT / "tests" / "ai" / "data" / "pi_model_ids.txt"
PACKAGE = "@mariozechner/pi-ai"

# node prints {"models": MODELS, "env": {provider: [VAR, ...]}}. The key variables are not exported as a
# table, so every *_KEY / *_TOKEN name in env-api-keys.js is set to a dummy value and findEnvKeys (which
# returns the set ones, in pi's order of preference) is asked per provider.
_NODE = r"""
const dist = process.argv[1];
const fs = await import("node:fs");
const { MODELS } = await import(dist + "/models.generated.js");
const src = fs.readFileSync(dist + "/env-api-keys.js", "utf8");
for (const name of new Set(src.match(/\b[A-Z][A-Z0-9_]*_(?:KEY|TOKEN)\b/g))) process.env[name] = "x";
const { findEnvKeys } = await import(dist + "/env-api-keys.js");
const env = {};
for (const p of Object.keys(MODELS)) env[p] = findEnvKeys(p) || [];
process.stdout.write(JSON.stringify({ models: MODELS, env }));
"""

# Fields of a model stored per model; api and baseUrl are stored per provider when all its models agree.
_FIELDS = ("id", "name", "api", "baseUrl", "reasoning", "thinkingLevelMap", "input", "cost", "contextWindow",
           "maxTokens", "headers", "compat")


def _dump(dist: Path) -> dict:
    out = subprocess.run(["node", "--input-type=module", "-e", _NODE, str(dist)], check=True,
                         capture_output=True, text=True)
    return json.loads(out.stdout)


def _fetch(version: str, tmp: str) -> Path:
    subprocess.run(["npm", "pack", f"{PACKAGE}@{version}", "--silent"], cwd=tmp, check=True,
                   capture_output=True)
    tgz = next(Path(tmp).glob("*.tgz"))
    subprocess.run(["tar", "xzf", tgz.name], cwd=tmp, check=True)
    return Path(tmp) / "package"


def build(data: dict, version: str) -> dict:
    providers = {}
    for pname, models in data["models"].items():
        rows = list(models.values())
        apis = {m["api"] for m in rows}
        bases = {m["baseUrl"] for m in rows}
        common: dict = {}
        if len(apis) == 1:
            common["api"] = next(iter(apis))
        if len(bases) == 1:
            common["baseUrl"] = next(iter(bases))
        out_models = []
        for m in rows:
            entry = {}
            for f in _FIELDS:
                if f in m and m[f] is not None and not (f in common and common[f] == m[f]):
                    entry[f] = m[f]
            c = entry.get("cost")
            if c is not None:  # [input, output, cacheRead, cacheWrite], dollars per million tokens
                entry["cost"] = [c.get("input", 0), c.get("output", 0), c.get("cacheRead", 0), c.get("cacheWrite", 0)]
            out_models.append(entry)
        providers[pname] = {**common, "env": data["env"].get(pname, []), "models": out_models}
    return {"source": f"{PACKAGE}@{version} (models.generated.js, from models.dev)", "providers": providers}


def _line(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"


def serialize(cat: dict) -> bytes:
    """The file: the index line, then one line of models per provider (offsets count from the file's start,
    so the index's own length, which holds them, is found by a fixed point: offsets change its width)."""
    lines = [_line(conf["models"]) for conf in cat["providers"].values()]
    head_len = 0
    while True:
        at, index = head_len, {}
        for (name, conf), line in zip(cat["providers"].items(), lines, strict=True):
            index[name] = {k: v for k, v in conf.items() if k != "models"} | {"at": at, "len": len(line)}
            at += len(line)
        head = _line({"source": cat["source"], "providers": index})
        if len(head) == head_len:
            return head + b"".join(lines)
        head_len = len(head)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--version", default="0.73.1")
    ap.add_argument("--package-dir", help="an unpacked package (its folder holding dist/)")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        pkg = Path(args.package_dir) if args.package_dir else _fetch(args.version, tmp)
        data = _dump((pkg / "dist").resolve())
    cat = build(data, args.version)
    OUT.write_bytes(serialize(cat))
    IDS.parent.mkdir(parents=True, exist_ok=True)
    ids = sorted(f"{p}/{m['id']}" for p, conf in cat["providers"].items() for m in conf["models"])
    IDS.write_text(f"# {PACKAGE}@{args.version}: provider/id of every model (dev/gen_catalogue.py)\n"
                   + "\n".join(ids) + "\n")
    print(f"{len(cat['providers'])} providers, {len(ids)} models -> {OUT.relative_to(ROOT)} "
          f"({OUT.stat().st_size} bytes), {IDS.relative_to(ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
