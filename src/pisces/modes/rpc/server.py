"""The stdio loop of ``pisces --mode rpc``: read lines, dispatch commands concurrently, write frames.

Framing is LF only (a trailing CR is dropped; U+2028/U+2029 are content). stdin is read on a thread, the
only reader that copes with very long lines from a pipe, a file or a tty alike. Every line is answered:
synchronous commands at once and in order, asynchronous ones (prompt, abort, bash, ...) as tasks so that
nothing, in particular ``abort*`` and ``extension_ui_response``, waits behind a long command.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import sys
import threading
from typing import Any

import msgspec

from pisces.modes.rpc.handlers import ANSWERED, COMMANDS, NO_DATA, RpcError
from pisces.modes.rpc.output import FrameWriter
from pisces.modes.rpc.protocol import canonical_command

_decoder = msgspec.json.Decoder()

WARM_UP_IDLE_S = 0.1  # no line for this long: the agent is idle, time to import the model's SDK
WARM_UP_MAX_DELAY_S = 1.0  # a steady stream of lines postpones that for no longer


def parse_line(raw: bytes) -> tuple[Any, str | None]:
    """Decode one input line; returns (value, None) or (None, pi's parse error message)."""
    if raw.endswith(b"\r"):
        raw = raw[:-1]
    try:
        return _decoder.decode(raw), None
    except (msgspec.DecodeError, UnicodeDecodeError, ValueError, RecursionError):
        pass
    text = raw.decode("utf-8", "replace")
    try:
        # what JSON.parse accepts and msgspec does not (e.g. lone surrogates); NaN and Infinity are not JSON
        return json.loads(text, parse_constant=_reject_constant, parse_int=_js_int), None
    except (ValueError, RecursionError):
        pass
    from pisces.modes.rpc.jsonerror import describe_json_error  # only bad input pays for it

    return None, f"Failed to parse command: {describe_json_error(text)}"


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _js_int(text: str) -> int | float:
    """An integer literal; one longer than Python converts (4300 digits) is a double, as in JSON.parse."""
    try:
        return int(text)
    except ValueError:
        return float(text)


class RpcServer:
    def __init__(self, session: Any, writer: FrameWriter) -> None:
        self.session = session
        self.out = writer
        self.tasks: set[asyncio.Task] = set()
        self._warmed_api: str | None = None  # the model API whose SDK the warm-up last prepared
        self._warm_timer: asyncio.TimerHandle | None = None
        self._warm_first_asked = 0.0
        session.subscribe(self._emit)

    def _emit(self, event: Any) -> None:
        try:
            self.out.write(event)
        except Exception as exc:  # noqa: BLE001 - a frame that cannot be encoded must not stop the run
            sys.stderr.write(f"pisces: a {_event_type(event)} event could not be sent: {_message(exc)}\n")

    # -- responses ----------------------------------------------------------------------------
    def respond(self, req_id: Any, command: Any, data: Any = NO_DATA, error: str | None = None) -> None:
        frame: dict[str, Any] = {}
        if req_id is not None:
            frame["id"] = req_id
        frame["type"] = "response"
        if command is not None:
            frame["command"] = command
        if error is not None:
            frame["success"] = False
            frame["error"] = error
        else:
            frame["success"] = True
            if data is not NO_DATA:
                frame["data"] = data
        try:
            self.out.write(frame)
        except Exception as exc:  # noqa: BLE001 - still one response, and the process lives on
            if error is not None:
                raise
            self.respond(req_id, command, error=f"The response could not be encoded: {_message(exc)}")

    # -- dispatch -----------------------------------------------------------------------------
    def handle_line(self, raw: bytes) -> bool:
        """Answer one line. Returns True when it started an asynchronous command."""
        cmd, parse_error = parse_line(raw)
        if parse_error is not None:
            self.respond(None, "parse", error=parse_error)
            return False
        req_id = cmd.get("id") if isinstance(cmd, dict) else None
        ctype = cmd.get("type") if isinstance(cmd, dict) else None
        if ctype is None or not isinstance(ctype, str):
            self.respond(req_id, None if ctype is None else ctype, error=f"Unknown command: {_js_str(ctype)}")
            return False
        if ctype == "extension_ui_response":
            self.session.resolve_ui_response(cmd)  # unknown ids are ignored, and nothing is written
            return False
        name = canonical_command(ctype)
        handler = COMMANDS.get(name) if name else None
        if handler is None:
            self.respond(req_id, ctype, error=f"Unknown command: {ctype}")
            return False
        try:
            result = handler(self, cmd)
        except RpcError as exc:
            self.respond(req_id, ctype, error=str(exc))
            return False
        except Exception as exc:  # noqa: BLE001 - any failure is an error response, never a crash
            self.respond(req_id, ctype, error=_message(exc))
            return False
        if inspect.isawaitable(result):
            task = asyncio.ensure_future(self._finish(req_id, ctype, result))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)
            return True
        self.respond(req_id, ctype, data=result)
        return False

    async def _finish(self, req_id: Any, ctype: str, pending: Any) -> None:
        try:
            data = await pending
        except RpcError as exc:
            self.respond(req_id, ctype, error=str(exc))
            return
        except asyncio.CancelledError:
            return
        except Exception as exc:  # noqa: BLE001
            self.respond(req_id, ctype, error=_message(exc))
            return
        if data is not ANSWERED:
            self.respond(req_id, ctype, data=data)

    # -- main loop ----------------------------------------------------------------------------
    async def serve(self, stdin: Any = None, *, ready: bool = True) -> int:
        loop = asyncio.get_running_loop()
        lines: asyncio.Queue[bytes | None] = asyncio.Queue()
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
            from pisces.core.trust import project_trust_event

            self._emit(project_trust_event(settings.cwd, settings.project_path, settings.ignored_project_settings))
        self._schedule_warm_up(loop)
        while True:
            line = await lines.get()
            if line is None:
                break
            if self.handle_line(line):
                # Let the command just started run up to its first real wait, so that a quick async command
                # (switch_session, new_session, fork) is done before the next line is read, as in pi.
                await asyncio.sleep(0)
            if self._warmed_api != self._current_api():  # not warmed up for this model's API yet
                self._schedule_warm_up(loop)
        await self.shutdown()
        return 0

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
        first = self._warmed_api is None
        self._warmed_api = api
        if api:
            from pisces.ai.providers import prepare

            threading.Thread(target=prepare, args=(api,), name="sdk-warm-up", daemon=True).start()
        if first:
            asyncio.get_running_loop().call_soon(self.session.prepare_first_prompt)

    def _current_api(self) -> str:
        return getattr(self.session.model, "api", None) or ""

    async def shutdown(self) -> None:
        """stdin closed: stop work in flight, flush the session, and let the process exit."""
        try:
            await asyncio.wait_for(self.session.shutdown(), timeout=0.8)
        except (asyncio.TimeoutError, Exception):  # noqa: BLE001 - exiting regardless
            pass
        for task in list(self.tasks):
            task.cancel()


def _js_str(value: Any) -> str:
    if value is None:
        return "undefined"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _event_type(event: Any) -> str:
    kind = event.get("type") if isinstance(event, dict) else getattr(event, "type", None)
    return str(kind or type(event).__name__)


def _message(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__
