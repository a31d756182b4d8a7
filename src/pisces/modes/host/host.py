"""One AgentSession, many clients: the command table, responses to the asker, events to all.

The host owns the session and runs the one command table (``pisces.modes.host.commands``) for every front end:
stdio RPC is one client, each WebSocket of the web mode another. A handler gets the *client* that sent the
command (it has ``session``, ``respond``, ``out.profile`` and ``host_tool_bridge()``, the interface the
handlers always had), so a response goes to the client that asked and ``set_stream_options`` sets that
client's profile only.

Everything else the host sends is broadcast to every client, in one order, each frame numbered by a
per-host sequence number: the session's events, the extension UI requests (dialogs to all clients: the first
answer wins, and with several clients the others are told ``cancel`` once one answered), and typed requests
such as approvals. A client sees the number as a trailing ``"seq"`` field when it asked for it (WebSocket
clients always; stdio only after ``set_stream_options {"seq": true}``, so pi's byte-for-byte stream stays as
it was). Host tool calls go to the client that declared the host tools, and to no one else.

With ``resumable=True`` (the web mode) the host also keeps a bounded replay buffer of the encoded frames and
a little live state (the reply being streamed, the tools running), so that a client that reconnects with
the last number it saw gets what it missed, or, once the buffer no longer reaches back that far, a snapshot
and then the live tail (see ``pisces.modes.host.replay``). Plain ``--mode rpc`` keeps neither.
"""

from __future__ import annotations

import asyncio
import inspect
import sys
from typing import Any, Callable

from pisces.modes.host.approvals import TYPED_TOOL_APPROVALS, ClientApprover, cancel_frame, client_form
from pisces.modes.host.commands import ANSWERED, COMMANDS, NO_DATA, RpcError
from pisces.modes.host.encoding import DELTAS, FULL, StreamEncoder
from pisces.modes.host.protocol import canonical_command
from pisces.modes.host.ui_requests import DEFAULT_DIALOG_TIMEOUT_MS, PendingRequests, RemoteUI

TYPED = "typed "  # a replay buffer key: the typed form of an approval frame (pisces.modes.host.replay)

# Frames that answer a request of ours: routed at once, never queued, never answered.
ANSWER_TYPES = ("extension_ui_response", "hook_ui_response", "host_tool_result", "host_tool_update",
                "tool_approval_response")


def with_seq(frame: bytes, seq: int) -> bytes:
    """A frame (``{...}\\n``) with ``"seq":N`` as its last field."""
    return b"%b,\"seq\":%d}\n" % (frame[:-2], seq)


class Client:
    """A front end attached to the host. Subclasses write bytes (``send_bytes``) and may encode their own
    responses (``write``). The handlers see a client as their ``server``."""

    kind = "client"
    resumable = False  # may come back and ask for what it missed (WebSocket clients)

    def __init__(self, host: "Host", profile: str = FULL, *, seq: bool = False) -> None:
        self.host = host
        self._profile = profile
        self.seq = seq  # broadcast frames carry "seq"
        self.typed_approvals = False  # announced typedToolApprovals (negotiate_protocol): typed approval frames
        self.closed = False

    # -- what a handler uses ------------------------------------------------------------------
    @property
    def session(self) -> Any:
        return self.host.session

    @property
    def out(self) -> "Client":
        return self

    @property
    def profile(self) -> str:
        return self._profile

    @profile.setter
    def profile(self, value: str) -> None:
        self._profile = value
        self.host.profile_changed(self)

    def respond(self, req_id: Any, command: Any, data: Any = NO_DATA, error: str | None = None) -> None:
        self.host.respond(self, req_id, command, data, error)

    def host_tool_bridge(self) -> Any:
        return self.host.host_tool_bridge(self)

    def set_client_capabilities(self, capabilities: dict[str, Any]) -> dict[str, Any]:
        return self.host.set_client_capabilities(self, capabilities)

    # -- output ---------------------------------------------------------------------------------
    def write(self, obj: Any) -> None:
        """One frame for this client only (a response, a host tool call). Raises when ``obj`` cannot be
        encoded; nothing is sent then."""
        self.send_bytes(self.host.encoder.encode(obj, self.profile))

    def deliver(self, frames: dict[str, bytes], seq: int, numbered: dict[str, bytes]) -> None:
        """A broadcast frame, encoded for every profile in use; ``numbered`` caches its form with ``seq``
        per profile, made once for all the clients that want it."""
        profile = self.profile
        if not self.seq:
            self.send_bytes(frames[profile])
            return
        frame = numbered.get(profile)
        if frame is None:
            frame = numbered[profile] = with_seq(frames[profile], seq)
        self.send_bytes(frame)

    def send_bytes(self, frame: bytes) -> None:
        raise NotImplementedError


class Host:
    def __init__(self, session: Any, *, resumable: bool = False, replay_bytes: int | None = None,
                 replay_events: int | None = None) -> None:
        self.session = session
        self.commands = COMMANDS  # the one command table (the web mode adds web_pair)
        self.web: Any = None  # the web server, when there is one
        self.encoder = StreamEncoder()
        self.clients: list[Client] = []
        self.tasks: set[asyncio.Task[Any]] = set()
        self.seq = 0
        self.stream_id = _new_stream_id()
        self.resumable = resumable
        self.replay: Any = None  # pisces.modes.host.replay.ReplayBuffer (web mode)
        self.live: Any = None  # pisces.modes.host.replay.LiveState (web mode)
        if resumable:
            from pisces.modes.host.replay import LiveState, ReplayBuffer  # noqa: PLC0415 - not needed at start-up

            self.replay = ReplayBuffer(replay_bytes, replay_events)
            self.live = LiveState()
        self._ui: Any = None  # the RemoteUI, made when the session first asks for its UI
        self.host_tools: Any = None  # the HostToolBridge, made by the first set_host_tools
        self._host_tools_owner: Client | None = None
        self._open_requests: dict[str, dict[str, Any]] = {}  # request id -> frame, while it waits (re-sent)
        self.approvals: Any = None  # the ClientApprover asking the clients (pisces.modes.host.approvals)
        if getattr(session, "approval", None) is not None:
            # the web mode can always ask properly (its browsers speak the typed frames), even while none is
            # attached: a request waits for the phone that comes back
            self.approvals = ClientApprover(self._send_approval, typed=self._asks_typed,
                                            cancel_when_answered=resumable)
            session.approval.set_approver(self.approvals)
        self.shutdown_requested = False
        self.on_shutdown_request: Callable[[], None] | None = None  # the mode stops its loop
        self.on_settled: Callable[[], None] | None = None
        session.subscribe(self.broadcast)
        session.ui_factory = self._make_ui
        # an extension's ctx.shutdown() ends the process once the current command is answered; a replaced
        # session's session_start reaches handlers twice, as in pi's RPC mode
        session.extension_options.update(shutdown_handler=self._request_shutdown, rebinds_on_replace=True)

    # -- clients ----------------------------------------------------------------------------------
    def attach(self, client: Client) -> None:
        self.clients.append(client)
        self.profile_changed(client)

    def detach(self, client: Client) -> None:
        client.closed = True
        if client in self.clients:
            self.clients.remove(client)
        if client is self._host_tools_owner and self.host_tools is not None:
            old, self.host_tools.pending = self.host_tools.pending, PendingRequests()
            old.close()  # its calls end now ("disconnected"), not at their timeout
            self._host_tools_owner = None

    def profile_changed(self, client: Client) -> None:
        if self.replay is not None and client.resumable:
            self.replay.profiles.add(client.profile)

    # -- the session UI and host tools ------------------------------------------------------------
    def _make_ui(self) -> Any:
        # several clients: once one answers, the others are told to close the dialog
        self._ui = RemoteUI(self.broadcast, default_timeout_ms=setting_ms(self.session, "ui.dialogTimeoutMs",
                                                                         DEFAULT_DIALOG_TIMEOUT_MS),
                            cancel_when_answered=self.resumable)
        return self._ui

    def host_tool_bridge(self, owner: Client) -> Any:
        """The bridge for ``set_host_tools``; its calls go to ``owner`` (the client that declared the tools)."""
        if self.host_tools is None:
            from pisces.modes.host.host_tools import DEFAULT_TIMEOUT_MS, HostToolBridge  # noqa: PLC0415 - not needed at start-up

            self.host_tools = HostToolBridge(self._send_host_tool_frame, PendingRequests(),
                                             setting_ms(self.session, "hostTools.timeoutMs", DEFAULT_TIMEOUT_MS))
        self._host_tools_owner = owner
        return self.host_tools

    def _send_host_tool_frame(self, frame: dict[str, Any]) -> None:
        owner = self._host_tools_owner
        if owner is not None and not owner.closed:
            owner.write(frame)

    # -- approvals (pisces.modes.host.approvals; docs/approval.md) ---------------------------------------------
    def _asks_typed(self) -> bool:
        return self.resumable or any(c.typed_approvals for c in self.clients)

    def _send_approval(self, frame: dict[str, Any]) -> None:
        """An approval frame for every client, each in the form it understands (typed, or pi's select)."""

        self.broadcast(frame, pi_form=client_form(frame, False))

    def set_client_capabilities(self, client: Client, capabilities: dict[str, Any]) -> dict[str, Any]:
        """``negotiate_protocol``: what ``client`` understands. Approval requests already open are sent to it
        again in the new form (and withdrawn in the old one), after the response."""

        value = capabilities.get("typedToolApprovals", False)
        if isinstance(value, bool) or (isinstance(value, int) and value >= 0):
            typed = bool(value)
        else:
            raise RpcError("Invalid 'typedToolApprovals': expected a version number (1) or true/false")
        before, client.typed_approvals = client.typed_approvals, typed
        approvals = self.approvals
        if before != typed and approvals is not None and len(approvals.pending):
            def resend() -> None:
                for frame in approvals.pending_frames():
                    if client.closed:
                        return
                    client.write(client_form(cancel_frame(frame["id"], frame["toolCallId"], "resent"), before))
                    client.write(client_form(frame, typed))

            asyncio.get_running_loop().call_soon(resend)
        return {"protocolVersion": 2, "serverCapabilities": {"typedToolApprovals": TYPED_TOOL_APPROVALS},
                "clientCapabilities": {"typedToolApprovals": TYPED_TOOL_APPROVALS if typed else 0}}

    def route_answer(self, ctype: str, frame: dict[str, Any]) -> None:
        """Answers to our requests. An unknown id is ignored, and nothing is ever written back."""
        approvals = self.approvals
        if ctype == "tool_approval_response" or (approvals is not None and approvals.owns(frame.get("id"))):
            if approvals is not None:
                approvals.answer(frame)
        elif ctype in ("host_tool_result", "host_tool_update"):
            if self.host_tools is not None:
                pending = self.host_tools.pending
                if ctype == "host_tool_result":
                    pending.answer(frame.get("id"), frame)
                else:
                    pending.update(frame.get("id"), frame)
        elif self._ui is not None:
            self._ui.answer(frame)

    def close_dialogs(self) -> None:
        """Nobody can answer any more (stdin ended during start-up): end every open dialog now."""
        if self._ui is not None:
            self._ui.close()

    def open_requests(self, client: Client) -> list[dict[str, Any]]:
        """The requests still waiting for an answer (dialogs, then approvals in ``client``'s form, with the
        time they have left): what a client that attaches late is sent."""
        pending = self._ui.pending if self._ui is not None else ()
        for rid in [r for r in self._open_requests if r not in pending]:
            del self._open_requests[rid]
        out = list(self._open_requests.values())
        if self.approvals is not None:
            out.extend(client_form(f, client.typed_approvals) for f in self.approvals.pending_frames())
        return out

    # -- shutdown requested by an extension --------------------------------------------------------
    def _request_shutdown(self) -> None:
        self.shutdown_requested = True
        if not self.session.is_busy and self.on_shutdown_request is not None:
            self.on_shutdown_request()

    # -- broadcast ----------------------------------------------------------------------------------
    def broadcast(self, event: Any, pi_form: Any = None) -> None:
        """An event or a request for every client, numbered. With ``pi_form`` (approval frames), clients
        without typed approvals get that instead, under the same number. Never raises: a frame that cannot
        be encoded is reported on stderr and skipped."""
        self.seq += 1
        seq = self.seq
        clients = self.clients
        if self.live is not None:
            self.live.observe(event)
            if isinstance(event, dict):  # requests a late client must be sent
                rid = event.get("id")
                if rid is not None and self._ui is not None and rid in self._ui.pending:
                    self._open_requests[rid] = event
                elif event.get("method") == "cancel" or event.get("type") == "tool_approval_cancel":
                    target = event.get("targetId")
                    if isinstance(target, str):
                        self._open_requests.pop(target, None)
        try:
            if self.replay is None and len(clients) == 1 and not clients[0].seq:
                # stdio alone: its own writer, pi's bytes (and writev for snapshots)
                only = clients[0]
                only.write(event if pi_form is None or only.typed_approvals else pi_form)
            else:
                frames = self._encode(event, {c.profile for c in clients if pi_form is None or c.typed_approvals})
                plain = frames if pi_form is None else self._encode(
                    pi_form, {c.profile for c in clients if not c.typed_approvals})
                if self.replay is not None:
                    stored = dict(plain)
                    if pi_form is not None:
                        stored.update((TYPED + p, f) for p, f in frames.items())
                    self.replay.add(seq, stored)
                numbered: dict[str, bytes] = {}
                numbered_typed: dict[str, bytes] = {} if pi_form is not None else numbered
                for client in list(clients):
                    try:
                        if pi_form is not None and client.typed_approvals:
                            client.deliver(frames, seq, numbered_typed)
                        else:
                            client.deliver(plain, seq, numbered)
                    except Exception as exc:  # noqa: BLE001 - one broken client must not stop the others
                        sys.stderr.write(f"pisces: a frame could not be sent to a {client.kind} client: "
                                         f"{message(exc)}\n")
        except Exception as exc:  # noqa: BLE001 - a frame that cannot be encoded must not stop the run
            sys.stderr.write(f"pisces: a {event_type(event)} event could not be sent: {message(exc)}\n")
        if isinstance(event, dict) and event.get("type") == "agent_settled":
            if self.on_settled is not None:
                self.on_settled()
            if self.shutdown_requested and self.on_shutdown_request is not None:
                self.on_shutdown_request()

    def _encode(self, event: Any, profiles: set[str]) -> dict[str, bytes]:
        if self.replay is not None:
            profiles = profiles | self.replay.profiles
        return self.encoder.encode_profiles(event, profiles) if profiles else {}

    # -- responses ----------------------------------------------------------------------------------
    def respond(self, client: Client, req_id: Any, command: Any, data: Any = NO_DATA,
                error: str | None = None) -> None:
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
        if not client.closed:
            try:
                client.write(frame)
            except Exception as exc:
                if error is not None:
                    raise
                self.respond(client, req_id, command, error=f"The response could not be encoded: {message(exc)}")
        if self.shutdown_requested and self.on_shutdown_request is not None:
            self.on_shutdown_request()

    # -- dispatch -----------------------------------------------------------------------------------
    def dispatch(self, client: Client, cmd: Any, parse_error: str | None) -> bool:
        """Answer one decoded command of ``client``. Returns True when it started an asynchronous command."""
        if parse_error is not None:
            self.respond(client, None, "parse", error=parse_error)
            return False
        req_id = cmd.get("id") if isinstance(cmd, dict) else None
        ctype = cmd.get("type") if isinstance(cmd, dict) else None
        if ctype is None or not isinstance(ctype, str):
            self.respond(client, req_id, None if ctype is None else ctype, error=f"Unknown command: {js_str(ctype)}")
            return False
        if ctype in ANSWER_TYPES:
            self.route_answer(ctype, cmd)
            return False
        name = canonical_command(ctype)
        handler = self.commands.get(name) if name else None
        if handler is None:
            self.respond(client, req_id, ctype, error=f"Unknown command: {ctype}")
            return False
        try:
            result = handler(client, cmd)
        except RpcError as exc:
            self.respond(client, req_id, ctype, error=str(exc))
            return False
        except Exception as exc:  # noqa: BLE001 - any failure is an error response, never a crash
            self.respond(client, req_id, ctype, error=message(exc))
            return False
        if inspect.isawaitable(result):
            task = asyncio.ensure_future(self._finish(client, req_id, ctype, result))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)
            return True
        self.respond(client, req_id, ctype, data=result)
        return False

    async def _finish(self, client: Client, req_id: Any, ctype: str, pending: Any) -> None:
        try:
            data = await pending
        except RpcError as exc:
            self.respond(client, req_id, ctype, error=str(exc))
            return
        except asyncio.CancelledError:
            return
        except Exception as exc:  # noqa: BLE001
            self.respond(client, req_id, ctype, error=message(exc))
            return
        if data is not ANSWERED:
            self.respond(client, req_id, ctype, data=data)

    # -- resuming (web mode) --------------------------------------------------------------------------
    def resume(self, client: Client, stream_id: str | None, since: int | None) -> None:
        """Attach ``client`` and bring it up to date: the frames after ``since`` from the replay buffer when
        it still holds them all (for the client's profile) and ``stream_id`` is this host's, else a snapshot.
        Synchronous, so nothing can be broadcast in between: the live tail follows without a gap."""
        assert self.replay is not None and self.live is not None, "resume needs a resumable host"
        frames = None
        if since is not None and stream_id == self.stream_id:
            frames = self.replay.since(since, self.seq, client.profile, typed=client.typed_approvals)
        if frames is not None:
            client.write({"type": "resumed", "streamId": self.stream_id, "fromSeq": since, "toSeq": self.seq})
            for seq, frame in frames:
                client.send_bytes(with_seq(frame, seq))
        else:
            reason = "new" if since is None else ("stream" if stream_id != self.stream_id else "gap")
            client.write(self.live.snapshot(self, reason, client))
        self.attach(client)

    # -- shutdown -------------------------------------------------------------------------------------
    async def shutdown(self) -> None:
        """End open dialogs and host tool calls, stop work in flight, flush the session."""
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


def _new_stream_id() -> str:
    import os  # noqa: PLC0415 - not needed at start-up

    return os.urandom(8).hex()


def setting_ms(session: Any, key: str, default: int) -> int:
    value = session.settings.get(key)
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
        return int(value)
    return default


def js_str(value: Any) -> str:
    if value is None:
        return "undefined"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def event_type(event: Any) -> str:
    kind = event.get("type") if isinstance(event, dict) else getattr(event, "type", None)
    if kind is None:
        config = getattr(event, "__struct_config__", None)
        kind = getattr(config, "tag", None)
    return str(kind or type(event).__name__)


def message(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


__all__ = ["ANSWER_TYPES", "Client", "DELTAS", "Host", "with_seq"]
