"""The stdio loop of ``pisces --mode rpc``: read lines, dispatch commands concurrently, write frames.

Framing is LF only (a trailing CR is dropped; U+2028/U+2029 are content). stdin is read on a thread, the
only reader that copes with very long lines from a pipe, a file or a tty alike. Every line is answered:
synchronous commands at once and in order, asynchronous ones (prompt, abort, bash, ...) as tasks so that
nothing, in particular ``abort*`` and ``extension_ui_response``, waits behind a long command.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from typing import Any

from pisces.ai.providers import prepare
from pisces.core.config.trust import project_trust_event
from pisces.modes.host.framing import parse_line
from pisces.modes.host.host import ANSWER_TYPES, Client, Host, message
from pisces.modes.rpc.output import FrameWriter
from pisces.modes.rpc.transport_warmup import TransportWarmUp

WARM_UP_IDLE_S = 0.1  # no line for this long: the agent is idle, time to import the model's SDK
WARM_UP_MAX_DELAY_S = 1.0  # a steady stream of lines postpones that for no longer


class StdioClient(Client):
    """The process's stdin/stdout as one client of the host: frames go through the FrameWriter (pi's bytes,
    writev for snapshots), in the writer's stream profile."""

    kind = "stdio"

    def __init__(self, host: Host, writer: FrameWriter) -> None:
        super().__init__(host, writer.profile)
        self.writer = writer

    @property
    def profile(self) -> str:
        return self.writer.profile

    @profile.setter
    def profile(self, value: str) -> None:
        self.writer.profile = value
        self.host.profile_changed(self)

    def write(self, obj: Any) -> None:
        self.writer.write(obj)

    def send_bytes(self, frame: bytes) -> None:
        self.writer.write_bytes(frame)


class RpcServer:
    """The stdio loop around a host: stdin lines are the stdio client's commands."""

    def __init__(self, session: Any, writer: FrameWriter, host: Host | None = None) -> None:
        self.session = session
        self.out = writer
        self.host = host if host is not None else Host(session)
        self.client = StdioClient(self.host, writer)
        self.host.attach(self.client)
        self.host.on_shutdown_request = self._stop_soon
        self._warmed_api: str | None = None  # the model API whose SDK the warm-up last prepared
        self._warm_timer: asyncio.TimerHandle | None = None
        self._warm_first_asked = 0.0
        self._lines: asyncio.Queue | None = None
        self.exit_signal = 0  # the SIGINT/SIGTERM/SIGHUP that ended the process (pisces.modes.signals)

    def _stop_soon(self) -> None:
        if self._lines is not None:
            asyncio.get_running_loop().call_soon(self._lines.put_nowait, None)

    def _emit(self, event: Any) -> None:
        self.host.broadcast(event)

    # -- dispatch -----------------------------------------------------------------------------
    def handle_line(self, raw: bytes) -> bool:
        """Answer one line. Returns True when it started an asynchronous command."""
        return self.dispatch(*parse_line(raw))

    def dispatch(self, cmd: Any, parse_error: str | None) -> bool:
        return self.host.dispatch(self.client, cmd, parse_error)

    # -- main loop ----------------------------------------------------------------------------
    async def serve(self, stdin: Any = None, *, ready: bool = True) -> int:
        loop = asyncio.get_running_loop()
        lines: asyncio.Queue[bytes | None] = asyncio.Queue()
        self._lines = lines
        source = stdin if stdin is not None else sys.stdin.buffer

        def reader() -> None:
            try:
                while True:
                    line = source.readline()
                    if not line:
                        break
                    if line.endswith(b"\n"):
                        line = line[:-1]
                    loop.call_soon_threadsafe(lines.put_nowait, line)
            except (OSError, ValueError):
                pass
            finally:
                try:
                    loop.call_soon_threadsafe(lines.put_nowait, None)
                except RuntimeError:  # the loop is already closed
                    pass

        threading.Thread(target=reader, name="rpc-stdin", daemon=True).start()
        if ready:
            self.out.write({"type": "ready"})
        settings = self.session.settings
        if settings.ignored_project_settings:  # the host learns what the untrusted project did not get

            self._emit(project_trust_event(settings.cwd, settings.project_path, settings.ignored_project_settings))
        transport = TransportWarmUp(self._current_api, self._current_base_url)
        self._schedule_warm_up(loop)
        held: list[tuple[Any, str | None]] | None = None
        start: asyncio.Future[None] | None = None
        if self.session.hooks.active:  # extensions start first; meanwhile commands wait, answers do not
            held = []
            start = asyncio.ensure_future(self.session.hooks.start("startup"))

            def started(task: asyncio.Future[None]) -> None:
                _report_failure(task, "extension start-up")
                lines.put_nowait(_STARTED)

            start.add_done_callback(started)
        while not self.exit_signal:
            line = await lines.get()
            if line is None or self.exit_signal:
                # stdin ended during start-up: nobody can answer a dialog now; then the held commands
                if held and not self.exit_signal:
                    self.host.close_dialogs()
                    if start is not None:  # always, when commands are held
                        await asyncio.wait([start], timeout=5)
                    for item in held:
                        self.dispatch(*item)
                break
            if line is _STARTED:
                pending, held = held or [], None
                for item in pending:
                    if self.dispatch(*item):
                        await asyncio.sleep(0)
                continue
            parsed = parse_line(line)
            if held is not None and not _is_answer(parsed[0]):
                held.append(parsed)
                continue
            # Load what a prompt needs when it goes without the SDK (providers.direct): for a prompt at once, before
            # it runs; for other commands only once idle (_warm_provider), not beside them (transport_warmup).
            transport.on_command(parsed[0])
            if self.dispatch(*parsed):
                # Let the command just started run up to its first real wait, so that a quick async command
                # (switch_session, new_session, fork) is done before the next line is read, as in pi.
                await asyncio.sleep(0)
            if self._warmed_api != self._current_api():  # not warmed up for this model's API yet
                self._schedule_warm_up(loop)
        await self.shutdown()
        return 0

    def terminate(self, signum: int) -> None:
        """SIGINT/SIGTERM/SIGHUP: end as at stdin EOF (work in flight aborted, tool processes killed, the
        session flushed), without reading further lines; the process then exits with 128 + ``signum``."""
        self.exit_signal = signum
        if self._lines is not None:
            self._lines.put_nowait(None)

    def _schedule_warm_up(self, loop: asyncio.AbstractEventLoop) -> None:
        """Warm up once no line has come for WARM_UP_IDLE_S: an SDK import takes the interpreter for a few
        hundred milliseconds, and commands sent in a burst (a client's opening get_state, get_commands,
        switch_session...) should not share it with one. Lines arriving without a pause postpone it for at
        most WARM_UP_MAX_DELAY_S."""
        now = loop.time()
        if self._warm_timer is not None:
            if now - self._warm_first_asked >= WARM_UP_MAX_DELAY_S:
                return  # let the pending timer fire
            self._warm_timer.cancel()
        else:
            self._warm_first_asked = now
        self._warm_timer = loop.call_later(WARM_UP_IDLE_S, self._warm_provider)

    def _warm_provider(self) -> None:
        """While the agent is idle: import the current model's SDK on a background thread, and (the first
        time) build the system prompt on the loop (a command arriving meanwhile waits those milliseconds)."""
        self._warm_timer = None
        api = self._current_api()
        if api == self._warmed_api:
            return
        if getattr(self.session, "is_streaming", False):
            # A reply is streaming (its request went without the SDK, see providers.direct): importing now
            # would take the interpreter from it; look again once it may be over.
            self._warm_timer = asyncio.get_running_loop().call_later(WARM_UP_IDLE_S, self._warm_provider)
            return
        first = self._warmed_api is None
        self._warmed_api = api
        if api:
            threading.Thread(target=prepare, args=(api, self._current_base_url()), name="sdk-warm-up",
                             daemon=True).start()
        if first:
            asyncio.get_running_loop().call_soon(self.session.prepare_first_prompt)

    def _current_api(self) -> str:
        return getattr(self.session.model, "api", None) or ""

    def _current_base_url(self) -> str | None:
        return getattr(self.session.model, "baseUrl", None)

    async def shutdown(self) -> None:
        """stdin closed (or an extension asked): end open dialogs and host tool calls, stop work in flight,
        flush the session, and let the process exit."""
        await self.host.shutdown()


_STARTED: Any = b"\x00started"  # queued when the extensions' start-up is over (never equal to a read line)


def _report_failure(task: asyncio.Future[Any], what: str) -> None:
    failure = None if task.cancelled() else task.exception()
    if failure is not None:
        sys.stderr.write(f"pisces: {what} failed: {message(failure)}\n")


def _is_answer(cmd: Any) -> bool:
    return isinstance(cmd, dict) and cmd.get("type") in ANSWER_TYPES

