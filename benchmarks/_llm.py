"""A scripted LLM for the benchmarks: the OpenAI Chat Completions streaming wire on 127.0.0.1, stdlib only, so
that ``python -m benchmarks --no-pi`` runs from a plain clone. Both agents (pisces and pi) talk to the same
server, so side-by-side figures stay comparable.

    python benchmarks/_llm.py --port 0      # prints "LISTENING <port>"; POST /_script sets the turns

A turn (one per request, in order; the first turn whose ``match`` fits is taken before the others):
    text        the reply text, streamed in chunks of ``chunk_chars`` (default 16)
    words       N: then N words "w0 w1 ...", one per chunk
    tool_calls  [{"id", "name", "arguments": {...}}], streamed after the text
    usage       {"prompt_tokens", "completion_tokens"} (default: estimated from the sizes)
    match       {"system_contains": s}: taken only by a request whose system prompt contains ``s``
With no turn left the reply is the text "[benchmark llm] script exhausted".

``POST /_script`` takes ``{"turns": [...], "answer_after_ms": N}`` too: then every reply starts no sooner than
N ms after its request's head was read, so agents whose requests differ in size wait alike (the server's own
work, parsing the body, grows with it).

``GET /_requests`` lists, per completion request since the last ``/_script``: the body's bytes, its tool
count and ``ms``, the server's own time for it (from its headers read to the reply's last byte written),
which a benchmark subtracts from an agent's wall time to get the agent's share, and ``work_ms``, that time
up to the reply's first byte without the wait ``answer_after_ms`` added.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Script:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.turns: list[dict] = []
        self.requests: list[dict] = []  # per completion request: body bytes, tool count (GET /_requests)
        self.used: list[bool] = []
        self.plain_from = 0  # every turn without "match" before this index is used
        self.any_match = False
        self.answer_after_s = 0.0  # no reply starts sooner than this after its request's head was read

    def set(self, turns: list[dict], answer_after_ms: float = 0) -> None:
        with self.lock:
            self.answer_after_s = max(0.0, float(answer_after_ms)) / 1000
            self.turns = list(turns)
            self.used = [False] * len(turns)
            self.requests = []
            self.plain_from = 0
            self.any_match = any("match" in t for t in turns)

    def pick(self, system: str) -> dict:
        with self.lock:
            for want_match in (True, False):
                if want_match and not self.any_match:
                    continue
                start = 0 if want_match else self.plain_from
                for i in range(start, len(self.turns)):
                    t = self.turns[i]
                    if self.used[i] or ("match" in t) != want_match:
                        continue
                    if want_match and t["match"].get("system_contains", "") not in system:
                        continue
                    self.used[i] = True
                    if not want_match:
                        self.plain_from = i + 1
                    return t
        return {"text": "[benchmark llm] script exhausted"}


def _system_text(body: dict) -> str:
    out = []
    for m in body.get("messages", []):
        if m.get("role") in ("system", "developer"):
            c = m.get("content")
            out.append(c if isinstance(c, str) else " ".join(p.get("text", "") for p in c or [] if isinstance(p, dict)))
    return "\n".join(out)


def chunks_for(turn: dict) -> list[dict]:
    """The ``delta`` objects of one reply, then its finish reason (as the last item's ``finish``)."""
    text = turn.get("text", "")
    size = int(turn.get("chunk_chars", 16))
    deltas: list[dict] = [{"role": "assistant", "content": ""}]
    deltas += [{"content": text[i:i + size]} for i in range(0, len(text), size)]
    n = int(turn.get("words", 0))
    deltas += [{"content": ("" if (i == 0 and not text) else " ") + f"w{i}"} for i in range(n)]
    for i, call in enumerate(turn.get("tool_calls", [])):
        args = json.dumps(call.get("arguments", {}))
        deltas.append({"tool_calls": [{"index": i, "id": call.get("id", f"call_{i}"), "type": "function",
                                       "function": {"name": call["name"], "arguments": ""}}]})
        deltas += [{"tool_calls": [{"index": i, "function": {"arguments": args[j:j + 24]}}]}
                   for j in range(0, len(args), 24)]
    return deltas


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    script: Script

    def log_message(self, *a: Any) -> None:
        pass

    def _json(self, status: int, obj: Any) -> None:
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path == "/_requests":
            self._json(200, {"requests": self.script.requests})
            return
        self._json(200, {"object": "list", "data": [{"id": "scripted-model", "object": "model"}]})

    def do_POST(self) -> None:
        t0 = time.perf_counter()
        length = int(self.headers.get("content-length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        if self.path == "/_script":
            if isinstance(body, dict):
                self.script.set(body.get("turns", []), body.get("answer_after_ms", 0))
            else:
                self.script.set(body)
            self._json(200, {"ok": True})
            return
        record: dict[str, Any] = {"bytes": length, "tools": len(body.get("tools") or [])}
        self.script.requests.append(record)
        turn = self.script.pick(_system_text(body))
        deltas = chunks_for(turn)
        finish = "tool_calls" if turn.get("tool_calls") else "stop"
        usage = turn.get("usage") or {
            "prompt_tokens": math.ceil(len(json.dumps(body.get("messages", []))) / 4),
            "completion_tokens": math.ceil(sum(len(json.dumps(d)) for d in deltas) / 4)}
        usage = {**usage, "total_tokens": usage["prompt_tokens"] + usage["completion_tokens"]}
        record["work_ms"] = (time.perf_counter() - t0) * 1000
        wait = self.script.answer_after_s - (time.perf_counter() - t0)
        if wait > 0:
            time.sleep(wait)
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("transfer-encoding", "chunked")
        self.send_header("connection", "close")
        self.end_headers()

        def event(obj: Any) -> bytes:
            data = b"data: " + (obj if isinstance(obj, bytes) else json.dumps(obj).encode()) + b"\n\n"
            return f"{len(data):x}\r\n".encode() + data + b"\r\n"

        base = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 0, "model": "scripted-model"}
        out = [event({**base, "choices": [{"index": 0, "delta": d, "finish_reason": None}]}) for d in deltas]
        out.append(event({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}))
        out.append(event({**base, "choices": [], "usage": usage}))
        out.append(event(b"[DONE]"))
        try:
            for piece in out:
                self.wfile.write(piece)
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass
        record["ms"] = (time.perf_counter() - t0) * 1000
        self.close_connection = True


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--port", type=int, default=0)
    args = ap.parse_args(argv)
    Handler.script = Script()
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    print(f"LISTENING {server.server_address[1]}", flush=True)
    try:
        server.serve_forever(poll_interval=0.05)
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
