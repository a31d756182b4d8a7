"""The RPC approver in process: typed and pi-form frames from one request, the pending frames a client that
attaches later gets (the web host's many clients), first answer wins across clients and forms, cancels, and
the answers that fail closed. Plus the session gate's grants, fallback and mode precedence."""

from __future__ import annotations

import asyncio

import pytest

from pisces.ai.abort import AbortSignal
from pisces.core.approval.types import ApprovalRequest
from pisces.modes.host.approvals import ClientApprover, client_form, parse_answer

REQ = ApprovalRequest(tool_call_id="call-1", tool_name="bash", tier="exec",
                      identity={"kind": "shell", "command": "make deploy"}, input={"command": "make deploy"},
                      detail="the approval mode is write, and bash is an exec tool",
                      scopes=("once", "session", "always"))


class Clients:
    """Several clients on one session, each with its own form: what a host broadcasting ``send`` would do."""

    def __init__(self, *typed: bool) -> None:
        self.typed = list(typed)
        self.inbox: list[list[dict]] = [[] for _ in typed]

    def send(self, frame: dict) -> None:
        for i, typed in enumerate(self.typed):
            self.inbox[i].append(client_form(frame, typed))

    def attach(self, approver: ClientApprover, typed: bool) -> int:
        self.typed.append(typed)
        self.inbox.append([client_form(f, typed) for f in approver.pending_frames()])
        return len(self.typed) - 1


async def _shown(clients: Clients, index: int = 0) -> dict:
    for _ in range(1000):
        if clients.inbox[index]:
            return clients.inbox[index][0]
        await asyncio.sleep(0)
    raise AssertionError("nothing was sent")


async def test_one_request_in_both_forms_and_a_late_client_gets_it_with_the_time_left():
    clients = Clients(True, False)
    approver = ClientApprover(clients.send, cancel_when_answered=True)
    task = asyncio.ensure_future(approver.approve(REQ, timeout_ms=60_000, signal=AbortSignal()))
    typed = await _shown(clients, 0)
    select = clients.inbox[1][0]
    assert typed["type"] == "tool_approval_request" and typed["identity"] == REQ.identity
    assert typed["scopes"] == ["once", "session", "always"] and typed["timeout"] == 60_000
    assert select == {"type": "extension_ui_request", "id": typed["id"], "method": "select",
                      "title": "Allow tool: bash\nCommand:\nmake deploy\nWhy: the approval mode is write, and bash "
                               "is an exec tool", "options": ["Approve", "Deny"], "timeout": 60_000}
    late = clients.attach(approver, True)
    (again,) = clients.inbox[late]
    assert again["id"] == typed["id"] and again["toolCallId"] == "call-1" and 0 < again["timeout"] <= 60_000
    assert approver.answer({"type": "tool_approval_response", "id": again["id"], "toolCallId": "call-1",
                            "approved": True, "scope": "session"})
    assert not approver.answer({"type": "extension_ui_response", "id": typed["id"], "value": "Deny"})  # too late
    answer = await asyncio.wait_for(task, 30)
    assert (answer.approved, answer.scope, answer.reason) == (True, "session", "user")
    # the others are told it is over, each in its form
    assert clients.inbox[0][-1]["type"] == "tool_approval_cancel" and clients.inbox[0][-1]["reason"] == "answered"
    assert clients.inbox[1][-1] == {"type": "extension_ui_request", "id": clients.inbox[1][-1]["id"],
                                    "method": "cancel", "targetId": typed["id"]}
    assert approver.pending_frames() == []


async def test_a_pi_client_answers_through_the_select():
    clients = Clients(False)
    approver = ClientApprover(clients.send)
    task = asyncio.ensure_future(approver.approve(REQ, timeout_ms=60_000))
    select = await _shown(clients)
    approver.answer({"type": "extension_ui_response", "id": select["id"], "value": "Deny"})
    answer = await asyncio.wait_for(task, 30)
    assert (answer.approved, answer.reason, answer.message) == (False, "user", "Tool call denied by user: bash")
    assert len(clients.inbox[0]) == 1  # one client, it answered: nothing more to say


async def test_timeout_abort_and_close_each_end_once_and_say_why():
    clients = Clients(True)
    approver = ClientApprover(clients.send)
    answer = await asyncio.wait_for(approver.approve(REQ, timeout_ms=20), 30)
    assert answer.reason == "timeout" and "timed out after 0.02 s" in answer.message
    cancel = clients.inbox[0][-1]
    assert (cancel["type"], cancel["targetId"], cancel["reason"]) == ("tool_approval_cancel",
                                                                      clients.inbox[0][0]["id"], "timeout")
    signal = AbortSignal()
    task = asyncio.ensure_future(approver.approve(REQ, timeout_ms=60_000, signal=signal))
    while len(clients.inbox[0]) < 3:
        await asyncio.sleep(0)
    signal.abort()
    answer = await asyncio.wait_for(task, 30)
    assert answer.reason == "cancelled" and clients.inbox[0][-1]["reason"] == "aborted"
    task = asyncio.ensure_future(approver.approve(REQ, timeout_ms=60_000))
    while len(clients.inbox[0]) < 5:
        await asyncio.sleep(0)
    approver.close()
    assert (await asyncio.wait_for(task, 30)).reason == "unavailable"
    assert (await approver.approve(REQ, timeout_ms=60_000)).reason == "unavailable"  # closed: at once


@pytest.mark.parametrize("frame, problem", [
    ({"type": "tool_approval_response", "toolCallId": "other", "approved": True}, "it names tool call \"other\""),
    ({"type": "tool_approval_response", "toolCallId": "call-1", "approved": 1}, "'approved' must be true or false"),
    ({"type": "tool_approval_response", "toolCallId": "call-1", "approved": True, "scope": "forever"},
     "scope \"forever\" was not offered"),
    ({"type": "extension_ui_response", "value": "approve"}, "not \"Approve\" or \"Deny\""),
])
def test_malformed_answers_fail_closed(frame, problem):
    answer = parse_answer(frame, REQ)
    assert (answer.approved, answer.reason) == (False, "invalid") and problem in answer.message


def test_a_dismissal_and_a_persons_no_read_differently():
    dismissed = parse_answer({"type": "tool_approval_response", "toolCallId": "call-1", "cancelled": True}, REQ)
    no = parse_answer({"type": "tool_approval_response", "toolCallId": "call-1", "approved": False,
                       "message": "not on Fridays"}, REQ)
    assert dismissed.reason == "cancelled" and "dismissed" in dismissed.message
    assert no.reason == "user" and no.message == "Tool call denied by user: bash (not on Fridays)"


# -- the session gate ---------------------------------------------------------------------------------------------
class _Settings:
    def __init__(self, global_=None, project=None, trusted=False):
        self._g, self._p, self.project_trusted = global_ or {}, project or {}, trusted
        self.global_path, self.project_path = "/g/settings.json", "/p/.pisces/settings.json"

    def global_settings(self):
        return self._g

    def project_settings(self):
        return self._p

    def get(self, key, default=None):
        node = {**self._g}
        for part in key.split("."):
            if not isinstance(node, dict) or part not in node:
                return default
            node = node[part]
        return node


class _Info:
    def __init__(self, command, call_id="c1"):
        self.tool_call_id, self.tool_name, self.args, self.tool = call_id, "bash", {"command": command}, None
        self.signal = AbortSignal()


class _Approver:
    default_mode = "write"

    def __init__(self, answer):
        self.answer, self.asked = answer, []

    async def approve(self, request, *, timeout_ms=None, signal=None):
        self.asked.append(request)
        return self.answer


async def test_session_grants_end_with_the_session_and_never_cover_a_dangerous_command():
    from pisces.core.approval import SessionApproval
    from pisces.core.approval.types import ApprovalAnswer

    gate = SessionApproval(_Settings(), "/p")
    approver = _Approver(ApprovalAnswer(True, "session", "user", "ok"))
    gate.set_approver(approver)
    assert await gate.before_tool_call(_Info("make")) is None
    assert await gate.before_tool_call(_Info("make")) is None and len(approver.asked) == 1
    gate.on_event({"type": "session_changed", "reason": "new"})
    assert await gate.before_tool_call(_Info("make")) is None and len(approver.asked) == 2
    await gate.before_tool_call(_Info("rm -rf ~"))
    await gate.before_tool_call(_Info("rm -rf ~"))
    assert len(approver.asked) == 4 and approver.asked[-1].scopes == ("once",)


async def test_the_fallback_never_allows_a_dangerous_command():
    from pisces.core.approval import SessionApproval
    from pisces.core.approval.types import ApprovalAnswer

    gate = SessionApproval(_Settings(), "/p")
    gate.set_approver(_Approver(ApprovalAnswer(True, "once", "unavailable", "fallback")))
    assert await gate.before_tool_call(_Info("make")) is None
    blocked = await gate.before_tool_call(_Info("curl x | sh"))
    assert blocked.block and "known-dangerous command: it downloads a script" in blocked.reason


def test_mode_precedence():
    from pisces.core.approval import SessionApproval

    gate = SessionApproval(_Settings({"tools": {"approvalMode": "write"}}, {"tools": {"approvalMode": "yolo"}}),
                           "/p")
    assert gate.mode() == ("write", "settings")  # an untrusted project cannot loosen it
    gate = SessionApproval(_Settings({}, {"tools": {"approvalMode": "always-ask"}}), "/p")
    assert gate.mode() == ("always-ask", "project")  # but may tighten it
    gate = SessionApproval(_Settings({}, {"tools": {"approvalMode": "yolo"}}, trusted=True), "/p", cli_mode="write")
    assert gate.mode() == ("write", "cli")
    gate.cli_mode = None
    assert gate.mode() == ("yolo", "project")
    gate.set_mode("always-ask")
    assert gate.mode() == ("always-ask", "command")
    with pytest.raises(ValueError, match="Invalid approval mode 'x'"):
        gate.set_mode("x")
