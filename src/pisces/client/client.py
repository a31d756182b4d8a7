"""A client for pi's JSON-lines RPC protocol: spawns ``pisces --mode rpc`` (or any pi-compatible command).

    async with RpcClient(args=["--provider", "faux", "--no-session"]) as client:
        state = await client.get_state()
        events = await client.prompt_and_wait("hello")

Every command has a typed method returning the response ``data`` (``None`` when the response has none); a
``success:false`` response raises :class:`RpcCommandError`. Every frame that is not a response to one of our
requests is an event: it goes to ``on_event`` callbacks and to every open ``events()`` stream. When the process
dies, every pending call fails with :class:`RpcProcessExited` (exit status and the tail of stderr) and every
event stream ends, so nothing waits forever. :class:`pisces.client.sync.SyncRpcClient` offers the
same methods without asyncio.

The process is driven through an ``asyncio.SubprocessProtocol``, not stream readers: stdout is split on
``\\n`` only (lines of any length; U+2028 is content), and the exit is noticed as soon as the child is reaped,
even when a grandchild still holds the pipes open.
"""

from __future__ import annotations

import asyncio
import collections
import inspect
import json
import logging
import os
import subprocess
import sys
import time
import weakref
from typing import Any, Callable, Iterable

import msgspec

# the client is split over the modules of pisces.client; every public name stays importable from here
from pisces.client.commands import RpcCommands
from pisces.client.events import Event, EventFilter, EventStream, _matcher, _remaining
from pisces.client.transport import (
    COMMAND_IN_HEAD,
    ID_IN_HEAD,
    RESPONSE_IN_HEAD,
    STDERR_KEEP,
    STDERR_REPORT,
    _AgentProtocol,
    decode_frame,
)
from pisces.client.types import (  # noqa: F401 - the TypedDicts are re-exported
    BashResult,
    CancelledResult,
    ImageContent,
    RpcClientError,
    RpcCommandError,
    RpcProcessExited,
    RpcTimeoutError,
    SessionState,
)

__all__ = [
    "RpcClient", "EventStream", "RpcClientError", "RpcCommandError", "RpcProcessExited", "RpcTimeoutError",
    "DEFAULT_COMMAND", "SyncRpcClient",  # noqa: F822 - provided by __getattr__ (sync.py imports this module)
]

log = logging.getLogger("pisces.rpc.client")

DEFAULT_COMMAND: list[str] = [sys.executable, "-m", "pisces", "--mode", "rpc"]
_DEFAULT: Any = object()


_encode = msgspec.json.Encoder().encode
_SETTLE_TYPES = frozenset({"agent_settled", "agent_end", "auto_retry_end", "compaction_end", "auto_compaction_end"})


# -- the client ----------------------------------------------------------------------------------
class RpcClient(RpcCommands):
    """Drive a pi-compatible agent over stdin/stdout.

    ``command`` defaults to ``[sys.executable, "-m", "pisces", "--mode", "rpc"]``; ``args`` are appended.
    ``env`` adds variables to the inherited environment (a value of None removes one). ``ready_timeout``:
    how long ``start()`` waits for ``{"type":"ready"}`` before probing with ``get_state`` (pi sends no
    ready; 0 probes at once; None waits for ready only), and ``probe_timeout`` bounds that probe.
    ``request_timeout``: default timeout of every call (None: wait as long as the process lives).
    ``stop_timeout``: how long ``stop()`` waits after closing stdin before SIGTERM, then SIGKILL.
    Responses that match none of our calls (e.g. to ``send_raw`` lines) are delivered as events.
    """

    def __init__(self, command: list[str] | None = None, *, args: Iterable[str] = (),
                 cwd: str | os.PathLike | None = None, env: dict[str, str | None] | None = None,
                 ready_timeout: float | None = 5.0, request_timeout: float | None = None,
                 probe_timeout: float = 30.0, stop_timeout: float = 3.0) -> None:
        self.command = [str(c) for c in (command if command is not None else DEFAULT_COMMAND)] + [str(a) for a in args]
        self.cwd = cwd
        self.env = env
        self.ready_timeout = ready_timeout
        self.request_timeout = request_timeout
        self.probe_timeout = probe_timeout
        self.stop_timeout = stop_timeout
        self.ready_received = False
        self.stray_lines: collections.deque[bytes] = collections.deque(maxlen=20)  # stdout lines that are not objects
        self._transport: asyncio.SubprocessTransport | None = None
        self._proto: _AgentProtocol | None = None
        self._pending: dict[str, tuple[str, asyncio.Future]] = {}
        self._next_id = 0
        self._callbacks: list[Callable[[Event], Any]] = []
        self._streams: "weakref.WeakSet[EventStream]" = weakref.WeakSet()
        self._tasks: set[asyncio.Task] = set()
        self._finish_task: asyncio.Task | None = None
        self._exit_error: RpcProcessExited | None = None
        self._stopping = False
        self._sent_settled = False  # the agent sends agent_settled (pisces does, pi does not)
        self._retry_pending = False

    # -- lifecycle ----------------------------------------------------------------------------
    async def start(self) -> "RpcClient":
        """Spawn the agent and wait until it is ready (a ``ready`` frame, or an answer to ``get_state``)."""
        if self._transport is not None:
            raise RpcClientError("the client was already started")
        loop = asyncio.get_running_loop()
        self._ready = loop.create_future()
        self._exited = asyncio.Event()
        self._stdout_closed = asyncio.Event()
        self._stderr_closed = asyncio.Event()
        self._finished = asyncio.Event()
        env = None
        if self.env is not None:
            env = dict(os.environ)
            for key, value in self.env.items():
                if value is None:
                    env.pop(key, None)
                else:
                    env[key] = str(value)
        proto = _AgentProtocol(self)
        try:
            transport, _ = await loop.subprocess_exec(
                lambda: proto, *self.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, cwd=self.cwd, env=env)
        except OSError as exc:
            raise RpcClientError(f"cannot start {' '.join(self.command)}: {exc}") from exc
        self._transport, self._proto = transport, proto
        try:
            await self._await_ready()
        except BaseException:
            await self.stop(timeout=0)
            raise
        return self

    async def _await_ready(self) -> None:
        finished = asyncio.ensure_future(self._finished.wait())
        try:
            if self.ready_timeout is None or self.ready_timeout > 0:
                await asyncio.wait([self._ready, finished], timeout=self.ready_timeout,
                                   return_when=asyncio.FIRST_COMPLETED)
            if self._finished.is_set():
                raise self._exit_exception()
            if self._ready.done():
                return
        finally:
            finished.cancel()
        try:  # no ready frame (pi sends none): the agent is ready once it answers a command
            await self.request_response("get_state", timeout=self.probe_timeout)
        except RpcTimeoutError:
            raise RpcClientError(
                f"the agent sent no ready frame within {self.ready_timeout:g} s and did not answer get_state "
                f"within {self.probe_timeout:g} s [{' '.join(self.command)}]") from None

    async def stop(self, timeout: float | None = None) -> int | None:
        """Close stdin and wait for the exit (SIGTERM, then SIGKILL, after ``timeout``). Returns the exit status."""
        if self._transport is None:
            return None
        self._stopping = True
        grace = self.stop_timeout if timeout is None else timeout
        stdin = self._transport.get_pipe_transport(0)
        if stdin is not None:
            stdin.close()
        if not await _wait_event(self._exited, grace):
            await self._kill()
        await _wait_event(self._finished, 2.0)
        self._transport.close()  # also closes pipes a grandchild may still hold
        self._finish_now()
        for task in list(self._tasks):
            task.cancel()
        return self._transport.get_returncode()

    async def _kill(self) -> None:
        transport = self._transport
        if transport is None or transport.get_returncode() is not None:
            return
        self._stopping = True
        for send in (transport.terminate, transport.kill):
            try:
                send()
            except ProcessLookupError:
                return
            if await _wait_event(self._exited, 1.0):
                return

    aclose = stop

    async def __aenter__(self) -> "RpcClient":
        return await self.start()

    async def __aexit__(self, *exc: Any) -> None:
        await self.stop()

    @property
    def pid(self) -> int | None:
        return None if self._transport is None else self._transport.get_pid()

    @property
    def returncode(self) -> int | None:
        return None if self._transport is None else self._transport.get_returncode()

    @property
    def is_running(self) -> bool:
        return self._transport is not None and self._exit_error is None and self.returncode is None

    @property
    def stderr_tail(self) -> str:
        """The last ~2 KB the agent wrote to stderr."""
        if self._proto is None:
            return ""
        return bytes(self._proto.stderr[-STDERR_REPORT:]).decode("utf-8", "replace")

    @property
    def stderr_text(self) -> str:
        """Up to the last 64 KB the agent wrote to stderr."""
        return "" if self._proto is None else bytes(self._proto.stderr[-STDERR_KEEP:]).decode("utf-8", "replace")

    # -- the end of the process -----------------------------------------------------------------
    def _begin_finish(self) -> None:
        if self._finish_task is None and self._exit_error is None:
            self._finish_task = asyncio.ensure_future(self._finish())

    async def _finish(self) -> None:
        # Let the last output arrive: stdout and stderr close when the process exits, unless a grandchild
        # still holds them, so every wait is short.
        if self._exited.is_set():
            await _wait_event(self._stdout_closed, 0.5)
        else:
            await _wait_event(self._exited, 1.0)
        await _wait_event(self._stderr_closed, 0.2)
        self._finish_now()

    def _finish_now(self) -> None:
        if self._exit_error is not None:
            return
        transport = self._transport
        self._exit_error = RpcProcessExited(
            None if transport is None else transport.get_returncode(), self.stderr_tail,
            stopped=self._stopping, command=self.command)
        pending, self._pending = self._pending, {}
        for _, future in pending.values():
            if not future.done():
                future.set_exception(self._exit_exception())
        if not self._ready.done():
            self._ready.cancel()
        for stream in list(self._streams):
            stream._end()
        self._finished.set()

    def _exit_exception(self) -> RpcProcessExited:
        err = self._exit_error
        if err is None:
            return RpcProcessExited(self.returncode, self.stderr_tail, command=self.command)
        return RpcProcessExited(err.returncode, err.stderr_tail, stopped=err.stopped, command=err.command)

    # -- incoming frames ------------------------------------------------------------------------
    def _handle_line(self, line: bytes) -> None:
        """One stdout line. Never raises: a line that cannot be handled must not stop the reader (the rest of
        the chunk it came in, and every later line, would be lost and the calls waiting on them would hang)."""
        try:
            self._take_line(line)
        except Exception:
            log.exception("could not handle a line from the agent: %r", line[:200])

    def _take_line(self, line: bytes) -> None:
        if line.endswith(b"\r"):
            line = line[:-1]
        if not line.strip():
            return
        frame, error = decode_frame(line)
        if error is not None:
            self.stray_lines.append(line[:1000])
            self._fail_undecodable(line, error)
            return
        if not isinstance(frame, dict):
            self.stray_lines.append(line[:1000])
            log.debug("agent wrote a line that is not a JSON object: %r", line[:200])
            return
        if frame.get("type") == "response" and self._resolve(frame):
            return
        self._dispatch_event(frame)

    def _fail_undecodable(self, line: bytes, error: str) -> None:
        """A line that is not JSON we can read: when it is the response to one of our calls (its id, or pi's
        id-less error with its command, near the start of the line), that call fails with the reason."""
        head = line[:512]
        entry = None
        m = ID_IN_HEAD.search(head)
        if m is not None:
            entry = self._pending.pop(m.group(1).decode("ascii"), None)
        elif RESPONSE_IN_HEAD.search(head):
            c = COMMAND_IN_HEAD.search(head)
            command = c.group(1).decode("utf-8", "replace") if c else None
            for key, (cmd, _) in self._pending.items():
                if cmd == command:
                    entry = self._pending.pop(key)
                    break
        if entry is None:
            log.warning("agent wrote a line that could not be decoded (%s): %r", error, line[:200])
            return
        command, future = entry
        if not future.done():
            future.set_exception(RpcClientError(
                f"the agent's response to {command} could not be decoded ({error}; {len(line)} bytes)"))

    def _resolve(self, frame: dict) -> bool:
        req_id = frame.get("id")
        entry = self._pending.pop(req_id, None) if isinstance(req_id, str) else None
        if entry is None and req_id is None:
            # pi drops the id of some error responses: give it to the oldest call of that command
            command = frame.get("command")
            for key, (cmd, _) in self._pending.items():
                if cmd == command:
                    entry = self._pending.pop(key)
                    break
        if entry is None:
            return False
        future = entry[1]
        if not future.done():
            future.set_result(frame)
        return True

    def _dispatch_event(self, event: Event) -> None:
        etype = event.get("type")
        if etype == "ready":
            self.ready_received = True
            if not self._ready.done():
                self._ready.set_result(None)
        elif etype == "agent_settled":
            self._sent_settled = True
        elif etype == "auto_retry_start":
            self._retry_pending = True
        elif etype == "auto_retry_end":
            self._retry_pending = False
        for callback in list(self._callbacks):
            try:
                result = callback(event)
                if inspect.isawaitable(result):
                    task = asyncio.ensure_future(result)
                    self._tasks.add(task)
                    task.add_done_callback(self._callback_done)
            except Exception:
                log.exception("event callback failed")
        for stream in list(self._streams):
            stream._push(event)

    def _callback_done(self, task: asyncio.Task) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("event callback failed", exc_info=task.exception())

    # -- subscriptions ----------------------------------------------------------------------------
    def on_event(self, callback: Callable[[Event], Any]) -> Callable[[], None]:
        """Call ``callback(event)`` for every event (a coroutine result is run as a task). Returns an unsubscribe."""
        self._callbacks.append(callback)

        def unsubscribe() -> None:
            if callback in self._callbacks:
                self._callbacks.remove(callback)

        return unsubscribe

    def events(self, types: EventFilter = None, *, maxsize: int | None = 100_000) -> EventStream:
        """A stream of the events from now on (``async for event in client.events(): ...``).

        ``types``: an event type, several, or a predicate. The stream ends when the process is gone;
        close it (or use it as a context manager) when done early.
        """
        stream = EventStream(self, types, maxsize)
        if self._exit_error is not None:
            stream._end()
        else:
            self._streams.add(stream)
        return stream

    async def collect_events(self, until_type: EventFilter, timeout: float | None = None, *,
                             stream: EventStream | None = None) -> list[Event]:
        """Events from now (or from ``stream``) up to and including the first matching ``until_type``.

        Open a stream before the command that causes the events and pass it, or early events can be missed.
        """
        match = _matcher(until_type)
        assert match is not None, "until_type is required"
        own = stream is None
        stream = stream or self.events()
        deadline = None if timeout is None else time.monotonic() + timeout
        collected: list[Event] = []
        try:
            while True:
                event = await stream.get(_remaining(deadline))
                collected.append(event)
                if match(event):
                    return collected
        finally:
            if own:
                stream.close()

    # -- requests --------------------------------------------------------------------------------
    async def request_response(self, type: str, /, *, timeout: float | None = _DEFAULT, **fields: Any) -> dict:
        """Send ``{"id", "type", **fields}`` and return the whole response frame, successful or not."""
        if self._transport is None:
            raise RpcClientError("the client is not started: call start() or use 'async with'")
        if self._exit_error is not None:
            raise self._exit_exception()
        self._next_id += 1
        req_id = f"req-{self._next_id}"
        future = asyncio.get_running_loop().create_future()
        self._pending[req_id] = (type, future)
        try:
            try:
                await self._write({"id": req_id, "type": type, **fields})
            except (BrokenPipeError, ConnectionError, RuntimeError):
                # the process is going away: its exit (status, stderr) is the error to report
                await _wait_event(self._finished, 2.0)
                if future.done():
                    return future.result()
                raise self._exit_exception() from None
            wait = self.request_timeout if timeout is _DEFAULT else timeout
            try:
                return await asyncio.wait_for(asyncio.shield(future), wait)
            except asyncio.TimeoutError:
                raise RpcTimeoutError(f"no response to {type} within {wait:g} s") from None
        finally:
            self._pending.pop(req_id, None)
            if not future.done():
                future.cancel()

    async def request(self, type: str, /, *, timeout: float | None = _DEFAULT, **fields: Any) -> Any:
        """Send a command with the given wire fields; return its ``data`` (None if absent).

        Raises RpcCommandError on ``success:false``."""
        response = await self.request_response(type, timeout=timeout, **fields)
        if response.get("success") is False:
            raise RpcCommandError(response.get("command") or type, str(response.get("error")), response)
        return response.get("data")

    async def _call(self, type: str, **fields: Any) -> Any:
        return await self.request(type, **{k: v for k, v in fields.items() if v is not None})

    async def send_raw(self, line: str | bytes) -> None:
        """Write one line as is (a newline is added if missing). Responses it causes arrive as events."""
        data = line.encode("utf-8", "surrogatepass") if isinstance(line, str) else bytes(line)
        if not data.endswith(b"\n"):
            data += b"\n"
        await self._write_bytes(data)

    async def _write(self, frame: dict) -> None:
        try:
            data = _encode(frame)
        except (msgspec.EncodeError, TypeError, UnicodeEncodeError):
            data = json.dumps(frame, separators=(",", ":")).encode()  # lone surrogates go out as \u escapes
        await self._write_bytes(data + b"\n")

    async def _write_bytes(self, data: bytes) -> None:
        proto = self._proto
        if self._transport is None or proto is None:
            raise RpcClientError("the client is not started: call start() or use 'async with'")
        if self._exit_error is not None:
            raise self._exit_exception()
        stdin = self._transport.get_pipe_transport(0)
        if not isinstance(stdin, asyncio.WriteTransport) or stdin.is_closing() or proto.stdin_lost is not None:
            raise BrokenPipeError("the agent's stdin is closed")
        stdin.write(data)
        await proto.drain()

    async def extension_ui_response(self, id: str, value: Any = None, confirmed: bool | None = None,
                                    cancelled: bool | None = None) -> None:
        """Answer an ``extension_ui_request`` (no response is sent back)."""
        frame: dict[str, Any] = {"type": "extension_ui_response", "id": id}
        if value is not None:
            frame["value"] = value
        if confirmed is not None:
            frame["confirmed"] = confirmed
        if cancelled is not None:
            frame["cancelled"] = cancelled
        await self._write(frame)

    # -- waiting for a run -------------------------------------------------------------------------
    async def prompt_and_wait(self, message: str, images: list[ImageContent] | None = None,
                              timeout: float | None = None, *, streaming_behavior: str | None = None,
                              settle_grace: float = 0.3) -> list[Event]:
        """Send a prompt and return its events up to ``agent_settled`` (included).

        Agents that send no ``agent_settled`` (pi) are done at an ``agent_end`` followed by ``settle_grace``
        seconds of quiet with no retry or compaction under way. Raises RpcCommandError if the prompt is
        rejected, also by a later error response with its id (seed 000's late prompt failure, e.g. a spent
        budget), RpcTimeoutError after ``timeout``, RpcProcessExited if the agent dies.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        fields: dict[str, Any] = {"message": message, "images": images, "streamingBehavior": streaming_behavior}
        with self.events() as stream:
            response = await self.request_response("prompt", **{k: v for k, v in fields.items() if v is not None})
            if response.get("success") is False:
                raise RpcCommandError("prompt", str(response.get("error")), response)
            return await self._until_settled(stream, deadline, settle_grace, response.get("id"))

    async def _until_settled(self, stream: EventStream, deadline: float | None, grace: float,
                             prompt_id: Any = None) -> list[Event]:
        collected: list[Event] = []
        ended = retrying = compacting = False
        quiet = grace
        while True:
            remaining = _remaining(deadline)
            if ended and not retrying and not compacting and not self._sent_settled:
                wait = quiet if remaining is None else min(quiet, remaining)
                try:
                    event = await stream.get(wait)
                except RpcTimeoutError:
                    return collected  # the run ended and nothing followed
            else:
                event = await stream.get(remaining)
            collected.append(event)
            etype = event.get("type")
            if etype == "response" and prompt_id is not None and event.get("id") == prompt_id \
                    and event.get("success") is False:  # acknowledged, then failed
                raise RpcCommandError(event.get("command") or "prompt", str(event.get("error")), event)
            if etype == "agent_settled":
                return collected
            if etype == "agent_start":
                ended, quiet = False, grace
            elif etype == "agent_end":
                ended = True
            elif etype == "auto_retry_start":
                retrying = True
            elif etype == "auto_retry_end":
                retrying = False
            elif etype in ("compaction_start", "auto_compaction_start"):
                compacting = True
            elif etype in ("compaction_end", "auto_compaction_end"):
                compacting = False
                if event.get("willRetry"):
                    quiet = max(grace, 2.0)  # the agent continues the run after compacting

    async def wait_for_idle(self, timeout: float | None = None, *, poll_interval: float = 0.5) -> dict:
        """Wait until the agent is neither streaming, compacting nor about to retry; returns ``get_state`` data."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self.events(_SETTLE_TYPES) as stream:
            while True:
                state = await self.request("get_state", timeout=_remaining(deadline))
                if not state.get("isStreaming") and not state.get("isCompacting") and not self._retry_pending:
                    return state
                remaining = _remaining(deadline)
                if remaining == 0:
                    raise RpcTimeoutError(f"the agent was still busy after {timeout:g} s")
                try:
                    await stream.get(poll_interval if remaining is None else min(poll_interval, remaining))
                except RpcTimeoutError:
                    pass
                stream.pending()

    def __repr__(self) -> str:
        state = "not started" if self._transport is None else ("running" if self.is_running else "exited")
        return f"<RpcClient {' '.join(self.command)!r} pid={self.pid} {state}>"


def __getattr__(name: str) -> Any:  # ``from pisces.client.client import SyncRpcClient``
    if name == "SyncRpcClient":
        from pisces.client.sync import SyncRpcClient  # noqa: PLC0415 - sync imports this module: bound on first use

        return SyncRpcClient
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


async def _wait_event(event: asyncio.Event, timeout: float | None) -> bool:
    if event.is_set():
        return True
    try:
        await asyncio.wait_for(event.wait(), timeout)
        return True
    except asyncio.TimeoutError:
        return False
