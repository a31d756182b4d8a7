"""MCP start-up: spawn -> first ``get_state`` of ``pisces --mode rpc`` with no MCP configuration and with three
stdio servers configured (the Python SDK test server of tests/core/mcp/servers.py), and, for the latter, spawn
-> all three connected (polling ``mcp_status``). Medians of ``--rounds`` runs. Nothing here asserts a timing.

    python -m benchmarks.bench_mcp [--rounds N]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

from benchmarks.bench_rpc import _read_until, _spawn, _wait

SERVER = os.path.join(os.path.dirname(__file__), "..", "tests", "core", "mcp", "servers.py")


def _once(home: str, cwd: str, script: str, with_mcp: bool) -> tuple[float, float | None]:
    t0 = time.perf_counter()
    p = _spawn(["--faux-script", script, "--no-session"], home, cwd)
    assert p.stdin is not None
    p.stdin.write(b'{"id":"s","type":"get_state"}\n')
    p.stdin.flush()
    _read_until(p, lambda fr: fr.get("id") == "s")
    first = (time.perf_counter() - t0) * 1000
    connected = None
    if with_mcp:
        for i in range(600):
            p.stdin.write(json.dumps({"id": f"m{i}", "type": "mcp_status"}).encode() + b"\n")
            p.stdin.flush()
            last: dict = {}

            def is_status(fr: dict, i: int = i, last: dict = last) -> bool:
                last.update(fr)
                return fr.get("id") == f"m{i}"

            _read_until(p, is_status)
            servers = last["data"]["servers"]
            if all(s["status"] == "connected" for s in servers):
                connected = (time.perf_counter() - t0) * 1000
                break
            time.sleep(0.02)
    _wait(p)
    return first, connected


def run(rounds: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        home, cwd = os.path.join(tmp, "home"), os.path.join(tmp, "work")
        agent = os.path.join(home, ".pisces", "agent")
        os.makedirs(cwd)
        os.makedirs(agent)
        script = os.path.join(tmp, "script.json")
        with open(script, "w") as f:
            json.dump([], f)
        out: dict = {}
        for label, with_mcp in (("none", False), ("three_stdio_servers", True)):
            path = os.path.join(agent, "mcp.json")
            if with_mcp:
                servers = {f"s{i}": {"command": sys.executable, "args": [os.path.abspath(SERVER), "good"]}
                           for i in range(3)}
                with open(path, "w") as f:
                    json.dump({"mcpServers": servers}, f)
            elif os.path.exists(path):
                os.unlink(path)
            _once(home, cwd, script, with_mcp)  # file cache, not counted
            runs = [_once(home, cwd, script, with_mcp) for _ in range(rounds)]
            out[f"spawn_to_get_state_ms_{label}"] = round(statistics.median(r[0] for r in runs), 1)
            if with_mcp:
                out[f"spawn_to_all_connected_ms_{label}"] = round(statistics.median(r[1] or 0 for r in runs), 1)
        out["ratio_get_state_three_vs_none"] = round(out["spawn_to_get_state_ms_three_stdio_servers"]
                                                     / out["spawn_to_get_state_ms_none"], 2)
        return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    print(json.dumps(run(ap.parse_args().rounds), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
