"""MCP: what configured servers cost a session.

1. Start-up: spawn -> first ``get_state`` of ``pisces --mode rpc`` with no MCP configuration (the reference) and
   with three stdio servers configured (the Python SDK test server of tests/core/mcp/servers.py), alternating;
   the detail gives spawn -> all three connected (polling ``mcp_status``).
2. Context: the first request's body on the wire (bytes, as the benchmarks' scripted OpenAI-wire LLM receives
   it) with one server of 80 tools shaped like a hosted service's, deferred behind ``mcp_tool_search`` (the
   default threshold) against all loaded (``toolSearch.thresholdTokens`` very high, the reference).

    python -m benchmarks --only mcp          (in the runner's table)
    python -m benchmarks.bench_mcp [--rounds N]

Nothing here asserts a timing.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import urllib.request
from typing import Any

from benchmarks.bench_rpc import ScriptedLLM, _read_until, _spawn, _wait

SERVER = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "tests", "core", "mcp", "servers.py"))
TOOLS = 80


def _ask(p: Any, cmd: dict) -> dict:
    assert p.stdin is not None
    p.stdin.write(json.dumps(cmd).encode() + b"\n")
    p.stdin.flush()
    last: dict = {}

    def mine(fr: dict) -> bool:
        last.clear()
        last.update(fr)
        return fr.get("id") == cmd["id"]

    _read_until(p, mine)
    return last


def _until_connected(p: Any, t0: float) -> float | None:
    for i in range(3000):
        servers = _ask(p, {"id": f"m{i}", "type": "mcp_status"})["data"]["servers"]
        if servers and all(s["status"] == "connected" for s in servers):
            return (time.perf_counter() - t0) * 1000
        if any(s["status"] == "failed" for s in servers):
            return None
        time.sleep(0.02)
    return None


def _once(home: str, cwd: str, script: str, with_mcp: bool) -> tuple[float, float | None]:
    t0 = time.perf_counter()
    p = _spawn(["--faux-script", script, "--no-session"], home, cwd)
    _ask(p, {"id": "s", "type": "get_state"})
    first = (time.perf_counter() - t0) * 1000
    connected = _until_connected(p, t0) if with_mcp else None
    _wait(p)
    return first, connected


def _write_mcp(agent: str, servers: dict | None, extra: dict | None = None) -> None:
    path = os.path.join(agent, "mcp.json")
    if servers is None:
        if os.path.exists(path):
            os.unlink(path)
        return
    with open(path, "w") as f:
        json.dump({"mcpServers": servers, **(extra or {})}, f)


def startup(rounds: int) -> dict[str, list[float]]:
    """Alternating rounds: no MCP, three servers. Samples in ms."""
    out: dict[str, list[float]] = {"none": [], "three": [], "connected": []}
    three = {f"s{i}": {"command": sys.executable, "args": [SERVER, "good"]} for i in range(3)}
    with tempfile.TemporaryDirectory() as tmp:
        home, cwd = os.path.join(tmp, "home"), os.path.join(tmp, "work")
        agent = os.path.join(home, ".pisces", "agent")
        os.makedirs(cwd)
        os.makedirs(agent)
        script = os.path.join(tmp, "script.json")
        with open(script, "w") as f:
            json.dump([], f)
        for with_mcp in (False, True):  # warm the file cache, not counted
            _write_mcp(agent, three if with_mcp else None)
            _once(home, cwd, script, with_mcp)
        for _ in range(rounds):
            for with_mcp in (False, True):
                _write_mcp(agent, three if with_mcp else None)
                first, connected = _once(home, cwd, script, with_mcp)
                out["three" if with_mcp else "none"].append(first)
                if connected is not None:
                    out["connected"].append(connected)
    return out


def first_request_bytes(deferred: bool) -> dict[str, Any]:
    """The first completion request of a session with one 80-tool server, on the wire."""
    from benchmarks._agent import write_agent_config

    llm = ScriptedLLM()
    try:
        llm.set_script([{"text": "ok"}])
        with tempfile.TemporaryDirectory() as tmp:
            home, cwd = os.path.join(tmp, "home"), os.path.join(tmp, "work")
            os.makedirs(cwd)
            write_agent_config(home, llm.port)
            agent = os.path.join(home, ".pisces", "agent")
            threshold = {} if deferred else {"toolSearch": {"thresholdTokens": 10 ** 9}}
            _write_mcp(agent, {"gh": {"command": sys.executable, "args": [SERVER, "many", str(TOOLS)]}}, threshold)
            t0 = time.perf_counter()
            p = _spawn(["--no-session", "--provider", "scripted", "--model", "scripted-model"], home, cwd)
            if _until_connected(p, t0) is None:
                _wait(p)
                raise RuntimeError("the 80-tool server did not connect")
            _ask(p, {"id": "go", "type": "prompt", "message": "hello"})
            _read_until(p, lambda fr: fr.get("type") == "agent_end")
            _wait(p)
        with urllib.request.urlopen(f"http://127.0.0.1:{llm.port}/_requests", timeout=10) as r:
            first = json.loads(r.read())["requests"][0]
        return {"bytes": first["bytes"], "tools": first["tools"]}
    finally:
        llm.close()


def run(cfg: Any, res: Any) -> None:
    from benchmarks._common import Figure

    rounds = max(cfg.rounds, 3)
    cfg.log(f"mcp: spawn -> get_state without MCP and with 3 stdio servers ({rounds} alternating rounds)")
    s = startup(rounds)
    res.add(Figure("mcp_startup_three_servers_ms", "spawn -> get_state, 3 MCP servers vs none", "ms", s["three"],
                   ref=s["none"], ref_name="no MCP",
                   detail={"spawn_to_all_connected_ms": statistics.median(s["connected"]) if s["connected"]
                           else None}))
    cfg.log(f"mcp: first request with {TOOLS} MCP tools, deferred vs loaded")
    d, n = first_request_bytes(True), first_request_bytes(False)
    res.add(Figure("mcp_first_request_80_tools_bytes", f"first request body, {TOOLS} MCP tools deferred vs loaded",
                   "bytes", [float(d["bytes"])], ref=[float(n["bytes"])], ref_name="all loaded",
                   detail={"tools_sent_deferred": d["tools"], "tools_sent_loaded": n["tools"],
                           "estimated_tokens_deferred": d["bytes"] // 4, "estimated_tokens_loaded": n["bytes"] // 4}))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    rounds = ap.parse_args().rounds
    s = startup(rounds)
    d, n = first_request_bytes(True), first_request_bytes(False)
    out = {"rounds": rounds, "spawn_to_get_state_ms_none": round(statistics.median(s["none"]), 1),
           "spawn_to_get_state_ms_three_servers": round(statistics.median(s["three"]), 1),
           "ratio": round(statistics.median(s["three"]) / statistics.median(s["none"]), 2),
           "spawn_to_all_connected_ms": round(statistics.median(s["connected"]), 1) if s["connected"] else None,
           "first_request_deferred": d, "first_request_loaded": n}
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
