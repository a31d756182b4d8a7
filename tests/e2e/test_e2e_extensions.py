"""Extensions through the real ``pisces --mode rpc`` process: the extension UI sub-protocol (pi's rpc-demo flow,
the new_session confirm that must not deadlock the input loop), timeouts, cancel, unknown ids, error isolation,
stdout protection, reload, shutdown, flags and trust."""

from __future__ import annotations

import os
import textwrap

from e2eproc import HERE

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(HERE)), "examples", "extensions")
RPC_DEMO = os.path.join(EXAMPLES, "rpc_demo.py")


def write_ext(home, name, body, where=None):
    directory = where or os.path.join(home.root, "ext")
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, name)
    with open(path, "w", encoding="utf-8") as f:
        f.write(textwrap.dedent(body))
    return path


def ui_request(p, method, timeout=15.0):
    return p.until(lambda f: f.get("type") == "extension_ui_request" and f.get("method") == method, timeout)[-1]


def answer(p, request, **fields):
    p.send({"type": "extension_ui_response", "id": request["id"], **fields})


def ui_frames(frames, method=None):
    return [f for f in frames if f.get("type") == "extension_ui_request" and (method is None or f["method"] == method)]


def test_rpc_demo_flow_and_the_new_session_confirm_does_not_deadlock(home, spawn):
    script = home.faux_script([{"toolCalls": [{"name": "bash", "arguments": {"command": "rm -rf /tmp/x"}}]},
                               {"text": "The command was blocked."}])
    p = spawn("--faux-script", script, "-e", RPC_DEMO)
    start = p.until(lambda f: f.get("method") == "setStatus")
    assert [(f["method"], f.get("title")) for f in ui_frames(start)][:1] == [("setTitle", "pi RPC Demo")]
    cmds = p.ok({"type": "get_commands"})["commands"]
    assert [c["name"] for c in cmds] == ["rpc-input", "rpc-editor", "rpc-prefill"]
    assert cmds[0]["sourceInfo"] == {"path": RPC_DEMO, "source": "cli", "scope": "temporary", "origin": "top-level"}

    # a command's dialog: the prompt response waits for the handler, which waits for the client
    p.send({"id": "in", "type": "prompt", "message": "/rpc-input"})
    req = ui_request(p, "input")
    assert (req["title"], req["placeholder"]) == ("Enter a value", "type something...")
    answer(p, req, value="hello from client")
    got = p.until(lambda f: f.get("id") == "in")
    assert [f["message"] for f in ui_frames(got, "notify")] == ["You entered: hello from client"]
    assert got[-1] == {"id": "in", "type": "response", "command": "prompt", "success": True}

    p.send({"id": "ed", "type": "prompt", "message": "/rpc-editor"})
    req = ui_request(p, "editor")
    assert req["prefill"] == "Line 1\nLine 2\nLine 3" and "timeout" not in req
    answer(p, req, cancelled=True)
    got = p.until(lambda f: f.get("id") == "ed")
    assert [f["message"] for f in ui_frames(got, "notify")] == ["Editor cancelled"]

    steer = p.request({"id": "st", "type": "steer", "message": "/rpc-input"})
    assert steer["error"] == ('Extension command "/rpc-input" cannot be queued. Use prompt() or execute the command '
                              "when not streaming.")

    # tool_call gate: select -> Block
    p.send({"id": "run", "type": "prompt", "message": "delete the temp dir"})
    req = ui_request(p, "select")
    assert req["options"] == ["Allow", "Block"] and req["title"] == "Dangerous command: rm -rf /tmp/x"
    answer(p, req, value="Block")
    got = p.until(lambda f: f.get("type") == "agent_settled", 30)
    end = [f for f in got if f.get("type") == "tool_execution_end"][0]
    assert end["isError"] is True and end["result"] == {"content": [{"type": "text", "text": "Blocked by user"}],
                                                        "details": {}}
    statuses = [f["statusText"] for f in p.frames if f.get("method") == "setStatus"]
    assert statuses[-4:] == ["Turn 1 running...", "Turn 1 done", "Turn 2 running...", "Turn 2 done"]

    # session_before_switch -> confirm while new_session runs: the reader must still route the answer
    p.send({"id": "n1", "type": "new_session"})
    answer(p, ui_request(p, "confirm"), confirmed=False)
    assert p.until(lambda f: f.get("id") == "n1")[-1]["data"] == {"cancelled": True}
    p.send({"id": "n2", "type": "new_session"})
    answer(p, ui_request(p, "confirm"), confirmed=True)
    got = p.until(lambda f: f.get("id") == "n2")
    assert got[-1]["data"] == {"cancelled": False}
    titles = [f["title"] for f in ui_frames(got, "setTitle")]
    assert titles == ["pi RPC Demo (new session)"] * 2  # pi's RPC mode runs session_start twice here
    assert [f["statusText"] for f in ui_frames(got, "setStatus")] == ["Turns: 0", "Turns: 0"]  # a fresh instance
    assert p.ok({"type": "get_state"})["messageCount"] == 0


def test_dialog_timeout_cancel_frame_and_ignored_answers(home, spawn):
    ext = write_ext(home, "asker.py", """
        def register(pi):
            @pi.command("ask")
            async def ask(args, ctx):
                ok = await ctx.ui.confirm("Proceed?", "really", timeout_ms=int(args or 300))
                ctx.ui.notify(f"answer: {ok}")
        """)
    p = spawn("--faux-script", home.faux_script([]), "-e", ext)
    p.send({"id": "a1", "type": "prompt", "message": "/ask 300"})
    got = p.until(lambda f: f.get("id") == "a1", 30)
    req, cancel = ui_frames(got, "confirm")[0], ui_frames(got, "cancel")[0]
    assert req["timeout"] == 300 and cancel["targetId"] == req["id"]
    assert ui_frames(got, "notify")[0]["message"] == "answer: False"
    answer(p, req, confirmed=True)  # too late: ignored, nothing written
    p.send({"type": "extension_ui_response", "id": "never-asked", "value": "x"})
    assert p.request({"id": "s", "type": "get_state"})["id"] == "s"
    assert p.last_events == []

    p.send({"id": "a2", "type": "prompt", "message": "/ask 60000"})
    req = ui_request(p, "confirm")
    answer(p, req, confirmed=True)
    answer(p, req, confirmed=False)  # the first answer won
    got = p.until(lambda f: f.get("id") == "a2")
    assert ui_frames(got, "notify")[0]["message"] == "answer: True" and ui_frames(got, "cancel") == []


def test_abort_ends_a_gate_dialog_and_the_run(home, spawn):
    script = home.faux_script([{"toolCalls": [{"name": "bash", "arguments": {"command": "sudo rm -rf /"}}]},
                               {"text": "ok"}])
    p = spawn("--faux-script", script, "-e", os.path.join(EXAMPLES, "permission_gate.py"))
    p.send({"id": "go", "type": "prompt", "message": "clean up"})
    req = ui_request(p, "select")
    assert req["timeout"] == 120000
    p.send({"id": "ab", "type": "abort"})
    got = p.until(lambda f: f.get("id") == "ab", 30)
    cancel = ui_frames(got, "cancel")
    assert [c["targetId"] for c in cancel] == [req["id"]]
    end = [f for f in got if f.get("type") == "tool_execution_end"][0]
    assert end["isError"] and end["result"]["content"][0]["text"] == "Blocked: no answer"


def test_extension_output_never_reaches_the_protocol_stream(home, spawn):
    ext = write_ext(home, "noisy.py", """
        import os, subprocess, sys

        def register(pi):
            print("print at load")

            @pi.on("session_start")
            def noisy(event, ctx):
                print("print in a handler")
                sys.stdout.write("\\x1b]777;notify;osc;bytes\\x07\\n")
                os.write(1, b"raw fd 1 write\\n")
                subprocess.run(["echo", "child process output"])
                ctx.ui.notify("still fine")
        """)
    p = spawn("--faux-script", home.faux_script([]), "-e", ext)
    assert ui_request(p, "notify")["message"] == "still fine"
    p.ok({"type": "get_state"})
    p.close()
    for line in p.raw_lines:  # every stdout line is a JSON object
        assert line.startswith(b"{") and line.endswith(b"}"), line
    for text in ("print at load", "print in a handler", "raw fd 1 write", "child process output", "osc"):
        p.wait_stderr(text)


def test_failures_are_isolated_and_reported(home, spawn):
    broken = write_ext(home, "broken.py", "def register(pi)\n")
    raising = write_ext(home, "raising.py", """
        def register(pi):
            @pi.on("turn_start")
            def boom(event):
                raise RuntimeError("turn handler broke")
        """)
    p = spawn("--faux-script", home.faux_script([{"text": "answered anyway"}]), "-e", broken, "-e", raising)
    load_error = p.until_type("extension_error")[-1]
    assert load_error["event"] == "load" and load_error["extensionPath"] == broken
    assert load_error["error"].startswith("SyntaxError")
    p.send({"id": "go", "type": "prompt", "message": "hi"})
    got = p.until_type("agent_settled", 30)
    err = [f for f in got if f.get("type") == "extension_error"]
    assert [(e["extensionPath"], e["event"], e["error"]) for e in err] == [(raising, "turn_start",
                                                                           "turn handler broke")]
    assert p.ok({"type": "get_last_assistant_text"}) == {"text": "answered anyway"}
    p.wait_stderr(f'Failed to load extension "{broken}"')


def test_reload_resources_reloads_extensions_and_reports_commands(home, spawn):
    first = write_ext(home, "first.py", """
        def register(pi):
            pi.register_command("one", handler=lambda args: None)
            pi.on("session_shutdown", lambda e, ctx: ctx.ui.notify(f"shutdown {e.reason}"))
            pi.on("session_start", lambda e, ctx: ctx.ui.notify(f"start {e.reason}"))
        """, where=os.path.join(home.agent_dir, "extensions"))
    p = spawn("--faux-script", home.faux_script([]))
    assert ui_request(p, "notify")["message"] == "start startup"
    write_ext(home, "second.py", "def register(pi):\n    pi.register_command('two', handler=lambda a: None)\n",
              where=os.path.dirname(first))
    r = p.request({"id": "rl", "type": "reload_resources"})
    names = [c["name"] for c in r["data"]["commands"] if c["source"] == "extension"]
    assert names == ["one", "two"]
    notes = [f["message"] for f in ui_frames(p.last_events, "notify")]
    assert notes == ["shutdown reload", "start reload"]
    changed = [f for f in p.last_events if f.get("type") == "session_changed"]
    assert changed[-1]["reason"] == "reload"


def test_ctx_shutdown_exits_after_the_response(home, spawn):
    ext = write_ext(home, "quit.py", """
        def register(pi):
            pi.register_command("quit", handler=lambda args, ctx: ctx.shutdown())
            pi.on("session_shutdown", lambda e: print(f"shutdown: {e.reason}", file=__import__("sys").stderr))
        """)
    p = spawn("--faux-script", home.faux_script([]), "-e", ext)
    assert p.request({"id": "q", "type": "prompt", "message": "/quit"})["success"] is True
    assert p.wait(timeout=15) == 0
    p.wait_stderr("shutdown: quit")


def test_extension_flags_on_the_command_line(home, spawn):
    ext = write_ext(home, "flags.py", """
        def register(pi):
            pi.register_flag("plan", description="plan mode")
            pi.register_flag("who", type="string", default="nobody")
            pi.on("session_start", lambda e, ctx: ctx.ui.notify(f"plan={pi.get_flag('plan')} who={pi.get_flag('who')}"))
        """)
    p = spawn("--faux-script", home.faux_script([]), "-e", ext, "--plan", "--who=me")
    assert ui_request(p, "notify")["message"] == "plan=True who=me"
    q = spawn("--faux-script", home.faux_script([]), "-e", ext, "--nope", ready=False)
    assert q.wait(timeout=15) == 2
    q.wait_stderr("unrecognized arguments: --nope")


def test_project_extensions_load_only_when_trusted(home, spawn):
    write_ext(home, "proj.py", "def register(pi):\n    pi.register_command('proj', handler=lambda a: None)\n",
              where=os.path.join(home.cwd, ".pisces", "extensions"))
    p = spawn("--faux-script", home.faux_script([]))
    assert [c["name"] for c in p.ok({"type": "get_commands"})["commands"]] == []
    p.close()
    p.wait_stderr("not trusted")
    from pisces.core.config.trust import trust_project

    trust_project(home.cwd, home.agent_dir)
    q = spawn("--faux-script", home.faux_script([]))
    assert [c["name"] for c in q.ok({"type": "get_commands"})["commands"]] == ["proj"]


def test_get_commands_lists_extensions_then_templates_then_skills(home, spawn):
    os.makedirs(os.path.join(home.agent_dir, "prompts"))
    with open(os.path.join(home.agent_dir, "prompts", "review.md"), "w") as f:
        f.write("Review $1\n")
    skill = os.path.join(home.agent_dir, "skills", "lint")
    os.makedirs(skill)
    with open(os.path.join(skill, "SKILL.md"), "w") as f:
        f.write("---\nname: lint\ndescription: Lints the code\n---\nRun the linter.\n")
    ext = write_ext(home, "cmd.py", "def register(pi):\n    pi.register_command('go', handler=lambda a: None)\n")
    p = spawn("--faux-script", home.faux_script([]), "-e", ext)
    cmds = p.ok({"type": "get_commands"})["commands"]
    assert [(c["name"], c["source"]) for c in cmds] == [("go", "extension"), ("review", "prompt"),
                                                        ("skill:lint", "skill")]


def test_print_mode_has_no_ui_and_dialogs_answer_defaults(home):
    import subprocess

    ext = write_ext(home, "printer.py", """
        import sys

        def register(pi):
            @pi.on("session_start")
            async def start(event, ctx):
                ok = await ctx.ui.confirm("Really?", "nobody can answer")
                print(f"has_ui={ctx.has_ui} confirm={ok}", file=sys.stderr)
        """)
    script = home.faux_script([{"text": "printed answer"}])
    from e2eproc import PISCES

    r = subprocess.run([*PISCES, "--faux-script", script, "-e", ext, "-p", "hello"], env=home.env(), cwd=home.cwd,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "printed answer\n"
    assert "has_ui=False confirm=False" in r.stderr



def test_before_provider_request_changes_the_payload_sent(home, spawn, server):
    from scripted_server import Reply

    home.scripted_provider(server.url + "/v1")
    chunk = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "scripted-model",
             "choices": [{"index": 0, "delta": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}]}
    server.push(Reply.sse([chunk], done=True))
    ext = write_ext(home, "payload.py", """
        def register(pi):
            @pi.on("before_provider_request")
            def first(event):
                return {**event.payload, "temperature": 0.25}

            @pi.on("before_provider_request")
            def second(event):
                event.payload["messages"][0]["content"] += "\\nEXTRA RULE"
        """)
    p = spawn("-e", ext)
    p.send({"id": "go", "type": "prompt", "message": "hello"})
    p.until_type("agent_settled", 30)
    body = server.requests[0].body
    assert body["temperature"] == 0.25
    assert body["messages"][0]["content"].endswith("\nEXTRA RULE")


def test_a_dialog_during_start_up_is_answered_while_commands_wait(home, spawn):
    ext = write_ext(home, "starter.py", """
        def register(pi):
            @pi.on("session_start")
            async def ask(event, ctx):
                ok = await ctx.ui.confirm("Set up?", "first run", timeout_ms=60000)
                ctx.ui.notify(f"set up: {ok}")
                pi.register_command("after-setup", handler=lambda args: None)
        """)
    p = spawn("--faux-script", home.faux_script([]), "-e", ext)
    p.send({"id": "early", "type": "get_commands"})  # sent before the dialog is answered: held
    req = ui_request(p, "confirm")
    answer(p, req, confirmed=True)
    got = p.until(lambda f: f.get("id") == "early")
    assert [f["message"] for f in ui_frames(got, "notify")] == ["set up: True"]  # the handler finished first
    assert [c["name"] for c in got[-1]["data"]["commands"]] == ["after-setup"]


def test_combination_rules_in_load_order_through_the_process(home, spawn):
    first = write_ext(home, "first.py", """
        def register(pi):
            pi.on("input", lambda e: {"action": "transform", "text": e.text + " [first]"})
            @pi.on("tool_call")
            def rewrite(event):
                event.input["command"] = "echo rewritten"
            pi.on("tool_result", lambda e: {"content": [{"type": "text", "text": "patched once"}]})
            pi.on("before_agent_start", lambda e: {"message": {"customType": "a", "content": "from first"},
                                                   "systemPrompt": e.systemPrompt + " FIRST"})
            pi.on("session_before_switch", lambda e, ctx: ctx.ui.notify("first asked"))
        """)
    second = write_ext(home, "second.py", """
        def register(pi):
            pi.on("input", lambda e: {"action": "transform", "text": e.text + " [second]"})
            pi.on("tool_call", lambda e, ctx: ctx.ui.notify("second saw " + e.input["command"]))
            pi.on("tool_result", lambda e: {"details": {"saw": e.content[0].text}})
            @pi.on("before_agent_start")
            def check(event, ctx):
                ctx.ui.notify("prompt ends with FIRST: " + str(ctx.get_system_prompt().endswith(" FIRST")))
                return {"message": {"customType": "b", "content": "from second"}}
            pi.on("session_before_switch", lambda e: {"cancel": True})
        """)
    third = write_ext(home, "third.py", """
        def register(pi):
            pi.on("session_before_switch", lambda e, ctx: ctx.ui.notify("third must not run"))
            pi.on("tool_call", lambda e: {"block": True, "reason": "third blocks"} if "blocked" in e.input["command"]
                  else None)
        """)
    script = home.faux_script([{"toolCalls": [{"name": "bash", "arguments": {"command": "echo original"}}]},
                               {"text": "done"}])
    p = spawn("--faux-script", script, "-e", first, "-e", second, "-e", third)
    p.send({"id": "go", "type": "prompt", "message": "hello"})
    got = p.until_type("agent_settled", 30)
    notes = [f["message"] for f in ui_frames(got, "notify")]
    assert notes == ["prompt ends with FIRST: True", "second saw echo rewritten"]
    end = [f for f in got if f.get("type") == "tool_execution_end"][0]
    assert end["result"] == {"content": [{"type": "text", "text": "patched once"}], "details": {"saw": "patched once"}}
    messages = p.ok({"type": "get_messages"})["messages"]
    assert [(m["role"], m.get("customType")) for m in messages[:3]] == [("user", None), ("custom", "a"),
                                                                         ("custom", "b")]
    assert messages[0]["content"][0]["text"] == "hello [first] [second]"
    r = p.request({"id": "ns", "type": "new_session"})
    assert r["data"] == {"cancelled": True}
    assert [f["message"] for f in ui_frames(p.last_events, "notify")] == ["first asked"]


def test_an_extension_command_runs_while_the_agent_streams(home, spawn):
    ext = write_ext(home, "cmd.py", """
        def register(pi):
            pi.register_command("ping", handler=lambda args, ctx: ctx.ui.notify(f"pong {args} idle={ctx.is_idle()}"))
        """)
    script = home.faux_script([{"text": "a slow reply " * 20, "delayMs": 40, "chunkSize": 4}])
    p = spawn("--faux-script", script, "-e", ext)
    p.send({"id": "run", "type": "prompt", "message": "talk"})
    p.until_type("message_update", 30)
    r = p.request({"id": "cmd", "type": "prompt", "message": "/ping now"})
    assert r["success"] is True
    assert [f["message"] for f in ui_frames(p.last_events, "notify")] == ["pong now idle=False"]
    assert not [f for f in p.last_events if f.get("type") == "agent_end"]  # the run was still going
    p.until_type("agent_settled", 60)
