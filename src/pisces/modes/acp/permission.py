"""The ACP approver: asks the client whether a tool call may run, with ``session/request_permission``.

The approval policy (``pisces.core.approval``) decides allow, deny or ask; on ask the session calls
``await approver.approve(request, timeout_ms=..., signal=...)`` with the core's ``ApprovalRequest`` (a plain
mapping with the interface's camelCase names works too) and gets an ``ApprovalAnswer``. ``PiscesAgent`` makes
one approver per session; ACP editors can always be asked, so the default approval mode here is ``write``.

What the client is shown (the faults editor users report most: a card that does not say what it approves):
the title names the command or the path ("Run `rm -rf build`", "Edit src/app.py"), ``rawInput`` carries the
(redacted) input, ``content`` the command in a code block or the diff of the edit, ``locations`` the file.

How it ends, exactly once, and never as a silent denial that looks like a person's:
- the person chose:        approved or not, ``reason="user"``, scope ``once`` or ``session``;
- no answer in time:       denied, ``reason="timeout"``, "... timed out after N s ...";
- the turn was cancelled:  denied, ``reason="cancelled"`` (the client's ``cancelled`` outcome too);
- the client cannot ask (it answers the request with an error, or the connection is gone):
                           the documented default, ``fallback`` (deny unless configured otherwise),
                           ``reason="unavailable"``, with a message that says the client could not ask.
"""

from __future__ import annotations

import asyncio
from typing import Any

from acp import RequestError, text_block, tool_content
from acp.schema import AllowedOutcome, PermissionOption, PermissionOptionKind, ToolCallUpdate

from pisces.core.approval.session_gate import DEFAULT_TIMEOUT_MS  # the session passes tools.approvalTimeoutMs
from pisces.core.approval.types import ApprovalAnswer, ApprovalRequest, as_request

from . import toolview

OPTIONS: dict[str, tuple[str, PermissionOptionKind, str | None]] = {  # option id -> (label, ACP kind, scope)
    "allow-once": ("Allow once", "allow_once", "once"),
    "allow-session": ("Allow for this session", "allow_always", "session"),
    "allow-always": ("Always allow", "allow_always", "always"),
    "reject-once": ("Reject", "reject_once", None),
}


def permission_title(request: ApprovalRequest) -> str:
    command = request.identity.get("command")
    path = request.identity.get("path")
    if request.identity.get("kind") == "plan":  # plan mode's exit_plan_mode (docs/planning.md)
        return f"Approve the plan: {request.identity.get('title') or 'untitled'}"
    if isinstance(command, str) and command:
        return f"Run `{toolview.short_command(command)}`"
    if isinstance(path, str) and path:
        verb = {"edit": "Edit", "write": "Write", "read": "Read"}.get(request.tool_name, request.tool_name)
        return f"{verb} {path}"
    return f"Allow {request.tool_name}?"


class AcpApprover:
    default_mode = "write"  # an editor can always be asked (session/request_permission is part of ACP)
    asks = "acp"

    def __init__(self, conn: Any, binding: Any, cwd: str, *, fallback: str = "deny") -> None:
        self._conn = conn
        self._binding = binding
        self._cwd = cwd
        self.fallback = fallback  # "deny" or "allow": the answer when the client cannot ask

    def tool_call(self, request: ApprovalRequest) -> ToolCallUpdate:
        view = toolview.describe(request.tool_name, {**request.input, **request.identity}, self._cwd)
        content = list(view.content)
        command = request.identity.get("command")
        if isinstance(command, str) and command:
            content.insert(0, tool_content(text_block(toolview.fenced(command))))
        if request.detail:
            content.append(tool_content(text_block(request.detail)))
        return ToolCallUpdate(tool_call_id=request.tool_call_id, title=permission_title(request), kind=view.kind,
                              status="pending", content=content or None, locations=view.locations or None,
                              raw_input=request.input)

    def options(self, request: ApprovalRequest) -> list[PermissionOption]:
        return [PermissionOption(option_id=oid, name=label, kind=kind) for oid, (label, kind, scope) in OPTIONS.items()
                if scope is None or scope == "once" or scope in request.scopes]

    async def approve(self, request: Any, *, timeout_ms: int | None = None, signal: Any = None) -> ApprovalAnswer:
        req = as_request(request)
        timeout = (timeout_ms if timeout_ms is not None else DEFAULT_TIMEOUT_MS) / 1000
        asked = asyncio.ensure_future(self._conn.request_permission(
            session_id=self._binding.session_id, tool_call=self.tool_call(req), options=self.options(req)))
        aborted: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def abort() -> None:
            if not aborted.done():
                aborted.set_result(None)

        remove = signal.add_listener(abort) if signal else (lambda: None)
        try:
            await asyncio.wait({asked, aborted}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            asked.cancel()
            raise
        finally:
            remove()
            aborted.cancel()
        if not asked.done():
            asked.cancel()
            if signal is not None and signal.aborted:
                return ApprovalAnswer(False, None, "cancelled",
                                      f"The turn was cancelled while {req.tool_name} waited for permission.")
            return ApprovalAnswer(False, None, "timeout",
                                  f"The permission request for {req.tool_name} timed out after {timeout:g} s with no "
                                  "answer from the user; the call was not run.")
        error = asked.exception()
        if isinstance(error, (RequestError, ConnectionError)):
            return self._unavailable(req, error)
        if error is not None:
            raise error
        return self._answer(req, asked.result().outcome)

    def _unavailable(self, req: ApprovalRequest, error: BaseException) -> ApprovalAnswer:
        allowed = self.fallback == "allow"
        verdict = "allowed" if allowed else "denied"
        return ApprovalAnswer(allowed, "once" if allowed else None, "unavailable",
                              f"The client could not ask for permission ({error}); {req.tool_name} was {verdict} by "
                              "the default for clients that cannot ask.")

    def _answer(self, req: ApprovalRequest, outcome: Any) -> ApprovalAnswer:
        if not isinstance(outcome, AllowedOutcome):
            return ApprovalAnswer(False, None, "cancelled",
                                  f"The client cancelled the permission request for {req.tool_name}.")
        chosen = OPTIONS.get(outcome.option_id)
        if chosen is None:
            return ApprovalAnswer(False, None, "invalid",
                                  f"The client answered with an unknown option '{outcome.option_id}'; "
                                  f"{req.tool_name} was not run.")
        scope = chosen[2]
        if scope is None:
            return ApprovalAnswer(False, None, "user", f"The user rejected {req.tool_name}.")
        return ApprovalAnswer(True, scope, "user", f"The user allowed {req.tool_name} ({scope}).")
