"""A wrapper around one real ``pisces`` process for the end-to-end tests: spawn, send lines, read frames
with timeouts, close. Nothing here knows the protocol beyond "one JSON value per line".

stdout is read on a thread into a queue, line by line (split on ``\\n`` only), and every raw line is kept so
that a test can check that stdout stayed valid JSON lines. ``close()`` always leaves no process behind: it
closes stdin, waits, then kills the process group and any descendant it knows of.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from typing import Any, Callable, Iterable

from proc_table import in_groups

HERE = os.path.dirname(os.path.abspath(__file__))
_BIN = os.path.dirname(sys.executable)
PISCES = [os.path.join(_BIN, "pisces")] if os.path.exists(os.path.join(_BIN, "pisces")) \
    else [sys.executable, "-m", "pisces"]

Frame = dict[str, Any]
Pred = Callable[[Frame], bool]


class Home:
    """A throw-away HOME with the agent dir inside it, and the env a spawned pisces needs."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.home = os.path.join(root, "home")
        self.agent_dir = os.path.join(self.home, ".pisces", "agent")
        self.cwd = os.path.join(root, "work")
        os.makedirs(self.agent_dir, exist_ok=True)
        os.makedirs(self.cwd, exist_ok=True)

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
        env.update(HOME=self.home, PISCES_CODING_AGENT_DIR=self.agent_dir, PYTHONUNBUFFERED="1")
        env.update(extra)
        return env

    def write_json(self, name: str, data: Any) -> str:
        path = os.path.join(self.agent_dir, name)
        with open(path, "w", encoding="utf-8") as f:
            json.dump(data, f)
        return path

    def read_json(self, name: str) -> Any:
        with open(os.path.join(self.agent_dir, name), encoding="utf-8") as f:
            return json.load(f)

    def faux_script(self, responses: list[dict] | dict, name: str = "faux.json") -> str:
        path = os.path.join(self.root, name)
        with open(path, "w", encoding="utf-8") as f:
            json.dump(responses, f)
        return path

    def scripted_provider(self, base_url: str, settings: dict | None = None) -> None:
        """models.json with one OpenAI-compatible provider at ``base_url`` (…/v1), and settings.json selecting it."""
        self.write_json("models.json", {"providers": {"scripted": {
            "baseUrl": base_url, "api": "openai-completions", "apiKey": "test-key",
            "models": [{"id": "scripted-model", "name": "Scripted Model", "reasoning": False,
                        "input": ["text", "image"], "contextWindow": 128000, "maxTokens": 16384,
                        "cost": {"input": 3, "output": 15, "cacheRead": 0.3, "cacheWrite": 3.75}}]}}})
        merged = {"defaultProvider": "scripted", "defaultModel": "scripted-model",
                  "retry": {"baseDelayMs": 50, "provider": {"maxRetries": 0, "idleTimeoutMs": 5000}}}
        _merge(merged, settings or {})
        self.write_json("settings.json", merged)

    def session_files(self) -> list[str]:
        out = []
        for dirpath, _dirs, files in os.walk(os.path.join(self.agent_dir, "sessions")):
            out.extend(os.path.join(dirpath, f) for f in files if f.endswith(".jsonl"))
        return sorted(out)


def _merge(base: dict, extra: dict) -> None:
    for k, v in extra.items():
        if isinstance(v, dict) and isinstance(base.get(k), dict):
            _merge(base[k], v)
        else:
            base[k] = v


class ProcError(AssertionError):
    pass


class Proc:
    """One spawned pisces. Use ``with Proc.spawn(...) as p:`` or the ``spawn`` fixture, which closes it."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: str, stdin_data: bytes | None = None) -> None:
        self.argv = argv
        self.started = time.monotonic()
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  env=env, cwd=cwd, start_new_session=True)
        self.raw_lines: list[bytes] = []  # every stdout line, as written (without the final \n)
        self.frames: list[Frame] = []  # every frame read so far, in order
        self._q: queue.Queue[bytes | None] = queue.Queue()
        self._stderr = bytearray()
        self._eof = False
        self.extra_pgids: set[int] = set()  # process groups to kill at close (tool children)
        threading.Thread(target=self._read_stdout, daemon=True).start()
        self._stderr_thread = threading.Thread(target=self._read_stderr, daemon=True)
        self._stderr_thread.start()

    @classmethod
    def rpc(cls, home: Home, *args: str, env: dict[str, str] | None = None) -> "Proc":
        return cls([*PISCES, "--mode", "rpc", *args], env or home.env(), home.cwd)

    # -- reading --------------------------------------------------------------------------------
    def _read_stdout(self) -> None:
        buf = b""
        out = self.p.stdout
        assert out is not None
        while True:
            try:
                chunk = out.read1(1 << 20)
            except (OSError, ValueError):
                chunk = b""
            if not chunk:
                break
            buf += chunk
            while True:
                nl = buf.find(b"\n")
                if nl < 0:
                    break
                line, buf = buf[:nl], buf[nl + 1:]
                self.raw_lines.append(line)
                self._q.put(line)
        if buf:  # a partial last line: kept so that the JSON-lines check sees it
            self.raw_lines.append(buf)
            self._q.put(buf)
        self._q.put(None)

    def _read_stderr(self) -> None:
        err = self.p.stderr
        assert err is not None
        while True:
            try:
                chunk = err.read1(65536)
            except (OSError, ValueError):
                break
            if not chunk:
                break
            self._stderr.extend(chunk)

    @property
    def stderr(self) -> str:
        """What the process wrote to stderr *so far*: a reader thread collects it, so text the process writes
        just before a frame may not be here yet when the frame is. To check for a message, wait for it
        (``wait_stderr``) instead of reading this at once."""
        return self._stderr.decode("utf-8", "replace")

    def wait_stderr(self, text: str, timeout: float = 30.0) -> str:
        """stderr once it holds ``text`` (bounded by ``timeout``); fails with what it holds instead."""
        deadline = time.monotonic() + timeout
        while text not in self.stderr:
            if time.monotonic() >= deadline or (self.p.poll() is not None and not self._stderr_open()):
                if text in self.stderr:
                    break
                raise self._fail(f"stderr does not say {text!r} within {timeout} s")
            time.sleep(0.02)
        return self.stderr

    def _stderr_open(self) -> bool:
        thread = getattr(self, "_stderr_thread", None)
        return thread is not None and thread.is_alive()

    def _fail(self, why: str) -> ProcError:
        tail = [json.dumps(f)[:300] for f in self.frames[-8:]]
        return ProcError(f"{why}\nlast frames:\n  " + "\n  ".join(tail) + f"\nstderr tail:\n{self.stderr[-2000:]}")

    def next(self, timeout: float = 10.0) -> Frame:
        """The next frame; fails on timeout, on end of output, or on a line that is not a JSON object."""
        if self._eof:
            raise self._fail("stdout already ended")
        try:
            line = self._q.get(timeout=timeout)
        except queue.Empty:
            raise self._fail(f"no frame within {timeout} s") from None
        if line is None:
            self._eof = True
            raise self._fail(f"stdout ended (exit status {self.p.poll()})")
        frame = self._frame(line)
        self.frames.append(frame)
        return frame

    def _frame(self, line: bytes) -> Frame:
        """One stdout line as a frame: a line that is not a JSON object fails the test."""
        try:
            frame = loads(line)
        except ValueError:
            raise self._fail(f"stdout line is not JSON: {line[:300]!r}") from None
        if not isinstance(frame, dict):
            raise self._fail(f"stdout line is not a JSON object: {line[:300]!r}")
        return frame

    def until(self, pred: Pred, timeout: float = 10.0) -> list[Frame]:
        """Frames read up to and including the first one matching ``pred``."""
        got: list[Frame] = []
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise self._fail(f"no matching frame within {timeout} s")
            got.append(self.next(left))
            if pred(got[-1]):
                return got

    def until_type(self, ftype: str, timeout: float = 10.0) -> list[Frame]:
        return self.until(lambda f: f.get("type") == ftype, timeout)

    def drain(self, quiet: float = 0.2) -> list[Frame]:
        """Every frame that arrives until nothing has come for ``quiet`` seconds."""
        got: list[Frame] = []
        while True:
            try:
                line = self._q.get(timeout=quiet)
            except queue.Empty:
                return got
            if line is None:
                self._eof = True
                return got
            frame = loads(line)
            self.frames.append(frame)
            got.append(frame)

    # -- writing --------------------------------------------------------------------------------
    def send(self, obj: Any) -> None:
        """``obj`` as one line: a dict/list is JSON-encoded; str/bytes are sent as given (plus ``\\n``)."""
        if isinstance(obj, bytes):
            data = obj
        elif isinstance(obj, str):
            data = obj.encode("utf-8")
        else:
            data = json.dumps(obj, ensure_ascii=False).encode("utf-8")
        self.write(data + b"\n")

    def write(self, data: bytes) -> None:
        assert self.p.stdin is not None
        try:
            self.p.stdin.write(data)
            self.p.stdin.flush()
        except BrokenPipeError:
            raise self._fail("stdin is closed: the process is gone") from None

    _ids = 0

    def request(self, cmd: dict, timeout: float = 10.0) -> Frame:
        """Send ``cmd`` (an ``id`` is added if absent) and return its response; events read meanwhile stay in
        ``self.frames`` and in ``self.last_events``."""
        if "id" not in cmd:
            Proc._ids += 1
            cmd = {"id": f"r{Proc._ids}", **cmd}
        start = len(self.frames)
        self.send(cmd)
        rid = cmd["id"]
        self.until(lambda f: f.get("type") == "response" and f.get("id") == rid, timeout)
        got = self.frames[start:]
        self.last_events = got[:-1]
        return got[-1]

    def ok(self, cmd: dict, timeout: float = 10.0) -> Any:
        """``request`` that must succeed; returns ``data`` (or None when absent)."""
        resp = self.request(cmd, timeout)
        if resp.get("success") is not True:
            raise self._fail(f"{cmd.get('type')} failed: {resp}")
        return resp.get("data")

    # -- ending ---------------------------------------------------------------------------------
    def close_stdin(self) -> None:
        try:
            if self.p.stdin is not None and not self.p.stdin.closed:
                self.p.stdin.close()
        except OSError:
            pass

    def wait(self, timeout: float) -> int:
        return self.p.wait(timeout=timeout)

    def close(self, timeout: float = 5.0) -> int | None:
        """Close stdin and wait; kill whatever is left (the process group, known tool groups)."""
        self.close_stdin()
        code: int | None
        try:
            code = self.p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            code = None
        for pgid in {self.p.pid, *self.extra_pgids}:
            try:
                os.killpg(pgid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        if code is None:
            self.p.wait(timeout=5)
        for stream in (self.p.stdout, self.p.stderr):
            try:
                stream.close()  # type: ignore[union-attr]
            except (OSError, ValueError, AttributeError):
                pass
        return code

    def __enter__(self) -> "Proc":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def loads(line: bytes) -> Any:
    """json.loads, also for values nested deeper than Python's recursion limit (a long session's tree)."""
    try:
        return json.loads(line)
    except RecursionError:
        old = sys.getrecursionlimit()
        sys.setrecursionlimit(max(old, 20_000))
        try:
            return json.loads(line)
        finally:
            sys.setrecursionlimit(old)


# -- helpers for assertions ----------------------------------------------------------------------
def types(frames: Iterable[Frame]) -> list[str]:
    return [f.get("type", "?") for f in frames]


def compact(frames: Iterable[Frame]) -> list[str]:
    """Event names with the role for message events and the command for responses; message_update runs
    collapse to one ``message_update*``. Makes full-sequence assertions readable."""
    out: list[str] = []
    for f in frames:
        t = f.get("type", "?")
        if t in ("message_start", "message_end"):
            t = f"{t}:{f['message'].get('role')}"
        elif t == "response":
            t = f"response:{f.get('command')}"
        elif t.startswith("tool_execution_"):
            t = f"{t}:{f.get('toolName')}"
        if t == "message_update" and out and out[-1] == "message_update*":
            continue
        out.append("message_update*" if t == "message_update" else t)
    return out


def pgrp_alive(pgid: int) -> list[int]:
    """Pids of live (not zombie) processes in process group ``pgid``."""
    return in_groups({pgid})


# -- fixtures (import them into a test module: ``from e2eproc import home, spawn``) ---------------
import pytest  # noqa: E402


@pytest.fixture
def home(tmp_path: Any) -> Home:
    return Home(str(tmp_path))


@pytest.fixture
def spawn(home: Home) -> Any:
    """``spawn(*args)`` starts ``pisces --mode rpc *args`` and reads its ``ready`` frame; every process started
    is closed at teardown, whatever the test's outcome."""
    procs: list[Proc] = []

    def start(*args: str, env: dict[str, str] | None = None, ready: bool = True) -> Proc:
        p = Proc.rpc(home, *args, env=env)
        procs.append(p)
        if ready:
            first = p.next(15)
            assert first == {"type": "ready"}, first
        return p

    yield start
    for p in procs:
        p.close()
