"""Driving an RPC agent (pisces or pi) for the benchmarks, with no file from outside the repository: the
process wrapper, its HOME with models.json/settings.json pointing at the benchmark LLM (``_llm.py``), and the
script turns the benchmark modules use (``T``, ``TOOL``, ``SUMMARY``).

pi reads ``~/.pi/agent``, pisces ``~/.pisces/agent``; both get the same files.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, Callable

CONFIG_DIRS = (".pi", ".pisces")
BASE_SETTINGS = {"defaultProvider": "scripted", "defaultModel": "scripted-model"}

# the summarisation request is told it is a "context summarization assistant" (pi's prompt and pisces')
SUMMARY = {"match": {"system_contains": "context summarization assistant"},
           "text": "## Goal\nScripted summary of the conversation."}


def T(text: str, **kw: Any) -> dict:
    return {"text": text, **kw}


def TOOL(name: str, args: dict, call_id: str = "call_01", **kw: Any) -> dict:
    return {"tool_calls": [{"id": call_id, "name": name, "arguments": args}], **kw}


def models_json(port: int) -> dict:
    return {"providers": {"scripted": {
        "baseUrl": f"http://127.0.0.1:{port}/v1", "api": "openai-completions", "apiKey": "scripted-key",
        "models": [{"id": "scripted-model", "name": "Scripted Model (OpenAI wire)", "reasoning": False,
                    "input": ["text", "image"], "contextWindow": 128000, "maxTokens": 16384,
                    "cost": {"input": 3, "output": 15, "cacheRead": 0.3, "cacheWrite": 3.75}}]}}}


def agent_env(home: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.endswith("_API_KEY") and not k.startswith(("PI_", "PISCES_"))}
    env.update(HOME=home, PI_OFFLINE="1", TZ="UTC")
    return env


def write_agent_config(home: str, port: int, settings: dict | None = None) -> None:
    for d in CONFIG_DIRS:
        agent_dir = Path(home) / d / "agent"
        agent_dir.mkdir(parents=True, exist_ok=True)
        (agent_dir / "models.json").write_text(json.dumps(models_json(port), indent=2) + "\n")
        (agent_dir / "settings.json").write_text(json.dumps({**BASE_SETTINGS, **(settings or {})}, indent=2) + "\n")
        (agent_dir / "auth.json").write_text("{}")


def kept(obj: Any) -> Any:
    """What the reader keeps of one parsed frame: all of it, except a ``message_update``, whose two message
    snapshots nothing here reads. The reader is the measuring instrument and runs beside the agent on the same
    cores: keeping 2,000 parsed snapshots of a 2,000-chunk reply (about 40 MB of objects, given back to the
    kernel when the agent closes and faulted in again by the next one) cost it a fifth more processor time
    (161 against 133 ms a reply), taken from the agent it measures. Every frame is still parsed as it
    arrives, as a client has to."""
    if type(obj) is dict and obj.get("type") == "message_update":
        event = obj.get("assistantMessageEvent")
        slim = {"type": "message_update"}
        if isinstance(event, dict):
            slim["assistantMessageEvent"] = {k: v for k, v in event.items() if k not in ("partial", "message")}
        return slim
    return obj


class Agent:
    """One agent process speaking JSON lines: every stdout line is parsed as it arrives and kept (``out``,
    see :func:`kept`), with its arrival time and size (``records``). ``tee``, when given, also gets every
    stdout byte as read (for replaying the same frames later)."""

    def __init__(self, cmd: list[str], cwd: Path, env: dict[str, str], tee: str | None = None) -> None:
        self.t0 = time.perf_counter()
        self.tee = tee
        self.proc = subprocess.Popen(cmd, cwd=str(cwd), env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, bufsize=0)
        # {"t": ms since spawn, "dir": "in", "line": str} or {"t", "dir": "out", "bytes": the line's size with its LF}
        self.records: list[dict] = []
        self.out: list[dict] = []  # parsed stdout objects
        self.cond = threading.Condition()
        self.eof = False
        self.rusage: Any = None
        self._ids = 0
        threading.Thread(target=self._read_stdout, daemon=True).start()
        threading.Thread(target=self._drain_stderr, daemon=True).start()

    def ms(self) -> float:
        return (time.perf_counter() - self.t0) * 1000

    def _read_stdout(self) -> None:
        buf = b""
        fd = self.proc.stdout.fileno()
        tee = open(self.tee, "wb") if self.tee else None  # closed below, after the last read
        while True:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            if tee is not None:
                tee.write(chunk)
            buf += chunk
            *lines, buf = buf.split(b"\n")
            parsed = []
            for raw in lines:
                try:
                    obj = kept(json.loads(raw))
                except ValueError:
                    obj = {"__unparsed__": raw.decode("utf-8", "replace")}
                parsed.append((len(raw) + 1, obj))
            with self.cond:
                t = self.ms()
                for size, obj in parsed:
                    self.records.append({"t": t, "dir": "out", "bytes": size})
                    self.out.append(obj)
                self.cond.notify_all()
        if tee is not None:
            tee.close()
        with self.cond:
            self.eof = True
            self.cond.notify_all()

    def _drain_stderr(self) -> None:
        for _ in iter(lambda: self.proc.stderr.read(4096), b""):
            pass

    def send(self, obj: dict) -> None:
        line = json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
        with self.cond:
            self.records.append({"t": self.ms(), "dir": "in", "line": line})
        self.proc.stdin.write(line.encode() + b"\n")
        self.proc.stdin.flush()

    def wait(self, pred: Callable[[dict], bool], timeout: float = 30.0, since: int = 0) -> dict:
        deadline = time.monotonic() + timeout
        with self.cond:
            i = since
            while True:
                while i < len(self.out):
                    if pred(self.out[i]):
                        return self.out[i]
                    i += 1
                if self.eof:
                    raise RuntimeError("agent stdout closed while waiting")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError("timed out waiting for agent output")
                self.cond.wait(left)

    def request(self, obj: dict, timeout: float = 30.0) -> dict:
        self._ids += 1
        rid = obj.get("id") or f"r{self._ids}"
        with self.cond:
            start = len(self.out)
        self.send({"id": rid, **{k: v for k, v in obj.items() if k != "id"}})
        return self.wait(lambda o: o.get("type") == "response" and o.get("id") == rid, timeout, since=start)

    def count(self, etype: str) -> int:
        with self.cond:
            return sum(1 for o in self.out if o.get("type") == etype)

    def wait_count(self, etype: str, n: int, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        with self.cond:
            while sum(1 for o in self.out if o.get("type") == etype) < n:
                left = deadline - time.monotonic()
                if left <= 0 or self.eof:
                    raise TimeoutError(f"waiting for {n}x {etype}")
                self.cond.wait(left)

    def close(self, timeout: float = 10.0) -> int:
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            pid, status, ru = os.wait4(self.proc.pid, os.WNOHANG)
            if pid:
                self.rusage = ru
                self.proc.returncode = os.waitstatus_to_exitcode(status)
                break
            time.sleep(0.02)
        else:
            self.proc.kill()  # our own child, by handle
            _, status, ru = os.wait4(self.proc.pid, 0)
            self.rusage = ru
            self.proc.returncode = os.waitstatus_to_exitcode(status)
        with self.cond:
            end = time.monotonic() + 2
            while not self.eof and time.monotonic() < end:
                self.cond.wait(0.1)
        return self.proc.returncode
