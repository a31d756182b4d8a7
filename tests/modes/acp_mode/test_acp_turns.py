"""``pisces --mode acp`` driven by the SDK's client side with the faux model: initialize, sessions, turns."""

from __future__ import annotations

import asyncio
import json
import os

from acp import RequestError
from acp_harness import HANG, Editor, prompt_text, running


async def test_initialize_answers_version_1_with_honest_capabilities(home):
    editor = Editor()
    async with running(home, editor, "--provider", "faux", initialize=False) as conn:
        first = await asyncio.wait_for(conn.initialize(protocol_version=1), HANG)
        future = await asyncio.wait_for(conn.initialize(protocol_version=65535), HANG)  # ACP-INIT-003
    assert first.protocol_version == 1 and future.protocol_version == 1
    caps = first.agent_capabilities
    assert caps.load_session is True
    assert caps.prompt_capabilities.image and caps.prompt_capabilities.embedded_context
    assert not caps.prompt_capabilities.audio
    assert not caps.mcp_capabilities.http and not caps.mcp_capabilities.sse  # no MCP client yet
    assert caps.session_capabilities.list is not None and caps.session_capabilities.resume is not None
    assert caps.session_capabilities.close is not None
    assert caps.session_capabilities.fork is None  # not offered: not implemented
    assert first.agent_info.name == "pisces" and first.agent_info.version
    assert first.auth_methods == []


async def test_new_session_ids_are_distinct_and_cwd_must_be_absolute(home):
    editor = Editor()
    async with running(home, editor, "--provider", "faux") as conn:
        a = await conn.new_session(cwd=home.cwd, mcp_servers=[])
        b = await conn.new_session(cwd=home.cwd, mcp_servers=[])
        try:
            await conn.new_session(cwd="relative/dir", mcp_servers=[])
            raise AssertionError("a relative cwd was accepted")
        except RequestError as exc:
            assert exc.code == -32602 and "absolute" in json.dumps(exc.data)
        c = await conn.new_session(cwd=home.cwd, mcp_servers=[])  # still serving after the error
    assert len({a.session_id, b.session_id, c.session_id}) == 3
    assert a.modes.current_mode_id == "default"
    assert {o.id for o in a.config_options} == {"mode", "model", "thought_level"}


async def test_a_turn_streams_thinking_text_and_tool_calls_then_answers_end_turn_with_usage(home):
    (open(os.path.join(home.cwd, "notes.txt"), "w")).write("alpha\nbeta\n")
    script = home.faux_script([
        {"thinking": "Look first.", "text": "Reading.", "toolCalls": [
            {"name": "read", "arguments": {"path": "notes.txt"}, "id": "r1"},
            {"name": "bash", "arguments": {"command": "echo from-bash; exit 3"}, "id": "b1"}],
         "usage": {"input": 100, "output": 20, "cacheRead": 5, "cacheWrite": 0}},
        {"toolCalls": [{"name": "edit", "arguments": {"path": "notes.txt", "edits": [
            {"oldText": "beta", "newText": "gamma"}]}, "id": "e1"},
            {"name": "write", "arguments": {"path": "new.txt", "content": "fresh\n"}, "id": "w1"}],
         "usage": {"input": 200, "output": 30, "cacheRead": 0, "cacheWrite": 7}},
        {"text": "All done.", "usage": {"input": 300, "output": 3, "cacheRead": 0, "cacheWrite": 0}},
    ])
    editor = Editor()
    async with running(home, editor, "--faux-script", script) as conn:
        sid = (await conn.new_session(cwd=home.cwd, mcp_servers=[])).session_id
        reply = await asyncio.wait_for(conn.prompt(session_id=sid, prompt=prompt_text("Tidy notes")), HANG)
    assert reply.stop_reason == "end_turn"
    assert reply.usage.input_tokens == 600 and reply.usage.output_tokens == 53
    assert reply.usage.cached_read_tokens == 5 and reply.usage.cached_write_tokens == 7
    assert reply.usage.total_tokens == 600 + 53 + 5 + 7
    assert editor.text("agent_thought_chunk") == "Look first."
    assert editor.text() == "Reading.All done."  # each delta once; nothing sent twice
    starts = {u.tool_call_id: u for u in editor.of("tool_call")}
    ends = {u.tool_call_id: u for u in editor.of("tool_call_update") if u.status}
    read, bash, edit, write = starts["r1"], starts["b1"], starts["e1"], starts["w1"]
    assert (read.kind, read.title) == ("read", "Read notes.txt")
    assert read.locations[0].path == os.path.join(home.cwd, "notes.txt")
    assert "alpha\nbeta" in ends["r1"].content[0].content.text and ends["r1"].status == "completed"
    assert (bash.kind, bash.title, bash.raw_input) == ("execute", "echo from-bash; exit 3",
                                                        {"command": "echo from-bash; exit 3"})
    assert ends["b1"].status == "failed" and "from-bash" in ends["b1"].content[0].content.text
    assert "Command exited with code 3" in ends["b1"].raw_output["output"]
    assert (edit.kind, edit.title) == ("edit", "Edit notes.txt")
    diff = edit.content[0]
    assert (diff.type, diff.path, diff.old_text, diff.new_text) == ("diff", os.path.join(home.cwd, "notes.txt"),
                                                                    "beta", "gamma")
    assert ends["e1"].status == "completed" and ends["e1"].locations[0].line == 2
    assert write.content[0].new_text == "fresh\n" and write.content[0].old_text is None
    assert open(os.path.join(home.cwd, "notes.txt")).read() == "alpha\ngamma\n"
    kinds = editor.kinds(sid)
    assert kinds.index("tool_call") < kinds.index("tool_call_update")
    info = editor.of("session_info_update")
    assert info and info[0].title == "Tidy notes" and info[0].updated_at
    assert editor.of("usage_update") and editor.of("usage_update")[-1].size == 128000


async def test_cancel_during_a_tool_answers_cancelled_with_every_update_before_the_answer(home):
    script = home.faux_script([{"toolCalls": [{"name": "bash", "arguments": {"command": "echo started; sleep 60"},
                                          "id": "slow"}]}, {"text": "after"}])
    editor = Editor()
    async with running(home, editor, "--faux-script", script) as conn:
        sid = (await conn.new_session(cwd=home.cwd, mcp_servers=[])).session_id
        turn = asyncio.ensure_future(conn.prompt(session_id=sid, prompt=prompt_text("run it")))
        await editor.wait_for(lambda: any("started" in (c.content.text if c.type == "content" else "")
                                          for u in editor.of("tool_call_update") for c in (u.content or [])))
        await conn.cancel(session_id=sid)
        reply = await asyncio.wait_for(turn, HANG)
        answered_at = _response_index(editor, "session/prompt")
        listed = await conn.list_sessions(cwd=home.cwd)  # a later request: nothing of the turn comes before it
    assert reply.stop_reason == "cancelled"
    final = [u for u in editor.of("tool_call_update") if u.status]
    assert final and final[-1].status == "failed" and "Command aborted" in final[-1].raw_output["output"]
    after = [m for d, m in editor.wire[answered_at:] if d == "in" and m.get("method") == "session/update"]
    assert after == [], f"updates after the cancelled turn's answer: {after}"
    assert listed.sessions is not None


async def test_cancel_while_the_model_streams_and_the_next_prompt_still_works(home):
    script = home.faux_script([{"text": "x" * 400, "chunkSize": 1, "delayMs": 50}, {"text": "second answer"}])
    editor = Editor()
    async with running(home, editor, "--faux-script", script) as conn:
        sid = (await conn.new_session(cwd=home.cwd, mcp_servers=[])).session_id
        turn = asyncio.ensure_future(conn.prompt(session_id=sid, prompt=prompt_text("long")))
        await editor.wait_for(lambda: editor.of("agent_message_chunk"))
        await conn.cancel(session_id=sid)
        first = await asyncio.wait_for(turn, HANG)
        second = await asyncio.wait_for(conn.prompt(session_id=sid, prompt=prompt_text("again")), HANG)
    assert first.stop_reason == "cancelled" and second.stop_reason == "end_turn"
    assert editor.text().endswith("second answer") and len(editor.text()) < 400 + len("second answer")


async def test_a_model_error_is_a_json_rpc_error_with_the_providers_sentence(home):
    script = home.faux_script([{"text": "partial", "error": "401 invalid x-api-key"}])
    editor = Editor()
    async with running(home, editor, "--faux-script", script) as conn:
        await conn.new_session(cwd=home.cwd, mcp_servers=[])
        sid = (await conn.new_session(cwd=home.cwd, mcp_servers=[])).session_id
        try:
            await asyncio.wait_for(conn.prompt(session_id=sid, prompt=prompt_text("hi")), HANG)
            raise AssertionError("the error reply was answered as a normal turn")
        except RequestError as exc:
            assert "401 invalid x-api-key" in str(exc)


async def test_without_a_key_the_prompt_fails_with_the_sentence_that_says_what_to_set(home):
    editor = Editor()
    async with running(home, editor) as conn:
        sid = (await conn.new_session(cwd=home.cwd, mcp_servers=[])).session_id
        try:
            await asyncio.wait_for(conn.prompt(session_id=sid, prompt=prompt_text("hi")), HANG)
            raise AssertionError("a prompt without any API key was accepted")
        except RequestError as exc:
            assert "API key" in str(exc)


async def test_modes_and_config_options_change_the_session(home):
    script = home.faux_script([{"toolCalls": [{"name": "bash", "arguments": {"command": "echo no"}, "id": "b1"}]},
                          {"text": "ok"}])
    editor = Editor()
    async with running(home, editor, "--faux-script", script) as conn:
        new = await conn.new_session(cwd=home.cwd, mcp_servers=[])
        sid = new.session_id
        model = next(o for o in new.config_options if o.id == "model")
        assert model.current_value == "faux/faux"
        assert {o.value for o in model.options} >= {"faux/faux", "faux/faux-reasoning"}
        thinking = next(o for o in new.config_options if o.id == "thought_level")
        assert [o.value for o in thinking.options] == ["off"]  # faux/faux does not reason
        changed = await conn.set_config_option(config_id="model", session_id=sid, value="faux/faux-reasoning")
        assert {o.id for o in changed.config_options} == {"mode", "model", "thought_level"}  # the complete list
        assert all(o.type == "select" for o in changed.config_options)  # ACP-CONFIG-003: no boolean options
        levels = next(o for o in changed.config_options if o.id == "thought_level")
        assert "high" in [o.value for o in levels.options]
        high = await conn.set_config_option(config_id="thought_level", session_id=sid, value="high")
        assert next(o for o in high.config_options if o.id == "thought_level").current_value == "high"
        try:
            await conn.set_config_option(config_id="model", session_id=sid, value="nope/none")
            raise AssertionError("an unknown model was accepted")
        except RequestError as exc:
            assert exc.code == -32602
        await conn.set_session_mode(session_id=sid, mode_id="read-only")
        reply = await asyncio.wait_for(conn.prompt(session_id=sid, prompt=prompt_text("try bash")), HANG)
    assert reply.stop_reason == "end_turn"
    end = [u for u in editor.of("tool_call_update") if u.status][-1]
    assert end.status == "failed" and "Tool bash not found" in end.raw_output["output"]
    updates = editor.of("config_option_update")
    assert updates and next(o for o in updates[-1].config_options if o.id == "mode").current_value == "read-only"


async def test_available_commands_list_the_prompt_templates_and_a_slash_command_expands(home):
    prompts = os.path.join(home.agent_dir, "prompts")
    os.makedirs(prompts)
    with open(os.path.join(prompts, "review.md"), "w") as f:
        f.write("---\ndescription: Review a file\n---\nPlease review $1 carefully.\n")
    script = home.faux_script([{"text": "Reviewed."}])
    editor = Editor()
    async with running(home, editor, "--faux-script", script) as conn:
        sid = (await conn.new_session(cwd=home.cwd, mcp_servers=[])).session_id
        await editor.wait_for(lambda: editor.of("available_commands_update", sid))
        await asyncio.wait_for(conn.prompt(session_id=sid, prompt=prompt_text("/review main.py")), HANG)
    commands = editor.of("available_commands_update", sid)[0].available_commands
    assert [(c.name, c.description) for c in commands] == [("review", "Review a file")]
    (path,) = home.session_files()
    user = [json.loads(line) for line in open(path) if '"role":"user"' in line]
    assert user[0]["message"]["content"][0]["text"] == "Please review main.py carefully.\n"


async def test_mcp_servers_from_session_new_are_started_for_the_session(home):
    import sys

    from acp.schema import EnvVariable, McpServerStdio

    servers_py = os.path.join(os.path.dirname(__file__), "..", "..", "core", "mcp", "servers.py")
    script = [{"toolCalls": [{"name": "mcp__files__echo", "arguments": {"text": "via acp"}}]}, {"text": "done"}]
    editor = Editor()
    async with running(home, editor, "--faux-script", home.faux_script(script), "--approval-mode", "yolo") as conn:
        server = McpServerStdio(name="files", command=sys.executable, args=[os.path.abspath(servers_py), "good"],
                                env=[EnvVariable(name="X_ACP", value="1")])
        new = await conn.new_session(cwd=home.cwd, mcp_servers=[server])
        await editor.wait_for(lambda: editor.of("agent_message_chunk", new.session_id))
        await asyncio.wait_for(conn.prompt(session_id=new.session_id, prompt=prompt_text("echo")), HANG)
    assert new.field_meta == {"pisces": {"mcpServers": "started", "ignored": []}}
    assert "Starting MCP servers" in editor.text() and "files" in editor.text()
    assert "echo: via acp" in json.dumps([m for _, m in editor.wire])


async def test_no_notification_reaches_the_client_before_the_session_new_response(home):
    from acp.schema import McpServerStdio

    editor = Editor()
    async with running(home, editor, "--provider", "faux") as conn:
        server = McpServerStdio(name="m", command="/bin/true", args=[], env=[])
        for _ in range(3):
            new = await conn.new_session(cwd=home.cwd, mcp_servers=[server])
            await editor.wait_for(lambda: len(editor.of("available_commands_update", new.session_id)) == 1)
    for sid in {s for s, _ in editor.updates}:
        answered = next(i for i, (d, m) in enumerate(editor.wire)
                        if d == "in" and isinstance(m.get("result"), dict) and m["result"].get("sessionId") == sid)
        first = next(i for i, (d, m) in enumerate(editor.wire)
                     if d == "in" and m.get("method") == "session/update" and m["params"]["sessionId"] == sid)
        assert answered < first


def _response_index(editor: Editor, method: str) -> int:
    ids = {m["id"] for d, m in editor.wire if d == "out" and m.get("method") == method}
    return max(i for i, (d, m) in enumerate(editor.wire) if d == "in" and m.get("id") in ids and "method" not in m) + 1


async def test_prompts_with_an_image_a_link_an_embedded_file_and_meta_are_accepted(home):
    from acp import image_block, resource_block, resource_link_block, text_block
    from acp.helpers import embedded_text_resource

    script = home.faux_script([{"text": "Seen."}, {"text": "Seen again."}])
    png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
    editor = Editor()
    async with running(home, editor, "--faux-script", script) as conn:
        sid = (await conn.new_session(cwd=home.cwd, mcp_servers=[])).session_id
        first = await asyncio.wait_for(conn.prompt(session_id=sid, prompt=[
            text_block("What is in "), resource_link_block("app.py", f"file://{home.cwd}/app.py"),
            image_block(png, "image/png"),
            resource_block(embedded_text_resource(f"file://{home.cwd}/app.py", "x = 1"))]), HANG)
        second = await asyncio.wait_for(conn.prompt(session_id=sid, prompt=prompt_text("and now?"),
                                                    traceparent="00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"),
                                        HANG)
    assert first.stop_reason == "end_turn" and second.stop_reason == "end_turn"
    (path,) = home.session_files()
    user = [json.loads(line)["message"] for line in open(path) if '"role":"user"' in line][0]
    assert user["content"][0]["text"].startswith(f"What is in [app.py](file://{home.cwd}/app.py)")
    assert '<context ref="file://' in user["content"][0]["text"] and user["content"][1]["type"] == "image"
