"""Import time, and the cost per streamed event of each provider.

    python benchmarks/bench_providers.py [--events 2000] [--reps 5]

Import times are measured in fresh interpreters (``import pisces``; each provider module with its SDK).
The per-event cost streams N text deltas from a local 127.0.0.1 server speaking each vendor's SSE format,
through ``pisces.ai.stream.stream`` and the real SDK, and divides the wall time by N (the first, untimed
request of each provider pays the SDK import and client set-up). Prints numbers; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))

from pisces.ai.stream import stream
from pisces.ai.types import Context, Model, StreamOptions, UserMessage
from scripted_server import Reply, ScriptedServer

IMPORTS = {
    "pisces": "import pisces",
    "pisces.ai.stream": "import pisces.ai.stream",
    # what a first request loads, the way pisces loads it (providers.warm: the SDK with the GC paused)
    "openai-completions (+openai SDK)": "from pisces.ai.providers import warm; warm('openai-completions')",
    "openai-responses (+openai SDK)": "from pisces.ai.providers import warm; warm('openai-responses')",
    "anthropic-messages (+anthropic SDK)": "from pisces.ai.providers import warm; warm('anthropic-messages')",
    "google-generative-ai (+google-genai SDK)": "from pisces.ai.providers import warm; "
                                                "warm('google-generative-ai')",
    # what a first Gemini request loads without the SDK (google_direct): the provider module and the HTTP client
    "google-generative-ai (direct, no SDK)": "from pisces.ai.providers import get_provider, prepare_transport; "
                                             "get_provider('google-generative-ai'); "
                                             "prepare_transport('google-generative-ai')",
    "faux": "import pisces.ai.providers.faux",
}


def import_samples(code: str, reps: int) -> list[float]:
    """Milliseconds ``code`` takes in each of ``reps`` fresh interpreters (interpreter start-up excluded)."""
    samples = []
    for _ in range(reps):
        probe = f"import time; t = time.perf_counter(); {code}; print((time.perf_counter() - t) * 1000)"
        out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
        samples.append(float(out.stdout.strip()))
    return samples


def import_ms(code: str, reps: int) -> float:
    return statistics.median(import_samples(code, reps))


def _openai_completions(n: int) -> Reply:
    chunks = [{"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m",
               "choices": [{"index": 0, "delta": {"content": "w "}, "finish_reason": None}]} for _ in range(n)]
    chunks.append({"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m",
                   "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    chunks.append({"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m", "choices": [],
                   "usage": {"prompt_tokens": 10, "completion_tokens": n, "total_tokens": n + 10}})
    return Reply.sse(chunks, done=True)


def _anthropic(n: int) -> Reply:
    events = [{"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant",
                                                     "content": [], "model": "m", "stop_reason": None,
                                                     "usage": {"input_tokens": 10, "output_tokens": 1}}},
              {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}]
    events += [{"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "w "}}] * n
    events += [{"type": "content_block_stop", "index": 0},
               {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": n}},
               {"type": "message_stop"}]
    return Reply.sse(events, named=True)


def _openai_responses(n: int) -> Reply:
    item = {"type": "message", "id": "msg_1", "role": "assistant", "status": "in_progress", "content": []}
    events = [{"type": "response.created", "response": {"id": "resp_1", "status": "in_progress", "output": []}},
              {"type": "response.output_item.added", "output_index": 0, "item": item},
              {"type": "response.content_part.added", "item_id": "msg_1", "output_index": 0, "content_index": 0,
               "part": {"type": "output_text", "text": ""}}]
    events += [{"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 0, "content_index": 0,
                "delta": "w "}] * n
    done_item = {**item, "status": "completed", "content": [{"type": "output_text", "text": "w " * n}]}
    events += [{"type": "response.output_item.done", "output_index": 0, "item": done_item},
               {"type": "response.completed", "response": {"id": "resp_1", "status": "completed",
                                                            "output": [done_item],
                                                            "usage": {"input_tokens": 10, "output_tokens": n}}}]
    return Reply.sse(events, named=True)


def _google(n: int) -> Reply:
    chunks = [{"candidates": [{"content": {"role": "model", "parts": [{"text": "w "}]}, "index": 0}]}
              for _ in range(n - 1)]
    chunks.append({"candidates": [{"content": {"role": "model", "parts": [{"text": "w "}]}, "finishReason": "STOP",
                                   "index": 0}],
                   "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": n, "totalTokenCount": n + 10}})
    return Reply.sse(chunks)


PROVIDERS = {
    "openai-completions": (_openai_completions, "/v1"),
    "openai-responses": (_openai_responses, "/v1"),
    "anthropic-messages": (_anthropic, ""),
    "google-generative-ai": (_google, "/v1beta"),
}


async def _one(model: Model, n: int) -> tuple[float, int]:
    t0 = time.perf_counter()
    count = 0
    final = None
    async for ev in stream(model, Context(messages=[UserMessage(content="hi")]),
                           StreamOptions(apiKey="k", maxRetries=0)):
        count += 1
        final = ev
    elapsed = time.perf_counter() - t0
    kind = type(final).__name__
    if kind != "DoneEvent":
        raise RuntimeError(f"{model.api}: stream ended with {kind}: {getattr(final, 'error', None)}")
    return elapsed, count


async def per_event_costs(n: int, reps: int) -> dict[str, dict[str, Any]]:
    from pisces.ai.models import FAUX_MODELS
    from pisces.ai.providers import DIRECT_APIS
    from pisces.ai.providers.faux import SCRIPT

    results: dict[str, dict[str, Any]] = {}
    saved = os.environ.get("PISCES_PROVIDER_TRANSPORT")
    with ScriptedServer() as srv:
        for api, (build, suffix) in PROVIDERS.items():
            # through the SDK (as every request once it is imported), and where there is one the direct path
            # (a process's requests before the SDK is imported: providers.direct)
            for transport in ("sdk", "direct") if api in DIRECT_APIS else ("sdk",):
                key = api if transport == "sdk" else f"{api} (direct)"
                os.environ["PISCES_PROVIDER_TRANSPORT"] = transport
                model = Model(id="m", name="m", api=api, provider="bench", baseUrl=srv.url + suffix)
                samples = []
                events = 0
                try:
                    for i in range(reps + 1):
                        srv.push(build(n))
                        elapsed, events = await _one(model, n)
                        if i:  # the first request pays the SDK import and client set-up
                            samples.append(elapsed)
                except RuntimeError as exc:
                    results[key] = {"error": str(exc)[:300]}
                    continue
                med = statistics.median(samples)
                results[key] = {"events": events, "ms": med * 1000, "us_per_event": med / events * 1e6,
                                "samples_ms": [x * 1000 for x in samples]}
    if saved is None:
        os.environ.pop("PISCES_PROVIDER_TRANSPORT", None)
    else:
        os.environ["PISCES_PROVIDER_TRANSPORT"] = saved
    samples = []
    for _ in range(reps):
        SCRIPT.reset()
        SCRIPT.enqueue({"text": "w " * n, "chunkSize": 2})
        elapsed, events = await _one(FAUX_MODELS[0], n)
        samples.append(elapsed)
    med = statistics.median(samples)
    results["faux"] = {"events": events, "ms": med * 1000, "us_per_event": med / events * 1e6,
                       "samples_ms": [x * 1000 for x in samples]}
    return results


def run(cfg, res) -> None:
    """The runner's entry (``python -m benchmarks``): one figure per import and per provider's event cost.
    pi's side is n/a: its providers live inside its node process."""
    from benchmarks._common import Figure

    reps = cfg.rounds
    why = "in-process in pisces; pi's providers are not separable from its node process"
    cfg.log(f"providers: import times ({reps} fresh interpreters each)")
    for name, code in IMPORTS.items():
        key = f"import_{name.split()[0]}{'_direct' if '(direct' in name else ''}_ms"
        try:
            xs = import_samples(code, reps)
        except subprocess.CalledProcessError as exc:
            res.skip(key, f"import {name}", f"failed: {exc.stderr.strip()[-200:]}")
            continue
        res.add(Figure(key, f"import {name}", "ms", xs, ref_missing=why))
    n = cfg.sizes.provider_events
    cfg.log(f"providers: {n} streamed events per request, {reps} requests each")
    costs = asyncio.run(per_event_costs(n, reps))
    for api, r in costs.items():
        key = f"per_event_{api.replace(' (direct)', '_direct')}_us"
        if "error" in r:
            res.skip(key, f"{api}: cost per streamed event", r["error"])
            continue
        res.add(Figure(key, f"{api}: cost per streamed event ({n} deltas)", "us",
                       [ms * 1000 / r["events"] for ms in r["samples_ms"]], ref_missing=why,
                       detail={"events": r["events"], "request_ms": r["samples_ms"]}))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=2000)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args()
    imports = {name: import_ms(code, args.reps) for name, code in IMPORTS.items()}
    print(f"{'import':44} {'ms (median)':>12}")
    for name, ms in imports.items():
        print(f"{name:44} {ms:12.1f}")
    costs = asyncio.run(per_event_costs(args.events, args.reps))
    print(f"\n{'provider (' + str(args.events) + ' text deltas)':44} {'ms':>8} {'events':>8} {'µs/event':>10}")
    for api, r in costs.items():
        if "error" in r:
            print(f"{api:44} failed: {r['error'][:200]}")
            continue
        print(f"{api:44} {r['ms']:8.1f} {r['events']:8d} {r['us_per_event']:10.1f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"imports_ms": imports, "per_event": costs}, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
