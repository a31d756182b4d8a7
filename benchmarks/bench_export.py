"""HTML export timings: a 2,000-message session (500 turns of prompt, tool call, tool result, answer).

    python benchmarks/bench_export.py [--messages 2000] [--reps 5] [--browser]

Prints the numbers; it is not a test. ``--browser`` also times headless Chromium rendering the page
(load + render, measured with --dump-dom) when ``chromium`` is on PATH.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from pisces.ai.types import (
    AssistantMessage,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from pisces.core.export_html import export_file, render_html
from pisces.core.store import SessionManager


def _turn(rng: random.Random, i: int) -> list:
    out = "\n".join(f"line {j}: " + "y" * rng.randint(10, 80) for j in range(rng.randint(5, 60)))
    answer = (f"Here is what I found in **f{i}.py**:\n\n```python\ndef f{i}(x):\n    return x * {i}\n```\n\n"
              + "- point one\n- point two\n" + "Some prose. " * rng.randint(5, 40))
    return [
        UserMessage(content=[TextContent(text=f"prompt {i}: " + "please look at the code " * rng.randint(1, 8))]),
        AssistantMessage(content=[ThinkingContent(thinking="thinking " * rng.randint(5, 50)),
                                  TextContent(text="Let me check."),
                                  ToolCall(id=f"call_{i}", name="bash", arguments={"command": f"cat f{i}.py"})],
                         api="openai-completions", provider="p", model="m",
                         usage=Usage(input=1000 + i, output=20, totalTokens=1020 + i), stopReason="toolUse"),
        ToolResultMessage(toolCallId=f"call_{i}", toolName="bash", content=[TextContent(text=out)]),
        AssistantMessage(content=[TextContent(text=answer)], api="openai-completions", provider="p", model="m",
                         usage=Usage(input=2000 + i, output=200, totalTokens=2200 + i)),
    ]


def build_session(cwd: str, session_dir: str, messages: int, rng: random.Random) -> SessionManager:
    """A session of ``messages`` messages (turns of four), written by SessionManager into ``session_dir``."""
    sm = SessionManager.create(cwd, session_dir)
    sm.append_model_change("p", "m")
    for i in range(messages // 4):
        for message in _turn(rng, i):
            sm.append_message(message)
    return sm


def run(cfg, res, wl, harness=None) -> None:
    """The runner's entry: ``export_file`` (load + render + write) of the ``export_messages``-message session
    in process, then RPC ``export_html`` of the same session after ``switch_session``, pisces and pi
    alternating."""
    from benchmarks._common import Figure, samples

    path = wl.export_session
    n = wl.sizes.export_messages
    reps = cfg.rounds
    out = os.path.join(str(wl.root), "export-in-process.html")
    cfg.log(f"export: {n}-message session in process ({reps} reps)")
    res.add(Figure("export_file_ms", f"export_html of {n}-message session (in process: load, render, write)", "ms",
                   samples(lambda: export_file(path, out), reps), ref_missing="see the RPC export_html row for pi",
                   detail={"session_bytes": os.path.getsize(path), "html_bytes": os.path.getsize(out)}))
    if harness is None:
        return
    h = harness

    def export(spec) -> dict:
        target = os.path.join(str(h.tmp), f"export-{spec.name}.html")
        a = h.spawn(spec, wl.project)
        try:
            h.ok(a.request({"type": "get_state"}, 60))
            h.ok(a.request({"type": "switch_session", "sessionPath": path}, 120))
            t = time.perf_counter()
            h.ok(a.request({"type": "export_html", "outputPath": target}, 120))
            ms = (time.perf_counter() - t) * 1000
        finally:
            a.close()
        return {"ms": ms, "html_bytes": os.path.getsize(target)}

    cfg.log(f"export: RPC export_html of the {n}-message session ({reps} rounds)")
    d = h.alternate(reps, export)
    f = res.add(h.figure(d, "ms", "rpc_export_html_ms", f"RPC export_html of {n}-message session", "ms"))
    f.detail["html_bytes"] = {k: v.get("html_bytes") for k, v in d.items()}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=2000)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--browser", action="store_true")
    args = ap.parse_args()
    rng = random.Random(7)
    with tempfile.TemporaryDirectory() as tmp:
        sm = build_session(tmp, os.path.join(tmp, "sessions"), args.messages, rng)
        path = sm.get_session_file()
        assert path
        entries = sm.get_entries()
        out = os.path.join(tmp, "out.html")

        render_html(sm.get_header(), entries, sm.get_leaf_id())  # warm the template cache
        render_t, file_t = [], []
        for _ in range(args.reps):
            t = time.perf_counter()
            page = render_html(sm.get_header(), entries, sm.get_leaf_id())
            render_t.append(time.perf_counter() - t)
            t = time.perf_counter()
            export_file(path, out)
            file_t.append(time.perf_counter() - t)
        print(f"messages                 {len(entries) - 1}")
        print(f"session file bytes       {os.path.getsize(path)}")
        print(f"html bytes               {len(page)}")
        print(f"render_html ms (median)  {statistics.median(render_t) * 1000:.1f}")
        print(f"export_file ms (median)  {statistics.median(file_t) * 1000:.1f}  (load + render + write)")
        chromium = shutil.which("chromium")
        if args.browser and chromium:
            cmd = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                   f"--user-data-dir={os.path.join(tmp, 'profile')}", "--dump-dom", "file://" + out]
            subprocess.run(cmd, capture_output=True, timeout=120)  # first start warms the profile
            t = time.perf_counter()
            proc = subprocess.run(cmd, capture_output=True, timeout=120)
            took = time.perf_counter() - t
            ok = b'data-rendered="1"' in proc.stdout
            print(f"chromium dump-dom ms     {took * 1000:.0f}  (rendered={ok})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
