"""Running shell commands: the process runner behind the LLM ``bash`` tool and the RPC ``bash`` command.

``run_shell(command, cwd, ...)`` runs ``<shell> -c <command>`` in its own process group with stdout and
stderr merged into one pipe, streams decoded chunks to ``on_chunk``, and keeps the output in an
``OutputAccumulator``: a rolling tail for display plus, once the output passes 2000 lines or 50 KiB, a temp
file ``/tmp/pisces-bash-<16 hex>.log`` holding all of it (mode 0600: only the user can read it). When
that file cannot be written to the end (a full disk), ``full_output_error`` says so and how much it holds.

Completion is "the shell exited, and its pipe closed or 100 ms passed", never "every pipe closed": a
background child (``echo hi; (sleep 30 &)``) inherits the pipe and would hold it open for its lifetime,
which is why asyncio's ``Process.wait()``/``communicate()`` are not used. Abort and timeout SIGKILL the
whole process group.
"""

from __future__ import annotations

import asyncio
import codecs
import errno
import os
import re
import secrets
import shutil
import signal as _signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from pisces.ai.abort import AbortSignal
from pisces.core.config.paths import agent_dir
from pisces.core.safe_open import create_private_file
from pisces.core.tools.backends import ProcessOutcome
from pisces.core.tools.truncate import DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES, TruncationResult, truncate_tail, utf8_len

if TYPE_CHECKING:
    from pisces.core.tools.backends import ShellBackend

EXIT_STDIO_GRACE = 0.1  # seconds to wait for the pipe after the shell exited


# ---------------------------------------------------------------------------------------------
# Shell and environment
# ---------------------------------------------------------------------------------------------
class ShellError(Exception):
    """The command could not be started (no shell, no working directory); the message is for the user."""


def get_shell_config(shell_path: str | None = None) -> tuple[str, list[str]]:
    """(shell, args before the command): ``shellPath`` from settings, else /bin/bash, else bash on PATH,
    else sh."""
    if shell_path:
        if os.path.exists(shell_path):
            return shell_path, ["-c"]
        raise ShellError(f"Custom shell path not found: {shell_path}")
    if os.path.exists("/bin/bash"):
        return "/bin/bash", ["-c"]
    found = shutil.which("bash")
    if found:
        return found, ["-c"]
    return "sh", ["-c"]


def _agent_bin_dir() -> str:
    try:
        return os.path.join(agent_dir(), "bin")
    except ImportError:  # pragma: no cover - the config module is optional for this runner
        env = os.environ.get("PISCES_CODING_AGENT_DIR") or os.environ.get("PI_CODING_AGENT_DIR")
        base = os.path.expanduser(env) if env else os.path.join(os.path.expanduser("~"), ".pisces", "agent")
        return os.path.join(base, "bin")


PRIVATE_ENV = frozenset({"PISCES_WEB_TOKEN"})  # what no command pisces runs inherits


def get_shell_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for commands: ours, with ``<agent dir>/bin`` first on PATH, without pisces' own secrets
    (``PISCES_WEB_TOKEN``: a command holding it could drive the web server's session, its sandbox included)."""
    env = {k: v for k, v in (os.environ if base is None else base).items() if k not in PRIVATE_ENV}
    bin_dir = _agent_bin_dir()
    key = next((k for k in env if k.lower() == "path"), "PATH")
    current = env.get(key, "")
    entries = [p for p in current.split(os.pathsep) if p]
    if bin_dir not in entries:
        env[key] = os.pathsep.join([bin_dir, current]) if current else bin_dir
    return env


# ---------------------------------------------------------------------------------------------
# Output sanitising (the RPC command strips ANSI and control characters; the LLM tool does not)
# ---------------------------------------------------------------------------------------------
_ANSI = re.compile(
    r"(?:\x1b\][^\x07\x1b]*(?:\x07|\x1b\\))"            # OSC ... BEL / ST
    r"|(?:[\x1b\x9b]\[[0-?]*[ -/]*[@-~])"               # CSI
    r"|(?:\x1b[PX^_][^\x1b]*\x1b\\)"                    # DCS / SOS / PM / APC ... ST
    r"|(?:\x1b[ -/]*[0-~])"                              # two-char and nF escapes
)
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\ufff9-\ufffb]")  # keeps \t and \n; \r goes too


def sanitize_output(text: str) -> str:
    """ANSI escapes stripped, ``\\r`` removed, other control characters (but tab and newline) dropped."""
    return _CONTROL.sub("", _ANSI.sub("", text))


# ---------------------------------------------------------------------------------------------
# Output accumulation
# ---------------------------------------------------------------------------------------------
@dataclass(slots=True)
class OutputSnapshot:
    content: str
    truncation: TruncationResult
    full_output_path: str | None
    full_output_error: str | None = None  # the full-output file is incomplete: why, and what it holds


class OutputAccumulator:
    """Streaming output with bounded memory: a decoded tail (about 2x the byte limit) for snapshots, exact
    line and byte totals, and a temp file with the complete output once it is over either limit."""

    def __init__(self, *, max_lines: int = DEFAULT_MAX_LINES, max_bytes: int = DEFAULT_MAX_BYTES,
                 temp_prefix: str = "pisces-bash", sanitize: bool = False) -> None:
        self.max_lines = max_lines
        self.max_bytes = max_bytes
        self.max_rolling_bytes = max(max_bytes * 2, 1)
        self.temp_prefix = temp_prefix
        self.sanitize = sanitize
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._pending: list[bytes] = []       # written to the temp file when it gets opened
        self._tail = ""
        self._tail_bytes = 0
        self._tail_at_line_start = True
        self.total_raw_bytes = 0
        self.total_bytes = 0                  # UTF-8 bytes of the decoded (and sanitised) text
        self.total_lines = 1
        self.last_line_bytes = 0
        self.finished = False
        self.full_output_path: str | None = None
        self.full_output_error: str | None = None
        self._fd: int | None = None
        self._saved = 0                       # bytes in the full-output file

    # -- input
    def append(self, data: bytes) -> str:
        """Add raw output; returns the text it decoded to (what a streaming consumer shows)."""
        if self.finished:
            raise RuntimeError("Cannot append to a finished output accumulator")
        self.total_raw_bytes += len(data)
        text = self._decoder.decode(data)
        if self.sanitize:
            text = sanitize_output(text)
        self._add_text(text)
        stored = text.encode("utf-8", "replace") if self.sanitize else data
        if self.full_output_path is not None or self._over_limit():
            self._ensure_file()
            if stored:
                self._save(stored)
        elif stored:
            self._pending.append(stored)
        return text

    def finish(self) -> str:
        """No more input: flush the decoder (a cut-off character becomes U+FFFD)."""
        if self.finished:
            return ""
        self.finished = True
        text = self._decoder.decode(b"", final=True)
        if self.sanitize:
            text = sanitize_output(text)
        self._add_text(text)
        if self._over_limit():
            self._ensure_file()
        return text

    # -- output
    def snapshot(self, persist_if_truncated: bool = False) -> OutputSnapshot:
        tail = truncate_tail(self._snapshot_text(), self.max_lines, self.max_bytes)
        truncated = self.total_lines > self.max_lines or self.total_bytes > self.max_bytes
        by = None
        if truncated:
            by = tail.truncatedBy or ("bytes" if self.total_bytes > self.max_bytes else "lines")
        trunc = TruncationResult(tail.content, truncated, by, self.total_lines, self.total_bytes,
                                 tail.outputLines, tail.outputBytes, tail.lastLinePartial, tail.firstLineExceedsLimit,
                                 self.max_lines, self.max_bytes)
        if persist_if_truncated and truncated:
            self._ensure_file()
        return OutputSnapshot(trunc.content, trunc, self.full_output_path, self.full_output_error)

    def close(self) -> None:
        """Close the temp file (it stays on disk)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    # -- internals
    def _add_text(self, text: str) -> None:
        if not text:
            return
        size = utf8_len(text)
        self.total_bytes += size
        self._tail += text
        self._tail_bytes += size
        if self._tail_bytes > self.max_rolling_bytes * 2:
            self._trim_tail()
        newlines = text.count("\n")
        if newlines == 0:
            self.last_line_bytes += size
        else:
            self.total_lines += newlines
            self.last_line_bytes = utf8_len(text[text.rindex("\n") + 1:])

    def _trim_tail(self) -> None:
        data = self._tail.encode("utf-8", "replace")
        if len(data) <= self.max_rolling_bytes:
            self._tail_bytes = len(data)
            return
        start = len(data) - self.max_rolling_bytes
        while start < len(data) and (data[start] & 0xC0) == 0x80:
            start += 1
        self._tail_at_line_start = data[start - 1] == 0x0A if start > 0 else self._tail_at_line_start
        self._tail = data[start:].decode("utf-8", "replace")
        self._tail_bytes = len(data) - start

    def _snapshot_text(self) -> str:
        if self._tail_at_line_start:
            return self._tail
        nl = self._tail.find("\n")
        return self._tail if nl == -1 else self._tail[nl + 1:]

    def _over_limit(self) -> bool:
        return (self.total_raw_bytes > self.max_bytes or self.total_bytes > self.max_bytes
                or self.total_lines > self.max_lines)

    def _ensure_file(self) -> None:
        if self.full_output_path is not None:
            return
        name = f"{self.temp_prefix}-{secrets.token_hex(8)}.log"
        try:
            self._fd, self.full_output_path = create_private_file(name)
        except OSError as exc:
            self.full_output_path = os.path.join(tempfile.gettempdir(), name)
            self.full_output_error = f"it could not be created ({_os_error(exc)})"
            self._pending = []
            return
        pending, self._pending = self._pending, []
        for chunk in pending:
            self._save(chunk)

    def _save(self, data: bytes) -> None:
        """Append to the full-output file; the first failure closes it and is reported, never raised (a
        command's output must keep flowing when the temp dir is full)."""
        if self._fd is None:
            return
        try:
            view = memoryview(data)
            while view:
                n = os.write(self._fd, view)
                view = view[n:]
                self._saved += n
        except OSError as exc:
            self.close()
            self.full_output_error = (f"it is incomplete: writing it failed after {self._saved} bytes "
                                      f"({_os_error(exc)})")


def _os_error(exc: OSError) -> str:
    code = errno.errorcode.get(exc.errno or 0, "")
    text = exc.strerror or str(exc)
    return f"{code}: {text}" if code else text


# ---------------------------------------------------------------------------------------------
# Process running
# ---------------------------------------------------------------------------------------------
_running_groups: set[int] = set()


def kill_process_group(pid: int) -> None:
    """SIGKILL the process group led by ``pid`` (falling back to the process alone)."""
    try:
        os.killpg(pid, _signal.SIGKILL)
    except OSError:
        try:
            os.kill(pid, _signal.SIGKILL)
        except OSError:
            pass


def kill_running_process_groups() -> None:
    """Kill every command still running (for shutdown on SIGTERM/SIGHUP)."""
    for pid in list(_running_groups):
        kill_process_group(pid)
    _running_groups.clear()


class _Protocol(asyncio.SubprocessProtocol):
    def __init__(self, loop: asyncio.AbstractEventLoop, on_data: Callable[[bytes], None]) -> None:
        self._on_data = on_data
        self.exited: asyncio.Future[int | None] = loop.create_future()
        self.pipe_closed: asyncio.Future[None] = loop.create_future()
        self.transport: asyncio.SubprocessTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        if isinstance(transport, asyncio.SubprocessTransport):  # always, for a subprocess protocol
            self.transport = transport

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        if not self.pipe_closed.done():
            self._on_data(data)

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        if not self.pipe_closed.done():
            self.pipe_closed.set_result(None)

    def process_exited(self) -> None:
        if not self.exited.done():
            self.exited.set_result(self.transport.get_returncode() if self.transport else None)


async def run_process(argv: list[str], cwd: str, env: dict[str, str] | None, on_data: Callable[[bytes], None], *,
                      signal: AbortSignal | None = None, timeout: float | None = None,
                      sandbox: Any = None) -> ProcessOutcome:
    """Run ``argv`` in a new session/process group, stdout+stderr merged, stdin closed. ``on_data`` gets raw
    chunks. Returns once the process exited and its pipe closed (or 100 ms after the exit). ``sandbox``: a
    ``pisces.core.sandbox.launch.Launch`` confining the process (its ruleset is closed once it started)."""
    loop = asyncio.get_running_loop()
    if signal is not None and signal.aborted:
        if sandbox is not None:
            sandbox.close()
        return ProcessOutcome(None, True, False)
    proto = _Protocol(loop, on_data)
    extra: dict[str, Any] = {}
    if sandbox is not None:
        extra = sandbox.popen_kwargs()
        env = sandbox.env
        argv = sandbox.wrap(argv)
    try:
        transport, _ = await loop.subprocess_exec(
            lambda: proto, *argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            cwd=cwd, env=env, start_new_session=True, **extra)
    finally:
        if sandbox is not None:
            sandbox.close()
    pid = transport.get_pid()
    _running_groups.add(pid)
    state = {"cancelled": False, "timed_out": False}

    def abort() -> None:
        state["cancelled"] = True
        kill_process_group(pid)

    def on_timeout() -> None:
        state["timed_out"] = True
        kill_process_group(pid)

    remove = signal.add_listener(abort) if signal is not None else (lambda: None)
    timer = loop.call_later(timeout, on_timeout) if timeout is not None and timeout > 0 else None
    try:
        code = await proto.exited
        if not proto.pipe_closed.done():
            try:
                await asyncio.wait_for(asyncio.shield(proto.pipe_closed), EXIT_STDIO_GRACE)
            except asyncio.TimeoutError:
                pass
    except BaseException:
        kill_process_group(pid)  # our caller was cancelled: leave nothing running
        raise
    finally:
        remove()
        if timer is not None:
            timer.cancel()
        _running_groups.discard(pid)
        transport.close()
    exit_code = code if code is not None and code >= 0 else None
    return ProcessOutcome(exit_code, state["cancelled"], state["timed_out"])


# ---------------------------------------------------------------------------------------------
# The shell runner
# ---------------------------------------------------------------------------------------------
@dataclass(slots=True)
class ExecResult:
    output: str                       # the output's tail, within the line/byte limits
    exit_code: int | None             # None when cancelled, timed out or killed by a signal
    cancelled: bool
    timed_out: bool
    truncated: bool
    full_output_path: str | None      # temp file with the complete output (set when truncated)
    full_output_error: str | None     # why that file is incomplete (a full disk), else None
    truncation: TruncationResult
    last_line_bytes: int              # UTF-8 bytes of the last (possibly partial) line
    duration: float                   # seconds


async def run_shell(command: str, cwd: str, *, signal: AbortSignal | None = None, timeout: float | None = None,
                    on_chunk: Callable[[str], None] | None = None, env: dict[str, str] | None = None,
                    shell_path: str | None = None, accumulator: OutputAccumulator | None = None,
                    sanitize: bool = False, backend: ShellBackend | None = None,
                    tool_call_id: str | None = None, sandbox: Any = None) -> ExecResult:
    """Run ``command`` with the user's shell in ``cwd`` (or through ``backend``, a host's terminal).
    ``sandbox``: a ``Launch`` confining it (see ``run_process``; never with a ``backend``).

    ``on_chunk`` receives each decoded chunk (sanitised when ``sanitize``) right after it was added to
    the accumulator, so a caller can take ``accumulator.snapshot()`` from it. ``timeout`` is in seconds
    (None or <= 0: none). Raises ShellError when the command cannot be started."""
    if backend is None and not os.path.exists(cwd):
        raise ShellError(f"Working directory does not exist: {cwd}\nCannot execute bash commands.")
    acc = accumulator or OutputAccumulator(sanitize=sanitize)

    def on_data(data: bytes) -> None:
        text = acc.append(data)
        if on_chunk is not None and text:
            on_chunk(text)

    started = time.monotonic()
    try:
        if backend is not None:
            outcome = await backend.run(command, cwd, on_data=on_data, signal=signal, timeout=timeout, env=env,
                                        tool_call_id=tool_call_id)
        else:
            shell, args = get_shell_config(shell_path)
            try:
                outcome = await run_process([shell, *args, command], cwd,
                                            env if env is not None else get_shell_env(), on_data, signal=signal,
                                            timeout=timeout, sandbox=sandbox)
            except OSError as exc:
                raise ShellError(f"Failed to start {shell}: {exc.strerror or exc}") from None
    except BaseException:
        acc.close()
        raise
    tail = acc.finish()
    if on_chunk is not None and tail:
        on_chunk(tail)
    snap = acc.snapshot(persist_if_truncated=True)
    acc.close()
    cancelled = outcome.cancelled or (signal is not None and signal.aborted)
    exit_code = None if cancelled or outcome.timed_out else outcome.exit_code
    return ExecResult(snap.content, exit_code, cancelled, outcome.timed_out, snap.truncation.truncated,
                      snap.full_output_path, snap.full_output_error, snap.truncation, acc.last_line_bytes,
                      time.monotonic() - started)


__all__ = [
    "run_shell", "run_process", "ExecResult", "ProcessOutcome", "OutputAccumulator", "OutputSnapshot", "ShellError",
    "get_shell_config", "get_shell_env", "sanitize_output", "kill_process_group", "kill_running_process_groups",
]
