"""File and terminal delegation: through the client only when it advertises them, local tools otherwise."""

from __future__ import annotations

import asyncio
import os

from acp_harness import HANG, Editor, prompt_text, running

FILE_TURN = [
    {"toolCalls": [{"name": "read", "arguments": {"path": "app.py"}, "id": "r1"}]},
    {"toolCalls": [{"name": "edit", "arguments": {"path": "app.py", "edits": [
        {"oldText": "unsaved = 1", "newText": "unsaved = 2"}]}, "id": "e1"}]},
    {"toolCalls": [{"name": "write", "arguments": {"path": "sub/new.py", "content": "print('new')\n"},
                    "id": "w1"}]},
    {"toolCalls": [{"name": "bash", "arguments": {"command": "echo in-terminal; pwd"}, "id": "b1"}]},
    {"text": "done"},
]


def _finished(editor: Editor, call_id: str):
    return [u for u in editor.of("tool_call_update") if u.tool_call_id == call_id and u.status][-1]


async def test_with_fs_and_terminal_the_tools_go_through_the_client_and_see_unsaved_buffers(home):
    app = os.path.join(home.cwd, "app.py")
    with open(app, "w") as f:
        f.write("saved = 0\n")
    editor = Editor(fs=True, terminal=True, buffers={app: "saved = 0\nunsaved = 1\n"})
    async with running(home, editor, "--faux-script", home.faux_script(FILE_TURN)) as conn:
        sid = (await conn.new_session(cwd=home.cwd, mcp_servers=[])).session_id
        reply = await asyncio.wait_for(conn.prompt(session_id=sid, prompt=prompt_text("edit it")), HANG)
    assert reply.stop_reason == "end_turn"
    read = _finished(editor, "r1")
    assert read.status == "completed" and "unsaved = 1" in read.content[0].content.text  # the buffer, not the disk
    assert _finished(editor, "e1").status == "completed"
    assert editor.buffers[app] == "saved = 0\nunsaved = 2\n"
    assert open(app).read() == "saved = 0\n"  # the editor owns the write: the disk file is untouched
    new = os.path.join(home.cwd, "sub", "new.py")
    assert editor.buffers[new] == "print('new')\n" and not os.path.exists(new)
    methods = editor.methods_called()
    assert methods.count("fs/read_text_file") == 2 and methods.count("fs/write_text_file") == 2
    create = next(params for name, params in editor.calls if name == "terminal/create")
    assert create["args"][-1] == "echo in-terminal; pwd" and create["cwd"] == home.cwd
    assert "terminal/release" in methods
    terminal_refs = [c for u in editor.of("tool_call_update") if u.tool_call_id == "b1" for c in (u.content or [])]
    assert [c.type for c in terminal_refs] == ["terminal"]  # the call shows the editor's terminal, and only it
    bash = _finished(editor, "b1")
    assert bash.status == "completed" and bash.content is None
    assert bash.raw_output["output"] == f"in-terminal\n{home.cwd}\n"


async def test_cancel_kills_the_command_in_the_clients_terminal(home):
    script = home.faux_script([{"toolCalls": [{"name": "bash", "arguments": {"command": "sleep 60"}, "id": "s1"}]},
                          {"text": "after"}])
    editor = Editor(terminal=True)
    async with running(home, editor, "--faux-script", script) as conn:
        sid = (await conn.new_session(cwd=home.cwd, mcp_servers=[])).session_id
        turn = asyncio.ensure_future(conn.prompt(session_id=sid, prompt=prompt_text("wait")))
        await editor.wait_for(lambda: any(c.type == "terminal" for u in editor.of("tool_call_update")
                                          for c in (u.content or [])))
        await conn.cancel(session_id=sid)
        reply = await asyncio.wait_for(turn, HANG)
    assert reply.stop_reason == "cancelled"
    assert "terminal/kill" in editor.methods_called() and "terminal/release" in editor.methods_called()
    assert _finished(editor, "s1").status == "failed"


async def test_without_client_capabilities_the_tools_stay_local_and_never_call_the_client(home):
    app = os.path.join(home.cwd, "app.py")
    with open(app, "w") as f:
        f.write("saved = 0\nunsaved = 1\n")
    editor = Editor(buffers={app: "a buffer the agent must not see\n"})
    # --yolo: no permission request either (the default mode would ask before the bash call)
    async with running(home, editor, "--faux-script", home.faux_script(FILE_TURN), "--yolo") as conn:
        sid = (await conn.new_session(cwd=home.cwd, mcp_servers=[])).session_id
        reply = await asyncio.wait_for(conn.prompt(session_id=sid, prompt=prompt_text("edit it")), HANG)
    assert reply.stop_reason == "end_turn"
    assert editor.calls == []  # ACP-CLIENTCAP-001/002: no fs/* and no terminal/* without the capability
    asked = [m["method"] for d, m in editor.wire if d == "in" and "method" in m and m["method"] != "session/update"]
    assert asked == []  # nor any other client method (ACP-CLIENTCAP-003: no elicitation/create)
    assert "unsaved = 1" in _finished(editor, "r1").content[0].content.text
    assert open(app).read() == "saved = 0\nunsaved = 2\n"
    assert open(os.path.join(home.cwd, "sub", "new.py")).read() == "print('new')\n"
    bash = _finished(editor, "b1")
    assert "in-terminal" in bash.content[0].content.text  # local output, shown as text


async def test_fs_read_alone_is_not_enough_to_delegate(home):
    """Reading buffers but writing the disk under them would lose the user's unsaved edits."""
    from acp.schema import ClientCapabilities, FileSystemCapabilities

    class ReadOnlyEditor(Editor):
        def capabilities(self):
            return ClientCapabilities(fs=FileSystemCapabilities(read_text_file=True, write_text_file=False))

    with open(os.path.join(home.cwd, "app.py"), "w") as f:
        f.write("unsaved = 1\n")
    editor = ReadOnlyEditor()
    async with running(home, editor, "--faux-script", home.faux_script(FILE_TURN[:1] + [{"text": "ok"}])) as conn:
        sid = (await conn.new_session(cwd=home.cwd, mcp_servers=[])).session_id
        await asyncio.wait_for(conn.prompt(session_id=sid, prompt=prompt_text("read")), HANG)
    assert editor.calls == []
    assert _finished(editor, "r1").status == "completed"
