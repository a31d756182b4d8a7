"""Plan mode through the real ``pisces --mode acp`` (docs/planning.md#plan-mode): the ``plan`` session mode is
advertised and set with ``session/set_mode``, a write is refused while in it, ``exit_plan_mode`` asks the editor
with ``session/request_permission``, the approval turns the mode back to ``default`` (a ``current_mode_update``)
and the write runs; a resumed session that was left in plan mode reports ``plan`` as its mode."""

from __future__ import annotations

import asyncio
import os

from acp_harness import HANG, Editor, prompt_text, running


def _call(name: str, call_id: str, **arguments: object) -> dict:
    return {"toolCalls": [{"name": name, "arguments": arguments, "id": call_id}]}


def _status(editor: Editor, call_id: str) -> str:
    return [u for u in editor.of("tool_call_update") if u.tool_call_id == call_id and u.status][-1].status


async def test_plan_session_mode_refuses_writes_until_the_editor_approves_the_plan(home):
    with open(os.path.join(home.agent_dir, "settings.json"), "w", encoding="utf-8") as f:
        f.write('{"plan": {"continueIn": "new"}}')  # not for ACP: the editor starts every turn, so "same"
    script = home.faux_script([
        _call("write", "w1", path="a.txt", content="early"),
        _call("exit_plan_mode", "x1", title="Write a.txt", plan="1. write a.txt\n"),
        _call("write", "w2", path="a.txt", content="planned"),
        {"text": "done"},
    ])
    editor = Editor(permission="allow-once")
    async with running(home, editor, "--faux-script", script) as conn:
        created = await conn.new_session(cwd=home.cwd, mcp_servers=[])
        sid = created.session_id
        assert "plan" in [m.id for m in created.modes.available_modes]
        assert created.modes.current_mode_id == "default"
        await conn.set_session_mode(session_id=sid, mode_id="plan")
        await editor.wait_for(lambda: editor.of("current_mode_update", sid))
        assert editor.of("current_mode_update", sid)[-1].current_mode_id == "plan"
        reply = await asyncio.wait_for(conn.prompt(session_id=sid, prompt=prompt_text("plan it")), HANG)
    assert reply.stop_reason == "end_turn"
    assert _status(editor, "w1") == "failed" and _status(editor, "w2") == "completed"
    asked = [c[1]["tool_call"] for c in editor.calls if c[0] == "request_permission"]
    assert [a.title for a in asked] == ["Approve the plan: Write a.txt"]  # the write of w2 passes in write mode
    assert asked[0].raw_input["plan"] == "1. write a.txt\n"
    assert [u.current_mode_id for u in editor.of("current_mode_update", sid)] == ["plan", "default"]
    with open(os.path.join(home.cwd, "a.txt"), encoding="utf-8") as f:
        assert f.read() == "planned"


async def test_a_session_left_in_plan_mode_resumes_in_it_and_the_editor_can_leave_it(home):
    editor = Editor()
    async with running(home, editor, "--faux-script", home.faux_script([{"text": "looking"}])) as conn:
        sid = (await conn.new_session(cwd=home.cwd, mcp_servers=[])).session_id
        await conn.set_session_mode(session_id=sid, mode_id="plan")
        await asyncio.wait_for(conn.prompt(session_id=sid, prompt=prompt_text("look")), HANG)  # the file is written
    again = Editor()
    async with running(home, again, "--provider", "faux") as conn:
        resumed = await conn.resume_session(cwd=home.cwd, session_id=sid, mcp_servers=[])
        assert resumed.modes.current_mode_id == "plan"
        await conn.set_session_mode(session_id=sid, mode_id="default")
        await again.wait_for(lambda: again.of("current_mode_update", sid))
    assert again.of("current_mode_update", sid)[-1].current_mode_id == "default"
