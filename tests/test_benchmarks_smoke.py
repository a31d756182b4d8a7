"""The benchmark runner's quickest path, in process, on tiny workloads: the JSON has the expected shape.

Timings are never asserted; only that every figure was produced with samples and the facts around them.
"""

from __future__ import annotations

import json
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def runner():
    sys.path.insert(0, ROOT)
    try:
        from benchmarks.__main__ import main

        yield main
    finally:
        sys.path.remove(ROOT)


def test_runner_tiny_json_has_expected_keys(runner, tmp_path, capsys):
    out = tmp_path / "bench.json"
    # providers' import timings start fresh interpreters that import every SDK: too slow for a smoke test
    data = runner(["--tiny", "--no-pi", "--rounds", "1", "--json", str(out),
                   "--only", "rpc,sessions,grep_find,compaction,export"])
    saved = json.loads(out.read_text())
    assert saved["date"] and saved["figures"]
    assert {"nproc", "cpu", "python", "node"} <= set(saved["machine"])
    assert saved["sizes"]["words"] == 50 and saved["args"]["rounds"] == 1
    assert set(data["figures"]) == set(saved["figures"])
    # every figure that does not compare with pi comes from the repository alone (no ../shared needed)
    expected = {"list_sessions_ms", "session_open_ms", "grep_ms", "find_ms", "compaction_prepare_ms",
                "export_file_ms", "rpc_startup_ms", "rpc_idle_rss_kib", "rpc_reply_ms", "rpc_reply_after_idle_ms",
                "rpc_stdout_bytes", "rpc_stdout_bytes_lean", "rpc_stdout_bytes_deltas", "rpc_rss_after_reply_kib",
                "rpc_switch_session_ms", "rpc_export_html_ms", "rpc_compact_ms", "rpc_grep_tool_ms",
                "rpc_reply_warm_ms", "rpc_reader_floor_ms"}
    assert expected <= set(saved["figures"]), sorted(expected - set(saved["figures"]))
    for key in expected:
        fig = saved["figures"][key]
        assert {"label", "unit", "pisces", "ref", "reference", "ratio", "ref_missing", "detail"} <= set(fig)
        assert fig["pisces"]["n"] >= 1 and len(fig["pisces"]["samples"]) == fig["pisces"]["n"]
    assert saved["figures"]["rpc_startup_ms"]["ref"] is None  # --no-pi: pi's side is n/a, with the reason
    assert saved["figures"]["rpc_startup_ms"]["ref_missing"] == "--no-pi"
    # the deltas profile's stdout is a fraction of the full profile's, even for a 50-chunk reply
    assert saved["figures"]["rpc_stdout_bytes_deltas"]["detail"]["of_full_profile"] < 0.5
    assert "not_measured" in saved and "notes" in saved
    table = capsys.readouterr().out
    assert "pisces/pi" in table and "n/a" in table
    # the reader alone, on the frames of a second reply, was measured; its pi side says why it is missing
    assert saved["figures"]["rpc_reader_floor_ms"]["ref_missing"] == "--no-pi"


def test_reader_keeps_sizes_and_slims_snapshots(runner, tmp_path):
    """The benchmarks' reader parses every frame, keeps each one's size and arrival, keeps message_update
    frames without their snapshots, and copies the bytes to ``tee`` unchanged."""
    from benchmarks import _agent

    snapshot = {"role": "assistant", "content": [{"type": "text", "text": "é" * 50}]}
    frames = [{"type": "agent_start"},
              {"type": "message_update", "message": snapshot,
               "assistantMessageEvent": {"type": "text_delta", "contentIndex": 0, "delta": "é", "partial": snapshot}},
              {"type": "agent_end", "messages": [snapshot]}]
    data = b"".join(json.dumps(f, ensure_ascii=False).encode() + b"\n" for f in frames) + b"not json\n"
    src, tee = tmp_path / "frames.jsonl", tmp_path / "tee.jsonl"
    src.write_bytes(data)
    a = _agent.Agent(["cat", str(src)], tmp_path, dict(os.environ), tee=str(tee))
    try:
        a.wait(lambda o: "__unparsed__" in o, 30)
    finally:
        a.close()
    assert [o.get("type") for o in a.out[:3]] == ["agent_start", "message_update", "agent_end"]
    assert a.out[1] == {"type": "message_update",
                        "assistantMessageEvent": {"type": "text_delta", "contentIndex": 0, "delta": "é"}}
    assert a.out[2]["messages"] == [snapshot]  # every other frame is kept whole
    assert a.out[3] == {"__unparsed__": "not json"}
    assert sum(r["bytes"] for r in a.records if r["dir"] == "out") == len(data)
    assert tee.read_bytes() == data


def test_provider_event_cost_runs(runner):
    import asyncio

    from benchmarks.bench_providers import per_event_costs

    costs = asyncio.run(per_event_costs(20, 1))
    assert set(costs) == {"openai-completions", "openai-responses", "anthropic-messages", "google-generative-ai",
                          "openai-completions (direct)", "openai-responses (direct)", "anthropic-messages (direct)",
                          "google-generative-ai (direct)", "faux"}
    for name, r in costs.items():
        assert "error" not in r, f"{name}: {r.get('error')}"
        assert r["events"] >= 20 and len(r["samples_ms"]) == 1


def test_web_fan_out_runs(runner, tmp_path):
    """The web rows on a tiny reply: every figure has samples, and bytes per client grow with the reply."""
    from benchmarks._common import Config, Results, Sizes
    from benchmarks.bench_web import run

    cfg = Config(sizes=Sizes(words=60), rounds=1, tmp=tmp_path, log=lambda msg: None)
    res = Results()
    run(cfg, res)
    figures = {f.key: f for f in res.figures}
    fan_out = {"web_fanout_1_reply_ms", "web_fanout_10_reply_ms", "web_fanout_1_server_cpu_ms",
               "web_fanout_10_server_cpu_ms", "web_fanout_bytes_per_client"}
    first = {"web_first_prompt_bubble_ms", "web_first_prompt_token_ms"}  # in headless Chromium, when there is one
    assert set(figures) in (fan_out | first, fan_out), set(figures)
    if set(figures) == fan_out:
        assert any("first prompt: not measured" in n for n in res.notes)
    assert all(f.pisces for f in res.figures)
    per_client = figures["web_fanout_bytes_per_client"]
    assert per_client.pisces[0] > per_client.ref[0] > 0  # 60 chunks send more than 30


def test_tui_bench_runs(runner, tmp_path):
    """The TUI rows on tiny workloads, pisces only: every figure has samples (a pseudo-terminal, the scripted
    LLM, a resumed session of 202 entries)."""
    from benchmarks._common import TINY, Config, Results
    from benchmarks.bench_tui import run
    from benchmarks.workloads import Workloads

    cfg = Config(sizes=TINY, rounds=1, tmp=tmp_path, with_pi=False, quick=True, log=lambda msg: None)
    res = Results()
    run(cfg, res, Workloads(tmp_path / "wl", TINY))
    figures = {f.key: f for f in res.figures}
    assert set(figures) == {"tui_spawn_ms", "tui_spawn_cpu_ms", "tui_reply_cpu_ms", "tui_resume_ms",
                            "tui_resume_cpu_ms", "tui_idle_wakeups", "tui_idle_cpu_ms", "tui_delta_us_1k",
                            "tui_delta_us_100k"}
    assert all(f.pisces for f in res.figures), [(f.key, f.detail) for f in res.figures if not f.pisces]
    assert all(f.ref is None and f.ref_missing for f in res.figures)  # --no-pi says why pi is missing


def test_long_session_bench_runs(runner, tmp_path):
    """The long-session rows on 12 prompts, pisces only: CPU, wall minus the server's time and RSS at prompts
    1, 6 and 12 for the scripted LLM and the faux model, every prompt a tool call and a reply, no error; and the
    long session's CPU over fresh sessions' (restarted every second prompt), prompts alternating."""
    from benchmarks._common import Config, Results
    from benchmarks.bench_long_session import EQUAL_WAIT_MS, run
    from benchmarks.bench_rpc import RpcHarness

    cfg = Config(rounds=1, tmp=tmp_path, with_pi=False, log=lambda msg: None)
    res = Results()
    harness = RpcHarness(cfg, res)
    try:
        run(cfg, res, None, harness, prompts=12)
    finally:
        harness.close()
    figures = {f.key: f for f in res.figures}
    points = (1, 6, 12)
    expected = {f"long_llm_{m}_{p}" for m in ("cpu", "wall", "rss") for p in points}
    expected |= {f"long_faux_{m}_{p}" for m in ("cpu", "rss") for p in points}
    expected |= {"long_llm_total_cpu", "long_faux_total_cpu"}
    expected |= {f"long_llm_vs_fresh_{p}" for p in points}  # against fresh sessions, prompts alternating
    expected |= {f"long_llm_vs_fresh_equal_wait_{p}" for p in points}  # the same, every reply after a wait
    assert set(figures) == expected, set(figures) ^ expected
    fresh = figures["long_llm_vs_fresh_12"].detail
    assert fresh["fresh_prompts"] == [1, 2] and fresh["long_cpu_ms"] > 0 and fresh["fresh_cpu_ms"] > 0
    assert "requests" not in fresh
    waited = figures["long_llm_vs_fresh_equal_wait_12"].detail
    assert waited["fresh_prompts"] == [1, 2] and waited["long_cpu_ms"] > 0
    assert waited["requests"] == 4 * 12 and 0 < waited["server_work_ms_max"]  # two requests a prompt, each side
    assert waited["server_ms_min"] >= EQUAL_WAIT_MS  # no reply came sooner than the wait
    assert all(f.pisces and f.pisces[0] > 0 for f in res.figures)
    assert figures["long_llm_total_cpu"].detail["errors"] == {"pisces": [[]], "pi": []}
    assert figures["long_faux_total_cpu"].detail["errors"] == {"pisces": [[]], "pi": []}
    # every request carries the whole context: the body at prompt 12 is larger than at prompt 1
    at = {p: figures[f"long_llm_cpu_{p}"].detail["pisces"][0] for p in points}
    assert at[12]["body_bytes"] > at[1]["body_bytes"] > 0
