"""The ExtensionAPI and contexts through a real session: commands, tools, messages, flags, reload, staleness."""

from __future__ import annotations

import pytest
from ext_helpers import make, texts

from pisces.agent.types import ToolExecutionEndEvent, ToolExecutionUpdateEvent
from pisces.core.errors import UsageError
from pisces.core.extensions.api import Extension, ExtensionAPI, Runtime
from pisces.core.extensions.binding import LoadResult, resolve_flags
from pisces.core.extensions.runner import ExtensionRunner
from pisces.core.session.build import create_agent_session
from pisces.core.store.messages import CustomMessage


async def test_commands_run_at_once_and_duplicates_get_numbered(tmp_path, faux):
    ran = []

    def one(pi):
        pi.register_command("review", {"description": "first", "handler": lambda args, ctx: ran.append(("1", args))})

    def two(pi):
        @pi.command("review", description="second")
        async def review(args):
            ran.append(("2", args))

    session, _ = await make(tmp_path, one, two)
    cmds = [c for c in session.commands() if c["source"] == "extension"]
    assert [(c["name"], c["description"]) for c in cmds] == [("review:1", "first"), ("review:2", "second")]
    await session.prompt("/review:2 the diff")
    await session.prompt("/review:1")
    assert ran == [("2", "the diff"), ("1", "")]
    assert faux.requests == []  # commands never reach the model


async def test_a_failing_command_is_reported_and_the_prompt_still_succeeds(tmp_path, faux):
    def ext(pi):
        pi.register_command("oops", handler=lambda args: 1 / 0)

    session, rec = await make(tmp_path, ext)
    accepted = []
    await session.prompt("/oops", on_accepted=lambda: accepted.append(True))
    assert accepted == [True]
    err = rec.of_type("extension_error")[0]
    assert (err["extensionPath"], err["event"], err["error"]) == ("command:oops", "command", "division by zero")


async def test_queued_messages_refuse_extension_commands(tmp_path, faux):
    session, _ = await make(tmp_path, lambda pi: pi.register_command("x", handler=lambda a: None))
    from pisces.core.errors import SessionError

    with pytest.raises(SessionError, match=r'Extension command "/x" cannot be queued'):
        session.steer("/x now")
    with pytest.raises(SessionError, match="cannot be queued"):
        session.follow_up("/x")


async def test_a_registered_tool_runs_with_updates_context_and_errors(tmp_path, faux):
    seen = {}

    def ext(pi):
        @pi.tool(description="Echo the text back", parameters={"type": "object", "properties": {
            "text": {"type": "string"}}, "required": ["text"]})
        async def echo(tool_call_id, params, signal, on_update, ctx):
            seen["cwd"] = ctx.cwd
            on_update({"content": [{"type": "text", "text": "working"}]})
            if params["text"] == "fail":
                raise ValueError("echo refused")
            return {"content": [{"type": "text", "text": params["text"]}], "details": {"n": 1}}

    session, rec = await make(tmp_path, ext)
    assert "echo" in [t.name for t in session.agent.tools]  # switched on when registered
    faux.enqueue({"toolCalls": [{"name": "echo", "arguments": {"text": "hi"}, "id": "a"},
                                {"name": "echo", "arguments": {"text": "fail"}, "id": "b"}]}, {"text": "done"})
    await session.prompt("go")
    ends = {e.toolCallId: e for e in rec.events if isinstance(e, ToolExecutionEndEvent)}
    assert texts(ends["a"].result) == "hi" and ends["a"].result.details == {"n": 1} and not ends["a"].isError
    assert texts(ends["b"].result) == "echo refused" and ends["b"].isError
    assert [texts(e.partialResult) for e in rec.events if isinstance(e, ToolExecutionUpdateEvent)] == ["working"] * 2
    assert seen["cwd"] == str(tmp_path / "work")


async def test_the_first_tool_of_a_name_wins_and_an_extension_tool_replaces_a_builtin(tmp_path, faux):
    def first(pi):
        pi.register_tool(name="read", description="first read", execute=lambda *a: "from first")

    def second(pi):
        pi.register_tool(name="read", description="second read", execute=lambda *a: "from second")

    session, _ = await make(tmp_path, first, second)
    assert session.all_tools["read"].description == "first read"
    info = {t["name"]: t["sourceInfo"] for t in session.hooks.runner.runtime.actions.get_all_tools()}
    assert info["read"]["source"] == "sdk" and info["bash"]["source"] == "builtin"


async def test_send_message_delivery_modes(tmp_path, faux):
    api = {}
    session, rec = await make(tmp_path, lambda pi: api.setdefault("pi", pi))
    pi = api["pi"]
    pi.send_message({"custom_type": "note", "content": "plain", "display": True})
    await _settle(session)
    assert [type(m).__name__ for m in session.messages] == ["CustomMessage"]
    assert [e.customType for e in session.store.get_entries() if type(e).__name__ == "CustomMessageEntry"] == ["note"]
    pi.send_message({"customType": "ctx", "content": "for the next turn", "display": False},
                    deliver_as="nextTurn")
    await _settle(session)
    faux.enqueue({"text": "a"}, {"text": "b"})
    await session.prompt("hello")
    assert [texts(m) for m in faux.requests[0].messages] == ["plain", "hello", "for the next turn"]
    pi.send_message({"customType": "kick", "content": "go on"}, trigger_turn=True)
    await _settle(session)
    assert len(faux.requests) == 2 and texts(faux.requests[1].messages[-1]) == "go on"
    assert isinstance(session.messages[-2], CustomMessage)


async def test_send_user_message_runs_a_prompt_and_refuses_while_streaming(tmp_path, faux):
    api = {}
    session, rec = await make(tmp_path, lambda pi: api.setdefault("pi", pi))
    faux.enqueue({"text": "answer"}, {"text": "a slow answer " * 8, "delayMs": 5, "chunkSize": 4},
                 {"text": "steered answer"})
    api["pi"].send_user_message("from the extension")
    await _settle(session)
    assert texts(faux.requests[0].messages[-1]) == "from the extension"
    assert session.last_assistant_text() == "answer"
    import asyncio

    run = asyncio.ensure_future(session.prompt("slow one"))
    while not session.is_streaming:
        await asyncio.sleep(0.001)
    api["pi"].send_user_message("too early")  # streaming, and no deliver_as: refused, as in pi
    api["pi"].send_user_message("steer this", deliver_as="steer")
    await run
    await _settle(session)
    err = rec.of_type("extension_error")
    assert [(e["extensionPath"], e["event"]) for e in err] == [("<runtime>", "send_user_message")]
    assert err[0]["error"].startswith("Agent is already processing")
    assert texts(faux.requests[-1].messages[-1]) == "steer this"


async def test_ctx_goes_stale_after_reload_and_extensions_load_again(tmp_path, faux):
    kept = {}
    loads = []

    def ext(pi):
        loads.append(pi)
        pi.register_command("keep", handler=lambda args, ctx: kept.setdefault("ctx", ctx))
        pi.on("session_shutdown", lambda e: kept.setdefault("shutdown", e.reason))
        pi.on("session_start", lambda e: kept.setdefault("starts", []).append(e.reason))

    session, rec = await make(tmp_path, ext)
    await session.prompt("/keep")
    await session.reload_resources()
    assert len(loads) == 2 and kept["shutdown"] == "reload" and kept["starts"] == ["startup", "reload"]
    with pytest.raises(RuntimeError, match="stale"):
        kept["ctx"].cwd
    with pytest.raises(RuntimeError, match="stale"):
        loads[0].send_message({"customType": "x", "content": "y"})
    assert rec.of_type("session_changed")[-1]["reason"] == "reload"


async def test_new_session_rebuilds_the_runtime(tmp_path, faux):
    events = []

    def ext(pi):
        counter = {"n": 0}
        pi.on("session_shutdown", lambda e: events.append(("shutdown", e.reason)))
        pi.on("session_start", lambda e: (counter.__setitem__("n", counter["n"] + 1),
                                          events.append(("start", e.reason, counter["n"]))))

    session, _ = await make(tmp_path, ext)
    assert await session.new_session() is False
    assert events == [("start", "startup", 1), ("shutdown", "new"), ("start", "new", 1)]


def test_cli_flags_of_extensions():
    ext = Extension("x", {})
    api = ExtensionAPI(ext, Runtime("."))
    api.register_flag("plan", description="plan mode")
    api.register_flag("name", {"type": "string", "default": "anon"})
    loaded = LoadResult(ExtensionRunner([ext], api._rt), [])
    resolve_flags(loaded, ["--plan", "--name=bob"])
    assert api.get_flag("plan") is True and api.get_flag("--name") == "bob"
    with pytest.raises(UsageError, match="unrecognized arguments: --nope --plan=1"):
        resolve_flags(loaded, ["--nope", "--plan=1"])


def test_unknown_flags_without_extensions_are_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match="unrecognized arguments: --plan"):
        create_agent_session(cwd=str(tmp_path), provider="faux", no_session=True, extension_flags=["--plan"])


def test_an_inline_extension_with_the_sync_sdk(tmp_path, faux):
    got = []
    session = create_agent_session(cwd=str(tmp_path), provider="faux", no_session=True,
                                   extensions=[lambda pi: pi.register_command("hi", handler=lambda a: got.append(a))])
    assert [c["name"] for c in session.commands() if c["source"] == "extension"] == ["hi"]
    assert session.commands()[0]["sourceInfo"]["source"] == "sdk"


async def _settle(session):
    import asyncio

    for _ in range(50):
        await asyncio.sleep(0)
        tasks = list(session.hooks._tasks)
        if tasks:
            await asyncio.wait(tasks, timeout=30)
    await session.agent.wait_for_idle()
