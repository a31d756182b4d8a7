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


# Frames that answer a request of ours: routed at once, never queued, never answered.
ANSWER_TYPES = ("extension_ui_response", "hook_ui_response", "host_tool_result", "host_tool_update",
                "tool_approval_response")


class RpcServer:
    def __init__(self, session: Any, writer: FrameWriter) -> None:
        self.session = session
        self.out = writer
        self.tasks: set[asyncio.Task] = set()
        self._warmed_api: str | None = None  # the model API whose SDK the warm-up last prepared
        self._warm_timer: asyncio.TimerHandle | None = None
        self._warm_first_asked = 0.0
        self._ui: Any = None  # the RemoteUI, made when the session first asks for its UI
        self.host_tools: Any = None  # the HostToolBridge, made by the first set_host_tools
        self._lines: asyncio.Queue | None = None
        self._shutdown_requested = False
        self.exit_signal = 0  # the SIGINT/SIGTERM/SIGHUP that ended the process (pisces.modes.signals)
        self.typed_approvals = False  # the client announced typedToolApprovals (negotiate_protocol)
        self.approvals: Any = None  # the ClientApprover asking this client (pisces.modes.approvals)
        if getattr(session, "approval", None) is not None:
            from pisces.modes.approvals import ClientApprover

            self.approvals = ClientApprover(self._send_approval, typed=lambda: self.typed_approvals)
            session.approval.set_approver(self.approvals)
        session.subscribe(self._emit)
        session.ui_factory = self._make_ui
        # an extension's ctx.shutdown() ends the process once the current command is answered; a replaced
        # session's session_start reaches handlers twice, as in pi's RPC mode
        session.extension_options.update(shutdown_handler=self._request_shutdown, rebinds_on_replace=True)

    def _make_ui(self) -> Any:
        from pisces.modes.ui_requests import DEFAULT_DIALOG_TIMEOUT_MS, RemoteUI

        self._ui = RemoteUI(self._send, default_timeout_ms=_setting_ms(self.session, "ui.dialogTimeoutMs",
                                                                       DEFAULT_DIALOG_TIMEOUT_MS))
        return self._ui

    def host_tool_bridge(self) -> Any:
        if self.host_tools is None:
            from pisces.modes.host_tools import DEFAULT_TIMEOUT_MS, HostToolBridge
            from pisces.modes.ui_requests import PendingRequests

            self.host_tools = HostToolBridge(self._send, PendingRequests(),
                                             _setting_ms(self.session, "hostTools.timeoutMs", DEFAULT_TIMEOUT_MS))
        return self.host_tools

    def _send(self, frame: dict[str, Any]) -> None:
        """A request of ours (extension UI, host tool call): written like any frame."""
        self.out.write(frame)

    def _send_approval(self, frame: dict[str, Any]) -> None:
        """An approval frame, in the form this client understands (typed, or pi's select)."""
        from pisces.modes.approvals import client_form

        self.out.write(client_form(frame, self.typed_approvals))

    def set_client_capabilities(self, capabilities: dict[str, Any]) -> dict[str, Any]:
        """``negotiate_protocol``: what this client understands. Approval requests already open are sent
        again in the new form (and withdrawn in the old one), after the response."""
        from pisces.modes.approvals import TYPED_TOOL_APPROVALS, client_form

        value = capabilities.get("typedToolApprovals", False)
        if isinstance(value, bool) or (isinstance(value, int) and value >= 0):
            typed = bool(value)
        else:
            raise RpcError("Invalid 'typedToolApprovals': expected a version number (1) or true/false")
        before, self.typed_approvals = self.typed_approvals, typed
        if before != typed and self.approvals is not None and len(self.approvals.pending):
            from pisces.modes.approvals import cancel_frame

            def resend() -> None:
                for frame in self.approvals.pending_frames():
                    self.out.write(client_form(cancel_frame(frame["id"], frame["toolCallId"], "resent"), before))
                    self.out.write(client_form(frame, typed))

            asyncio.get_running_loop().call_soon(resend)
        return {"protocolVersion": 2, "serverCapabilities": {"typedToolApprovals": TYPED_TOOL_APPROVALS},
                "clientCapabilities": {"typedToolApprovals": TYPED_TOOL_APPROVALS if typed else 0}}

    def _route_answer(self, ctype: str, frame: dict[str, Any]) -> None:
        """Answers to our requests. An unknown id is ignored, and nothing is ever written back."""
        if ctype == "tool_approval_response" or (self.approvals is not None and self.approvals.owns(frame.get("id"))):
            if self.approvals is not None:
                self.approvals.answer(frame)
        elif ctype in ("extension_ui_response", "hook_ui_response"):
            if self._ui is not None:
                self._ui.answer(frame)
        elif self.host_tools is not None:
            pending = self.host_tools.pending
            if ctype == "host_tool_result":
                pending.answer(frame.get("id"), frame)
            else:
                pending.update(frame.get("id"), frame)

    def _request_shutdown(self) -> None:
        self._shutdown_requested = True
        if not self.session.is_busy:
            self._stop_soon()

    def _stop_soon(self) -> None:
        if self._lines is not None:
            asyncio.get_running_loop().call_soon(self._lines.put_nowait, None)

    def _emit(self, event: Any) -> None:
        try:
            self.out.write(event)
        except Exception as exc:  # noqa: BLE001 - a frame that cannot be encoded must not stop the run
            sys.stderr.write(f"pisces: a {_event_type(event)} event could not be sent: {_message(exc)}\n")
        if self._shutdown_requested and isinstance(event, dict) and event.get("type") == "agent_settled":
            self._stop_soon()

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
        if self._shutdown_requested:
            self._stop_soon()

    # -- dispatch -----------------------------------------------------------------------------
    def handle_line(self, raw: bytes) -> bool:
        """Answer one line. Returns True when it started an asynchronous command."""
        return self.dispatch(*parse_line(raw))

    def dispatch(self, cmd: Any, parse_error: str | None) -> bool:
        if parse_error is not None:
            self.respond(None, "parse", error=parse_error)
            return False
        req_id = cmd.get("id") if isinstance(cmd, dict) else None
        ctype = cmd.get("type") if isinstance(cmd, dict) else None
        if ctype is None or not isinstance(ctype, str):
            self.respond(req_id, None if ctype is None else ctype, error=f"Unknown command: {_js_str(ctype)}")
            return False
        if ctype in ANSWER_TYPES:
            self._route_answer(ctype, cmd)
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
            from pisces.core.trust import project_trust_event

            self._emit(project_trust_event(settings.cwd, settings.project_path, settings.ignored_project_settings))
        self._schedule_warm_up(loop)
        held: list[tuple[Any, str | None]] | None = None
        start: asyncio.Future | None = None
        if self.session.hooks.active:  # extensions start first; meanwhile commands wait, answers do not
            held = []
            start = asyncio.ensure_future(self.session.hooks.start("startup"))
            start.add_done_callback(lambda t: (_report_failure(t, "extension start-up"), lines.put_nowait(_STARTED)))
        while not self.exit_signal:
            line = await lines.get()
            if line is None or self.exit_signal:
                if held and not self.exit_signal:  # stdin ended during start-up: nobody can answer a dialog now; then the held commands
                    if self._ui is not None:
                        self._ui.close()
                    await asyncio.wait([start], timeout=5)  # type: ignore[list-item]
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
        """stdin closed (or an extension asked): end open dialogs and host tool calls, stop work in flight,
        flush the session, and let the process exit."""
        if self._ui is not None:
            self._ui.close()
        if self.host_tools is not None:
            self.host_tools.pending.close()
        if self.approvals is not None:
            self.approvals.close()
        try:
            await asyncio.wait_for(self.session.shutdown(), timeout=0.8)
        except (asyncio.TimeoutError, Exception):  # noqa: BLE001 - exiting regardless
            pass
        for task in list(self.tasks):
            task.cancel()


_STARTED: Any = b"\x00started"  # queued when the extensions' start-up is over (never equal to a read line)


def _report_failure(task: asyncio.Task, what: str) -> None:
    if not task.cancelled() and task.exception() is not None:
        sys.stderr.write(f"pisces: {what} failed: {_message(task.exception())}\n")


def _is_answer(cmd: Any) -> bool:
    return isinstance(cmd, dict) and cmd.get("type") in ANSWER_TYPES


def _setting_ms(session: Any, key: str, default: int) -> int:
    value = session.settings.get(key)
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
        return int(value)
    return default


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
