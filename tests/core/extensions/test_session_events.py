"""Session-level events and actions: compaction hooks, user_bash, tree navigation, model selection, exec, the
event bus, command contexts, and seed 003's hooks/ and tools/ directories."""

from __future__ import annotations

import asyncio
import json
import os

import pytest
from ext_helpers import make

from pisces.agent.types import ToolExecutionEndEvent
from pisces.ai.abort import AbortSignal
from pisces.ai.types import UserMessage
from pisces.core.errors import SessionError
from pisces.core.session.build import create_agent_session_async


def _keep_little(tmp_path):
    (tmp_path / "work" / ".pisces").mkdir(parents=True, exist_ok=True)
    (tmp_path / "work" / ".pisces" / "settings.json").write_text(json.dumps({"compaction": {"keepRecentTokens": 5}}))


async def test_session_before_compact_can_cancel_or_supply_the_summary(tmp_path, faux):
    _keep_little(tmp_path)
    mode = {"v": "cancel"}
    seen = []

    def ext(pi):
        @pi.on("session_before_compact")
        def before(event):
            seen.append((event.preparation["tokensBefore"] > 0, event.custom_instructions))
            if mode["v"] == "cancel":
                return {"cancel": True}
            return {"compaction": {"summary": "summary by the extension"}}

        pi.on("session_compact", lambda e: seen.append(("compacted", e.from_extension, e.compactionEntry.summary)))

    session, _ = await make(tmp_path, ext)
    faux.enqueue({"text": "answer one"}, {"text": "answer two"})
    await session.prompt("first prompt")
    await session.prompt("second prompt")
    with pytest.raises(SessionError, match="Compaction cancelled"):
        await session.compact("focus")
    mode["v"] = "supply"
    data = await session.compact()
    assert data["summary"] == "summary by the extension"
    assert seen == [(True, "focus"), (True, None), ("compacted", True, "summary by the extension")]
    assert len(faux.requests) == 2  # no summarisation request: the extension's summary was used


async def test_user_bash_result_replaces_the_command(tmp_path, faux):
    def ext(pi):
        pi.on("user_bash", lambda e: {"result": {"output": f"remote: {e.command}", "exitCode": 0}}
              if e.command.startswith("remote ") else None)

    session, _ = await make(tmp_path, ext)
    marker = tmp_path / "work" / "ran"
    data = await session.run_bash(f"remote touch {marker}")
    assert data == {"output": f"remote: remote touch {marker}", "exitCode": 0, "cancelled": False,
                    "truncated": False}
    assert not marker.exists()
    assert (await session.run_bash("echo local"))["output"] == "local\n"
    assert [m.output for m in session.messages] == [f"remote: remote touch {marker}", "local\n"]


async def test_session_before_tree_cancels_and_session_tree_follows(tmp_path, faux):
    state = {"cancel": True}
    trees = []

    def ext(pi):
        pi.on("session_before_tree", lambda e: {"cancel": True} if state["cancel"] else None)
        pi.on("session_tree", lambda e: trees.append((e.old_leaf_id, e.new_leaf_id)))

    session, _ = await make(tmp_path, ext)
    faux.enqueue({"text": "a"}, {"text": "b"})
    await session.prompt("one")
    await session.prompt("two")
    first_user = next(e for e in session.store.get_entries() if isinstance(getattr(e, "message", None), UserMessage))
    leaf = session.store.get_leaf_id()
    assert (await session.navigate_tree(first_user.id))["cancelled"] is True
    assert session.store.get_leaf_id() == leaf
    state["cancel"] = False
    assert (await session.navigate_tree(first_user.id))["cancelled"] is False
    assert trees == [(leaf, session.store.get_leaf_id())]


async def test_model_and_thinking_level_select_events(tmp_path, faux):
    seen = []

    def ext(pi):
        pi.on("model_select", lambda e: seen.append(("model", e.model.id, e.previous_model.id, e.source)))
        pi.on("thinking_level_select", lambda e: seen.append(("level", e.level, e.previousLevel)))

    session, _ = await make(tmp_path, ext)
    session.set_model_by_id("faux", "faux")
    session.set_thinking_level("high")  # faux does not reason: clamped to off, unchanged, no event
    for _ in range(5):
        await asyncio.sleep(0)
    assert seen == [("model", "faux", "faux", "set")]


async def test_exec_event_bus_and_context_helpers(tmp_path, faux):
    got = {}

    def a(pi):
        pi.events.on("ping", lambda data: got.setdefault("bus", data))

        @pi.command("probe")
        async def probe(args, ctx):
            got["exec"] = await pi.exec("sh", ["-c", "echo out; echo err >&2; exit 3"])
            signal = AbortSignal()
            asyncio.get_running_loop().call_later(0.05, signal.abort)
            got["killed"] = await pi.exec("sleep", ["30"], signal=signal)
            got["timeout"] = await pi.exec("sleep", ["30"], timeout=50)
            got["missing"] = await pi.exec("no-such-program-here", [])
            got["idle"] = ctx.is_idle()
            got["usage"] = ctx.get_context_usage()
            got["prompt"] = ctx.get_system_prompt()
            got["view"] = (ctx.session.get_session_file(), ctx.session.get_leaf_id() is None)
            pi.events.emit("ping", {"n": 1})

    session, _ = await make(tmp_path, a)
    await session.prompt("/probe")
    r = got["exec"]
    assert (r.stdout, r.stderr, r.code, r.killed) == ("out\n", "err\n", 3, False) and r["code"] == 3
    assert got["killed"].killed is True and got["timeout"].killed is True
    assert got["missing"].code == 127
    assert got["bus"] == {"n": 1} and got["idle"] is True
    assert got["usage"]["contextWindow"] > 0 and got["prompt"].startswith("You are pisces")
    assert got["view"] == (None, False)


async def test_command_context_new_session_with_setup_and_with_session(tmp_path, faux):
    got = []

    def ext(pi):
        @pi.command("fresh")
        async def fresh(args, ctx):
            result = await ctx.new_session(setup=lambda store: got.append(("setup", store.get_session_id())),
                                           with_session=lambda new: got.append(("with", new.session.get_session_id())))
            got.append(result)
            try:
                ctx.cwd
            except RuntimeError as exc:
                got.append("stale" in str(exc))

    session, _ = await make(tmp_path, ext)
    await session.prompt("/fresh")
    sid = session.store.get_session_id()
    assert got == [("setup", sid), ("with", sid), {"cancelled": False}, True]


async def test_seed_003_hooks_and_custom_tools_directories(tmp_path, faux, monkeypatch):
    agent = tmp_path / "agent"
    monkeypatch.setenv("PISCES_CODING_AGENT_DIR", str(agent))
    (agent / "hooks").mkdir(parents=True)
    (agent / "hooks" / "guard.py").write_text(
        "def register(pi):\n"
        "    def boom(event):\n"
        "        raise RuntimeError('hook broke')\n"
        "    pi.on('turn_start', boom)\n")
    (agent / "tools" / "greet").mkdir(parents=True)
    (agent / "tools" / "greet" / "__init__.py").write_text(
        "SESSIONS = []\n"
        "def register(pi):\n"
        "    async def execute(tool_call_id, params, on_update, ctx, signal):\n"
        "        on_update({'content': [{'type': 'text', 'text': 'thinking'}]})\n"
        "        return {'content': [{'type': 'text', 'text': 'hello ' + params['name']}]}\n"
        "    return {'name': 'greet', 'description': 'Greets', 'execute': execute,\n"
        "            'parameters': {'type': 'object', 'properties': {'name': {'type': 'string'}}},\n"
        "            'on_session': lambda e, ctx: SESSIONS.append(e['reason'])}\n")
    cwd = tmp_path / "work"
    cwd.mkdir()
    session = await create_agent_session_async(cwd=str(cwd), provider="faux", no_session=True)
    events = []
    session.subscribe(events.append)
    await session.hooks.start()
    faux.enqueue({"toolCalls": [{"name": "greet", "arguments": {"name": "Ada"}}]}, {"text": "done"})
    await session.prompt("greet Ada")
    end = [e for e in events if isinstance(e, ToolExecutionEndEvent)][0]
    assert end.result.content[0].text == "hello Ada"
    hook_errors = [e for e in events if isinstance(e, dict) and e.get("type") == "hook_error"]
    assert hook_errors and hook_errors[0] == {"type": "hook_error", "hookPath": str(agent / "hooks" / "guard.py"),
                                              "event": "turn_start", "error": "hook broke"}
    ext_errors = [e for e in events if isinstance(e, dict) and e.get("type") == "extension_error"]
    assert ext_errors[0]["hookPath"] == ext_errors[0]["extensionPath"]
    import sys

    module = [m for n, m in sys.modules.items() if n.startswith("pisces_ext_") and hasattr(m, "SESSIONS")][-1]
    assert module.SESSIONS == ["start"]
    assert os.path.basename(session.hooks.runner.extensions[1].path) == "greet"
