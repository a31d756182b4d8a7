"""Asking a client to approve a tool call: the approver of RPC mode (and, through ``send``, of the web host).

The approver always speaks in typed frames; ``client_form(frame, typed)`` turns them into what one client
understands, so that a transport with several clients converts per client:

* a client that announced ``typedToolApprovals`` (``negotiate_protocol``) gets them as they are:
  ``tool_approval_request{id, toolCallId, toolName, toolKind, tier, identity, input, detail, scopes, timeout}``
  and, when the request ends without its answer, ``tool_approval_cancel{id, targetId, toolCallId, reason}``;
  it answers ``tool_approval_response{id, toolCallId, approved, scope?, message?}`` (or ``cancelled: true``);
* every other client gets pi's form, the one oh-my-pi uses: an ``extension_ui_request`` ``select`` titled
  ``Allow tool: <name>`` with the options ``Approve`` and ``Deny`` and the same id, answered with
  ``extension_ui_response{id, value}``, and ``extension_ui_request{method: "cancel", targetId}`` when it ends
  unanswered.

Each request has a timeout (the session's ``tools.approvalTimeoutMs``; then it is denied, with a message that
says it timed out) and ends exactly once (``PendingRequests``): the first answer with its id wins, later ones
and unknown ids are ignored; a typed answer must also name the request's ``toolCallId``, and an answer that is
malformed denies the call (fail closed). Both forms are accepted for the same id, so a client that switches to
typed frames while a request is open may answer either.

``pending_frames()`` are the typed frames of the requests still open, with the time left: what a client that
attaches (or switches forms) later must be sent.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, Callable

from pisces.core.approval import types as T
from pisces.core.approval.frames import select_title
from pisces.core.approval.session_gate import DEFAULT_TIMEOUT_MS, MAX_TIMEOUT_MS
from pisces.modes.host.ui_requests import PendingRequests, new_id

Send = Callable[[dict[str, Any]], None]

INPUT_BUDGET_BYTES = 64 * 1024  # the input is presentation: beyond this its largest fields are left out
TYPED_TOOL_APPROVALS = 1  # the version of the typed frames this server speaks


class ClientApprover:
    def __init__(self, send: Send, *, typed: Callable[[], bool] = lambda: False,
                 cancel_when_answered: bool = False) -> None:
        self.send = send
        self.pending = PendingRequests()
        self._typed = typed
        # many clients on one session (the web host): once one answers, the others are told it is over
        self.cancel_when_answered = cancel_when_answered
        self._open: dict[str, tuple[T.ApprovalRequest, dict[str, Any], float]] = {}

    @property
    def default_mode(self) -> str:
        """``write`` once a client can be asked properly (typed frames), else ``yolo`` (pi's clients)."""
        return "write" if self._typed() else "yolo"

    @property
    def asks(self) -> str:
        return "typed" if self._typed() else "select"

    async def approve(self, request: Any, *, timeout_ms: int | None = None, signal: Any = None) -> T.ApprovalAnswer:
        req = T.as_request(request)
        limit = int(min(max(timeout_ms or DEFAULT_TIMEOUT_MS, 1), MAX_TIMEOUT_MS))
        if signal is not None and signal.aborted:
            return T.cancelled(req.tool_name)
        request_id = new_id()
        frame = request_frame(req, request_id, limit)
        self._open[request_id] = (req, frame, asyncio.get_running_loop().time() + limit / 1000)
        try:
            outcome = await self.pending.wait(request_id, send=lambda: self.send(frame), timeout_ms=limit,
                                              signal=signal)
        except asyncio.CancelledError:
            self._cancel(request_id, req, "aborted")
            raise
        finally:
            self._open.pop(request_id, None)
        if outcome.get("timedOut"):
            self._cancel(request_id, req, "timeout")
            return T.timed_out(req.tool_name, limit)
        if outcome.get("aborted"):
            self._cancel(request_id, req, "aborted")
            return T.cancelled(req.tool_name)
        if outcome.get("closed"):
            return T.disconnected(req.tool_name)
        if self.cancel_when_answered:
            self._cancel(request_id, req, "answered")
        return parse_answer(outcome, req)

    def owns(self, request_id: Any) -> bool:
        return isinstance(request_id, str) and request_id in self.pending

    def answer(self, frame: dict[str, Any]) -> bool:
        """A ``tool_approval_response`` or an ``extension_ui_response`` to one of ours; False when not open."""
        return self.pending.answer(frame.get("id"), frame)

    def pending_frames(self) -> list[dict[str, Any]]:
        """The typed frames of the open requests, in the order they were asked, ``timeout`` set to the time left."""
        now = asyncio.get_running_loop().time()
        return [{**frame, "timeout": max(1, int((deadline - now) * 1000))}
                for _req, frame, deadline in self._open.values()]

    def close(self) -> None:
        """The client is gone: every open request ends (denied), and later ones end at once."""
        self.pending.close()

    def _cancel(self, request_id: str, req: T.ApprovalRequest, reason: str) -> None:
        try:
            self.send(cancel_frame(request_id, req.tool_call_id, reason))
        except Exception:  # noqa: BLE001 - the client may be gone
            pass


# ---------------------------------------------------------------------------------------------
# Frames
# ---------------------------------------------------------------------------------------------
def _fit_input(shown: dict[str, Any], truncated: list[str]) -> dict[str, Any]:
    size = len(json.dumps(shown, ensure_ascii=False))
    if size <= INPUT_BUDGET_BYTES:
        return shown
    out = dict(shown)
    for key in sorted(out, key=lambda k: -len(json.dumps(out[k], ensure_ascii=False))):
        if size <= INPUT_BUDGET_BYTES:
            break
        before = len(json.dumps(out[key], ensure_ascii=False))
        out[key] = "[left out: too large to show]"
        size -= before - len(json.dumps(out[key]))
        truncated.append(f"input.{key}")
    return out


def request_frame(req: T.ApprovalRequest, request_id: str, timeout_ms: int) -> dict[str, Any]:
    truncated = list(req.truncated_fields)
    shown = _fit_input(req.input, truncated)
    detail: dict[str, Any] = {"reason": req.detail or ""}
    if req.dangerous:
        detail["dangerous"] = req.dangerous
    detail.update(redacted=bool(req.redacted_fields), redactedFields=list(req.redacted_fields),
                  truncated=bool(truncated), truncatedFields=truncated)
    return {"type": "tool_approval_request", "id": request_id, "toolCallId": req.tool_call_id,
            "toolName": req.tool_name, "toolKind": req.tool_kind, "tier": req.tier, "identity": req.identity,
            "input": shown, "detail": detail, "scopes": list(req.scopes), "timeout": timeout_ms}


def cancel_frame(target_id: str, tool_call_id: str, reason: str) -> dict[str, Any]:
    return {"type": "tool_approval_cancel", "id": new_id(), "targetId": target_id, "toolCallId": tool_call_id,
            "reason": reason}


def client_form(frame: dict[str, Any], typed: bool) -> dict[str, Any]:
    """The frame as a client without typed approvals understands it (pi's select and cancel)."""
    if typed:
        return frame
    kind = frame.get("type")
    if kind == "tool_approval_request":
        title = select_title(frame.get("toolName", ""), frame.get("identity") or {}, frame.get("input"),
                             (frame.get("detail") or {}).get("reason"))
        return {"type": "extension_ui_request", "id": frame["id"], "method": "select", "title": title,
                "options": ["Approve", "Deny"], "timeout": frame.get("timeout")}
    if kind == "tool_approval_cancel":
        return {"type": "extension_ui_request", "id": frame["id"], "method": "cancel", "targetId": frame["targetId"]}
    return frame


def parse_answer(frame: dict[str, Any], req: T.ApprovalRequest) -> T.ApprovalAnswer:
    """The answer a client sent for ``req``; anything malformed is a denial (fail closed)."""
    name = req.tool_name
    if frame.get("type") == "tool_approval_response":
        call_id = frame.get("toolCallId")
        if call_id != req.tool_call_id:
            return T.malformed(name, f"it names tool call {json.dumps(call_id)}, but the request is for "
                                     f"{json.dumps(req.tool_call_id)}")
        if frame.get("cancelled") is True:
            return T.cancelled(name, by_client=True)
        approved = frame.get("approved")
        if not isinstance(approved, bool):
            return T.malformed(name, "'approved' must be true or false")
        note = frame.get("message") if isinstance(frame.get("message"), str) and frame.get("message") else None
        if not approved:
            return T.rejected(name, note[:2000] if note else None)
        scope = frame.get("scope", "once")
        if scope not in req.scopes:
            offered = ", ".join(req.scopes)
            return T.malformed(name, f"scope {json.dumps(scope)} was not offered (offered: {offered})")
        return T.approved(name, scope)
    if frame.get("cancelled") is True:  # pi's extension_ui_response: the dialog was dismissed
        return T.cancelled(name, by_client=True)
    value = frame.get("value")
    if value == "Approve":
        return T.approved(name, "once")
    if value == "Deny":
        return T.rejected(name)
    return T.malformed(name, f"the answer to the select was {json.dumps(value)}, not \"Approve\" or \"Deny\"")
