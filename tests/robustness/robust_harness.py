"""Helpers for the robustness suite: the real ``pisces --mode rpc`` process, watched line by line.

``Agent`` spawns the process with its own HOME and agent dir, reads stdout on a thread and checks every line
as it arrives: it must end with LF, be strict UTF-8 and strict JSON (no NaN/Infinity) and be an object with a
string ``type``. Anything else is recorded in ``violations`` (stdout carries protocol frames only). Every wait
is bounded; a failed wait reports the last frames and the tail of stderr.

The oracle (``expected_reply``) says, from the raw bytes of a line alone, what answer the line must get:
one response carrying the request's id when the line is a JSON object with a non-null ``id``, one response
without an id otherwise, and nothing for ``extension_ui_response`` (pi's behaviour).
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import threading
import time
from typing import Any, Callable

from proc_table import descendants

PISCES = [sys.executable, "-m", "pisces"]
NO_ID = "<no id>"  # the group key of responses (and lines) without an id
SILENT = "<silent>"  # a line that must get no response at all


# ------------------------------------------------------------------------------------------------
# Configuration
# ------------------------------------------------------------------------------------------------
def agent_env(home: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(HOME=home, PISCES_CODING_AGENT_DIR=os.path.join(home, ".pisces", "agent"), TZ="UTC",
               PYTHONUNBUFFERED="1")
    return env


def write_scripted_config(home: str, base_url: str, *, max_retries: int = 2, idle_timeout_ms: int = 400,
                          base_delay_ms: int = 20) -> None:
    """models.json with one openai-completions provider at ``base_url`` + settings.json selecting it."""
    agent_dir = os.path.join(home, ".pisces", "agent")
    os.makedirs(agent_dir, exist_ok=True)
    models = {"providers": {"scripted": {
        "baseUrl": base_url + "/v1", "api": "openai-completions", "apiKey": "k",
        "models": [{"id": "scripted-model", "contextWindow": 128000, "maxTokens": 4096}]}}}
    settings = {"defaultProvider": "scripted", "defaultModel": "scripted-model",
                "retry": {"baseDelayMs": base_delay_ms, "maxRetries": max_retries,
                          "provider": {"maxRetries": 0, "idleTimeoutMs": idle_timeout_ms}}}
    with open(os.path.join(agent_dir, "models.json"), "w") as f:
        json.dump(models, f)
    with open(os.path.join(agent_dir, "settings.json"), "w") as f:
        json.dump(settings, f)


def write_faux_script(path: str, responses: list[dict], loop: bool = True) -> str:
    with open(path, "w") as f:
        json.dump({"responses": responses, "loop": loop}, f)
    return path


# ------------------------------------------------------------------------------------------------
# Frames
# ------------------------------------------------------------------------------------------------
def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def strict_frame(raw: bytes) -> dict[str, Any]:
    """Parse one stdout line as a protocol frame, or raise ValueError saying why it is not one."""
    if not raw.endswith(b"\n"):
        raise ValueError("line does not end with LF")
    body = raw[:-1]
    if b"\n" in body or body.endswith(b"\r"):
        raise ValueError("stray line break")
    text = body.decode("utf-8")  # strict: invalid UTF-8 raises
    frame = json.loads(text, parse_constant=_reject_constant)
    if not isinstance(frame, dict) or not isinstance(frame.get("type"), str):
        raise ValueError("not an object with a string 'type'")
    return frame


def norm(value: Any) -> Any:
    """A JSON value as JSON.stringify would print it back: non-finite numbers become null, integral floats
    integers (so ids compare the way a client sees them)."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            return None
        return int(value) if value.is_integer() else value
    if isinstance(value, int):
        return value
    if isinstance(value, list):
        return [norm(v) for v in value]
    if isinstance(value, dict):
        return {k: norm(v) for k, v in value.items()}
    return value


def id_key(value: Any) -> str:
    return json.dumps(norm(value), sort_keys=True, ensure_ascii=True)


def response_key(frame: dict[str, Any]) -> str:
    return id_key(frame["id"]) if "id" in frame else NO_ID


def _js_int(text: str) -> Any:
    try:
        return int(text)
    except ValueError:  # more digits than Python converts: JSON.parse gives a double
        return float(text)


def oracle_parse(raw: bytes) -> tuple[bool, Any]:
    """(parsed, value) as JSON.parse reads the line: UTF-8 with replacement, one trailing CR dropped, no
    NaN/Infinity literals. Nesting too deep for a recursive parser counts as not parsed."""
    if raw.endswith(b"\r"):
        raw = raw[:-1]
    text = raw.decode("utf-8", "replace")
    try:
        return True, json.loads(text, parse_constant=_reject_constant, parse_int=_js_int)
    except (ValueError, RecursionError):
        return False, None


def expected_reply(raw: bytes) -> str:
    """The group key of the one response this line must get, or SILENT."""
    ok, value = oracle_parse(raw)
    if not ok or not isinstance(value, dict):
        return NO_ID
    if value.get("type") == "extension_ui_response":
        return SILENT
    if value.get("id") is None:
        return NO_ID
    return id_key(value["id"])


# ------------------------------------------------------------------------------------------------
# The process
# ------------------------------------------------------------------------------------------------
def default_signals() -> None:
    """``preexec_fn`` for a spawned agent: SIGINT, SIGHUP and SIGTERM at their defaults, whatever the test run
    inherited (a suite started in the background of a script has SIGINT ignored, one under nohup SIGHUP, and
    pisces rightly keeps a signal ignored that it was started with)."""
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL)


class Agent:
    def __init__(self, args: list[str], *, home: str, cwd: str, env: dict[str, str] | None = None,
                 inherit_signals: bool = False) -> None:
        os.makedirs(home, exist_ok=True)
        os.makedirs(cwd, exist_ok=True)
        full_env = agent_env(home)
        full_env.update(env or {})
        self.stderr_path = os.path.join(home, f"stderr-{time.monotonic_ns()}.txt")
        self._stderr = open(self.stderr_path, "wb")
        self.proc = subprocess.Popen([*PISCES, "--mode", "rpc", *args], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self._stderr, env=full_env, cwd=cwd,
                                     preexec_fn=None if inherit_signals else default_signals)
        self.pid = self.proc.pid
        self.frames: list[dict[str, Any]] = []
        self.violations: list[str] = []
        self.eof = False
        self.write_error: str | None = None
        self._cond = threading.Condition()
        self._reader = threading.Thread(target=self._read, name=f"stdout-{self.pid}", daemon=True)
        self._reader.start()

    # -- reading ---------------------------------------------------------------------------------
    def _read(self) -> None:
        out = self.proc.stdout
        assert out is not None
        while True:
            raw = out.readline()
            if not raw:
                break
            try:
                frame = strict_frame(raw)
            except (ValueError, UnicodeDecodeError) as exc:
                with self._cond:
                    self.violations.append(f"{exc}: {raw[:200]!r}")
                    self._cond.notify_all()
                continue
            with self._cond:
                self.frames.append(frame)
                self._cond.notify_all()
        with self._cond:
            self.eof = True
            self._cond.notify_all()

    def stderr_tail(self, n: int = 1500) -> str:
        try:
            with open(self.stderr_path, "rb") as f:
                return f.read().decode("utf-8", "replace")[-n:]
        except OSError:
            return ""

    def describe(self, why: str) -> str:
        with self._cond:
            tail = [json.dumps(f)[:300] for f in self.frames[-8:]]
        return (f"{why}\n  exit status: {self.proc.poll()}\n  last frames:\n    " + "\n    ".join(tail)
                + f"\n  stdout violations: {self.violations[:3]}\n  stderr tail: {self.stderr_tail()}")

    def wait_for(self, pred: Callable[[dict[str, Any]], bool], start: int = 0, timeout: float = 10.0) -> int:
        """Index of the first frame at or after ``start`` matching ``pred``; fails after ``timeout``."""
        deadline = time.monotonic() + timeout
        i = start
        with self._cond:
            while True:
                while i < len(self.frames):
                    if pred(self.frames[i]):
                        return i
                    i += 1
                if self.eof:
                    raise AssertionError(self.describe("stdout ended before the expected frame"))
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(self.describe(f"no expected frame within {timeout} s"))
                self._cond.wait(left)

    def wait_until(self, cond: Callable[[], bool], timeout: float = 10.0, what: str = "condition") -> None:
        """Wait until ``cond()`` (evaluated under the frame lock) holds."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while not cond():
                if self.eof:
                    raise AssertionError(self.describe(f"stdout ended while waiting for {what}"))
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(self.describe(f"no {what} within {timeout} s"))
                self._cond.wait(left)

    def count(self) -> int:
        with self._cond:
            return len(self.frames)

    def snapshot(self, start: int = 0) -> list[dict[str, Any]]:
        with self._cond:
            return list(self.frames[start:])

    # -- writing ---------------------------------------------------------------------------------
    def send_line(self, raw: bytes) -> None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(raw + b"\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError) as exc:
            self.write_error = f"{type(exc).__name__}: {exc}"
            raise AssertionError(self.describe(f"cannot write to the agent's stdin ({self.write_error})")) from exc

    def send(self, obj: Any) -> None:
        self.send_line(json.dumps(obj, ensure_ascii=False).encode("utf-8", "surrogatepass"))

    def request(self, obj: dict[str, Any], timeout: float = 10.0) -> dict[str, Any]:
        start = self.count()
        self.send(obj)
        i = self.wait_for(lambda f: f.get("type") == "response" and f.get("id") == obj["id"], start, timeout)
        return self.snapshot(i)[0]

    # -- ending ----------------------------------------------------------------------------------
    def alive(self) -> bool:
        return self.proc.poll() is None

    def close_stdin(self) -> None:
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
        except OSError:
            pass

    def wait_exit(self, timeout: float) -> int | None:
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def kill(self) -> None:
        """SIGKILL the agent (only it: what it leaves behind is what some tests look for)."""
        if self.proc.poll() is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait(timeout=10)

    def cleanup(self, extra_pids: list[int] | None = None) -> None:
        """End the agent and whatever it started (by pid), close pipes."""
        leftovers = descendants(self.pid) if self.proc.poll() is None else []
        self.close_stdin()
        if self.proc.poll() is None:
            self.kill()
        for pid in [*leftovers, *(extra_pids or [])]:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        self._reader.join(timeout=5)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self._stderr.close()

    def __enter__(self) -> "Agent":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.cleanup()


def events_of(frames: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [f for f in frames if f.get("type") == kind]
