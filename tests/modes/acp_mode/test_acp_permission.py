"""The ACP approver (TEAM.md interface 7) through the SDK's client side, in process: the test is the trigger
the approval policy (issue 14) will be. Every way a request can end is checked, and each ends once."""

from __future__ import annotations

import asyncio

import pytest
from acp import RequestError
from acp._transport import memory_transport_pair
from acp.core import AgentSideConnection, ClientSideConnection
from acp_harness import Editor

from pisces.ai.abort import AbortSignal
from pisces.modes.acp.delegate import Binding
from pisces.modes.acp.permission import AcpApprover, ApprovalRequest


class _NoAgent:
    pass


class _SilentEditor(Editor):
    """Shows the card and never answers (a client whose UI never rendered it)."""

    shown: asyncio.Event | None = None

    async def request_permission(self, session_id, tool_call, options, **kwargs):
        self.calls.append(("request_permission", {"tool_call": tool_call, "options": options}))
        if self.shown is not None:
            self.shown.set()
        await asyncio.Event().wait()


class _RefusingEditor(Editor):
    async def request_permission(self, session_id, tool_call, options, **kwargs):
        raise RequestError.method_not_found("session/request_permission")


@pytest.fixture
async def wire():
    connections = []

    async def connect(editor: Editor, **approver_options):
        agent_end, client_end = memory_transport_pair()
        agent_conn = AgentSideConnection(_NoAgent(), agent_end)
        client_conn = ClientSideConnection(editor, client_end)
        connections.extend([agent_conn, client_conn])
        binding = Binding()
        binding.session_id = "s-1"
        return AcpApprover(agent_conn, binding, "/project", **approver_options)

    yield connect
    for conn in connections:
        await conn.close()


BASH = ApprovalRequest(tool_call_id="call-1", tool_name="bash", tier="shell", identity={"command": "rm -rf build"},
                       input={"command": "rm -rf build", "timeout": 5}, detail="Deletes files outside git.")


async def test_an_allowed_command_shows_the_command_in_title_raw_input_and_content(wire):
    editor = Editor(permission="allow-once")
    answer = await (await wire(editor)).approve(BASH, timeout_ms=30_000, signal=AbortSignal())
    assert (answer.approved, answer.scope, answer.reason) == (True, "once", "user")
    (name, asked), = editor.calls
    card = asked["tool_call"]
    assert card.title == "Run `rm -rf build`" and card.kind == "execute" and card.status == "pending"
    assert card.raw_input == {"command": "rm -rf build", "timeout": 5}
    assert card.content[0].content.text == "```\nrm -rf build\n```"
    assert card.content[-1].content.text == "Deletes files outside git."
    assert [(o.option_id, o.kind) for o in asked["options"]] == [
        ("allow-once", "allow_once"), ("allow-session", "allow_always"), ("reject-once", "reject_once")]


async def test_allow_for_the_session_and_always_are_scopes(wire):
    editor = Editor(permission="allow-session")
    answer = await (await wire(editor)).approve(BASH, timeout_ms=30_000)
    assert (answer.approved, answer.scope) == (True, "session")
    editor = Editor(permission="allow-always")
    request = {"toolCallId": "c2", "toolName": "bash", "identity": {"command": "make"}, "input": {"command": "make"},
               "scopes": ["once", "session", "always"]}  # the interface's camelCase mapping works too
    answer = await (await wire(editor)).approve(request, timeout_ms=30_000)
    assert (answer.approved, answer.scope) == (True, "always")
    assert "allow-always" in [o.option_id for o in editor.calls[0][1]["options"]]


async def test_a_rejection_is_the_users_no(wire):
    answer = await (await wire(Editor(permission="reject-once"))).approve(BASH, timeout_ms=30_000)
    assert (answer.approved, answer.reason) == (False, "user") and "rejected" in answer.message


async def test_an_edit_shows_the_path_the_diff_and_the_location(wire):
    editor = Editor(permission="allow-once")
    request = ApprovalRequest(tool_call_id="e1", tool_name="edit", identity={"path": "src/app.py"},
                              input={"path": "src/app.py", "edits": [{"oldText": "a = 1", "newText": "a = 2"}]})
    await (await wire(editor)).approve(request, timeout_ms=30_000)
    card = editor.calls[0][1]["tool_call"]
    assert card.title == "Edit src/app.py" and card.kind == "edit"
    assert (card.content[0].type, card.content[0].path, card.content[0].old_text, card.content[0].new_text) == (
        "diff", "/project/src/app.py", "a = 1", "a = 2")
    assert card.locations[0].path == "/project/src/app.py"


async def test_no_answer_in_time_is_a_denial_that_says_it_timed_out(wire):
    editor = _SilentEditor()
    answer = await (await wire(editor)).approve(BASH, timeout_ms=50, signal=AbortSignal())
    assert (answer.approved, answer.reason) == (False, "timeout")
    assert "timed out" in answer.message and "not run" in answer.message
    assert editor.calls  # the card was shown


async def test_a_cancelled_turn_and_a_cancelled_card_are_cancellations(wire):
    signal = AbortSignal()
    editor = _SilentEditor()
    editor.shown = asyncio.Event()
    approver = await wire(editor)
    pending = asyncio.ensure_future(approver.approve(BASH, timeout_ms=30_000, signal=signal))
    await asyncio.wait_for(editor.shown.wait(), 30)
    signal.abort()
    answer = await asyncio.wait_for(pending, 30)
    assert (answer.approved, answer.reason) == (False, "cancelled")
    answer = await (await wire(Editor(permission="cancel"))).approve(BASH, timeout_ms=30_000)
    assert (answer.approved, answer.reason) == (False, "cancelled")


async def test_a_client_that_cannot_ask_gets_the_documented_default_not_a_users_no(wire):
    answer = await (await wire(_RefusingEditor())).approve(BASH, timeout_ms=30_000)
    assert (answer.approved, answer.reason) == (False, "unavailable")
    assert "could not ask" in answer.message and "default" in answer.message
    answer = await (await wire(_RefusingEditor(), fallback="allow")).approve(BASH, timeout_ms=30_000)
    assert (answer.approved, answer.scope, answer.reason) == (True, "once", "unavailable")
