"""RpcClient / SyncRpcClient.

Two kinds of agent: small fake agents (Python scripts written to tmp_path, each acting out one behaviour:
dying mid-call, sending no ready, huge lines, pi's id-less errors, pi's missing agent_settled, ...) and the
REAL ``pisces --mode rpc`` with the faux model (tests named ``test_real_*``). Every test is bounded by a
timeout and stops its process.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import textwrap
import time

import pytest

from pisces.client.client import (
    RpcClient,
    RpcClientError,
    RpcCommandError,
    RpcProcessExited,
    RpcTimeoutError,
)
from pisces.client.sync import SyncRpcClient

TEST_TIMEOUT = 30.0

FAKE_AGENT = textwrap.dedent(r'''
    import json, os, subprocess, sys, time
    mode = sys.argv[1]
    out = sys.stdout

    def send(obj):
        out.write(json.dumps(obj, ensure_ascii=False) + "\n")
        out.flush()

    def respond(cmd, data=None, error=None, with_id=True):
        frame = {"type": "response", "command": cmd.get("type")}
        if with_id and "id" in cmd:
            frame = {"id": cmd["id"], **frame}
        if error is not None:
            frame.update(success=False, error=error)
        else:
            frame["success"] = True
            if data is not None:
                frame["data"] = data
        send(frame)

    if mode == "exit_early":
        sys.stderr.write("fatal: no model configured\n")
        sys.exit(2)
    if mode == "grandchild":  # a child that keeps our stdout and stderr open after we exit
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
        with open(sys.argv[2], "w") as f:
            f.write(str(child.pid))
    if mode not in ("noready", "silent"):
        send({"type": "ready"})
    for line in sys.stdin:
        cmd = json.loads(line)
        t = cmd.get("type")
        if mode == "silent":
            continue
        if mode in ("die", "grandchild"):
            sys.stderr.write("boom: something broke\n" if mode == "grandchild" else "boom")
            sys.stderr.flush()
            sys.exit(3)
        if t == "get_state":
            respond(cmd, {"isStreaming": False, "isCompacting": False, "mode": mode})
        elif t == "echo" or mode == "echo":
            respond(cmd, {"received": cmd})
        elif t == "extension_ui_response":
            send({"type": "ui_answer_seen", "frame": cmd})
        elif t == "huge":
            text = "x" * (12 * 1024 * 1024) + "\u2028end\u2029"
            out.write(json.dumps({"type": "huge_event", "text": text}, ensure_ascii=False) + "\r\n")
            out.flush()
            respond(cmd, {"length": len(text)})
        elif t == "split":  # one frame written in many small pieces, then two frames in one write
            data = json.dumps({"type": "split_event", "n": 1}) + "\n"
            for ch in data:
                out.write(ch); out.flush(); time.sleep(0.001)
            out.write("not json at all\n" + json.dumps({"type": "split_event", "n": 2}) + "\n"); out.flush()
            respond(cmd)
        elif t == "no_such_command":
            respond(cmd, error="Unknown command: no_such_command", with_id=False)
        elif t == "slow":
            time.sleep(float(cmd.get("seconds", 1)))
            respond(cmd)
        elif t == "prompt":  # pi: no agent_settled; a failed run is retried after agent_end
            respond(cmd)
            send({"type": "agent_start"})
            send({"type": "agent_end", "messages": [], "run": 1})
            time.sleep(0.05)
            send({"type": "auto_retry_start", "attempt": 1, "maxAttempts": 3, "delayMs": 200,
                  "errorMessage": "overloaded"})
            time.sleep(0.5)
            send({"type": "agent_start"})
            send({"type": "message_end",
                  "message": {"role": "assistant", "content": [{"type": "text", "text": "retried"}]}})
            send({"type": "auto_retry_end", "success": True, "attempt": 1})
            send({"type": "agent_end", "messages": [], "run": 2})
        elif t == "garbled":  # a response the client cannot decode: broken JSON, or nested past any limit
            kind = cmd.get("kind")
            if kind == "idless":  # pi's id-less error response
                head = '{"type": "response", "command": "garbled", "success": false, "error": '
            else:
                head = '{"id": %s, "type": "response", "command": "garbled", "success": true, "data": ' % (
                    json.dumps(cmd["id"]))
            body = "[" * 100000 + "]" * 100000 if kind == "deep" else '"unterminated'
            out.write(head + body + "}\n")
            out.flush()
        else:
            respond(cmd, error=f"Unknown command: {t}")
''')


@pytest.fixture
def fake(tmp_path):
    script = tmp_path / "fake_agent.py"
    script.write_text(FAKE_AGENT)

    def command(mode: str, *extra: str) -> list[str]:
        return [sys.executable, str(script), mode, *extra]

    return command


@pytest.fixture
def faux_args(tmp_path):
    def make(*responses: dict, extra: tuple[str, ...] = ()) -> list[str]:
        path = tmp_path / "faux_script.json"
        path.write_text(json.dumps(list(responses)))
        return ["--no-session", "--faux-script", str(path), *extra]

    return make


def bounded(coro, timeout: float = TEST_TIMEOUT):
    return asyncio.wait_for(coro, timeout)


# -- fake agents: lifecycle ----------------------------------------------------------------------
async def test_start_waits_for_ready_then_answers_and_stops(fake):
    async def body():
        client = RpcClient(fake("plain"), request_timeout=5)
        await client.start()
        try:
            assert client.ready_received and client.is_running
            assert await client.get_state() == {"isStreaming": False, "isCompacting": False, "mode": "plain"}
            echo = await client.request("echo", value=[1, "é"])
            assert echo["received"]["id"].startswith("req-") and echo["received"]["value"] == [1, "é"]
        finally:
            code = await client.stop()
        assert code == 0 and not client.is_running
        with pytest.raises(RpcProcessExited):
            await client.get_state()

    await bounded(body())


async def test_agent_without_ready_is_probed_with_get_state(fake):
    async def body():
        started = time.monotonic()
        async with RpcClient(fake("noready"), ready_timeout=0.3, request_timeout=5) as client:
            assert not client.ready_received
            assert (await client.get_state())["mode"] == "noready"
        assert time.monotonic() - started < 5

    await bounded(body())


async def test_agent_that_never_answers_fails_start_and_is_killed(fake):
    async def body():
        client = RpcClient(fake("silent"), ready_timeout=0.2, probe_timeout=0.5)
        with pytest.raises(RpcClientError, match="no ready frame"):
            await client.start()
        assert client.returncode is not None  # killed, not left behind

    await bounded(body())


async def test_process_exiting_before_ready_fails_start_with_status_and_stderr(fake):
    async def body():
        client = RpcClient(fake("exit_early"), ready_timeout=10)
        started = time.monotonic()
        with pytest.raises(RpcProcessExited) as info:
            await client.start()
        assert time.monotonic() - started < 5
        assert info.value.returncode == 2
        assert "fatal: no model configured" in str(info.value) and "status 2" in str(info.value)

    await bounded(body())


async def test_missing_executable_is_a_client_error(tmp_path):
    with pytest.raises(RpcClientError, match="cannot start"):
        await RpcClient([str(tmp_path / "no-such-agent")]).start()


async def test_pending_call_fails_fast_when_the_process_dies(fake):
    async def body():
        client = RpcClient(fake("die"))  # no request timeout: only the exit can end the call
        await client.start()
        stream = client.events()
        try:
            started = time.monotonic()
            with pytest.raises(RpcProcessExited) as info:
                await client.get_state()
            assert time.monotonic() - started < 3
            assert info.value.returncode == 3
            assert "boom" in str(info.value) and "status 3" in str(info.value)
            assert "boom" in client.stderr_tail
            with pytest.raises(RpcProcessExited):  # later calls fail at once
                await client.get_session_stats()
            assert [ev async for ev in stream] == []  # event streams end
            with pytest.raises(RpcProcessExited):
                await client.prompt_and_wait("hi")
        finally:
            await client.stop()

    await bounded(body())


async def test_exit_is_noticed_even_when_a_grandchild_keeps_the_pipes_open(fake, tmp_path):
    pid_file = tmp_path / "grandchild.pid"

    async def body():
        client = RpcClient(fake("grandchild", str(pid_file)))
        await client.start()
        try:
            started = time.monotonic()
            with pytest.raises(RpcProcessExited) as info:
                await client.get_state()
            assert time.monotonic() - started < 3
            assert info.value.returncode == 3
        finally:
            await client.stop()

    try:
        await bounded(body())
    finally:
        if pid_file.exists():
            try:
                os.kill(int(pid_file.read_text()), signal.SIGKILL)
            except ProcessLookupError:
                pass


async def test_request_timeout_leaves_the_agent_usable(fake):
    async def body():
        async with RpcClient(fake("plain")) as client:
            with pytest.raises(RpcTimeoutError):
                await client.request("slow", seconds=1.0, timeout=0.2)
            assert (await client.get_state())["mode"] == "plain"  # the late response is dropped, not misrouted
            assert client.is_running

    await bounded(body())


# -- fake agents: framing and routing --------------------------------------------------------------
async def test_huge_line_with_u2028_and_crlf(fake):
    async def body():
        async with RpcClient(fake("plain"), request_timeout=20) as client:
            with client.events("huge_event") as stream:
                data = await client.request("huge")
                event = await stream.get(5)
            assert len(event["text"]) == data["length"] == 12 * 1024 * 1024 + 5
            assert event["text"].endswith("\u2028end\u2029")

    await bounded(body())


async def test_frames_split_across_writes_and_stray_lines(fake):
    async def body():
        async with RpcClient(fake("plain"), request_timeout=5) as client:
            with client.events("split_event") as stream:
                assert await client.request("split") is None
                assert [(await stream.get(2))["n"], (await stream.get(2))["n"]] == [1, 2]
            assert b"not json at all" in client.stray_lines

    await bounded(body())


async def test_error_response_raises_and_idless_error_is_matched_by_command(fake):
    async def body():
        async with RpcClient(fake("plain"), request_timeout=5) as client:
            with pytest.raises(RpcCommandError) as info:
                await client.request("bogus")
            assert info.value.command == "bogus" and info.value.error == "Unknown command: bogus"
            # pi drops the id of an unknown-command error: the call must still end
            with pytest.raises(RpcCommandError, match="no_such_command"):
                await client.request("no_such_command")
            response = await client.request_response("bogus")
            assert response["success"] is False and response["error"] == "Unknown command: bogus"

    await bounded(body())


async def test_typed_methods_send_pi_wire_fields(fake):
    async def body():
        async with RpcClient(fake("echo"), request_timeout=5) as client:
            async def sent(coro):
                frame = dict((await coro)["received"])
                frame.pop("id")
                return frame

            assert await sent(client.prompt("hi", streaming_behavior="steer")) == {
                "type": "prompt", "message": "hi", "streamingBehavior": "steer"}
            assert await sent(client.set_model("faux", "m1")) == {
                "type": "set_model", "provider": "faux", "modelId": "m1"}
            assert await sent(client.new_session()) == {"type": "new_session"}
            assert await sent(client.list_sessions("all", "/tmp/s")) == {
                "type": "list_sessions", "scope": "all", "sessionDir": "/tmp/s"}
            assert await sent(client.navigate_tree("e1", summarize=True, label="x")) == {
                "type": "navigate_tree", "targetId": "e1", "summarize": True, "label": "x"}
            assert await sent(client.set_entry_label("e1")) == {"type": "set_entry_label", "targetId": "e1"}
            assert await sent(client.set_active_tools(("read", "bash"))) == {
                "type": "set_active_tools", "toolNames": ["read", "bash"]}
            assert await sent(client.switch_session("/s.jsonl")) == {
                "type": "switch_session", "sessionPath": "/s.jsonl"}
            assert await sent(client.fork("u1")) == {"type": "fork", "entryId": "u1"}
            assert await sent(client.compact("short")) == {"type": "compact", "customInstructions": "short"}
            assert await sent(client.export_html("o.html")) == {"type": "export_html", "outputPath": "o.html"}
            assert await sent(client.set_auto_retry(False)) == {"type": "set_auto_retry", "enabled": False}

    await bounded(body())


async def test_extension_ui_response_expects_no_response(fake):
    async def body():
        async with RpcClient(fake("plain"), request_timeout=5) as client:
            with client.events("ui_answer_seen") as stream:
                await client.extension_ui_response("ui-1", confirmed=True)
                event = await stream.get(5)
            assert event["frame"] == {"type": "extension_ui_response", "id": "ui-1", "confirmed": True}

    await bounded(body())


async def test_callbacks_streams_and_raw_lines(fake):
    async def body():
        async with RpcClient(fake("plain"), request_timeout=5) as client:
            seen: list[str] = []
            unsubscribe = client.on_event(lambda ev: seen.append(ev["type"]))
            async_seen: list[str] = []

            async def async_callback(ev):
                async_seen.append(ev["type"])

            client.on_event(async_callback)
            with client.events() as everything:
                await client.send_raw('{"id":"mine","type":"get_state"}')  # not our id: comes back as an event
                response = await everything.get(5)
                assert response["type"] == "response" and response["id"] == "mine"
                await client.request("split")
                unsubscribe()
                await client.request("split")
                await asyncio.sleep(0.05)
            assert seen == ["response", "split_event", "split_event"]
            assert async_seen.count("split_event") == 4

    await bounded(body())


async def test_prompt_and_wait_without_agent_settled_waits_through_a_retry(fake):
    async def body():
        async with RpcClient(fake("plain"), request_timeout=5) as client:
            events = await client.prompt_and_wait("hi", timeout=10)
            types = [ev["type"] for ev in events]
            assert types == ["agent_start", "agent_end", "auto_retry_start", "agent_start", "message_end",
                             "auto_retry_end", "agent_end"]
            assert events[-1]["run"] == 2

    await bounded(body())


async def test_sync_client_with_fake_agent(fake):
    with SyncRpcClient(fake("die"), call_timeout=10) as client:
        started = time.monotonic()
        with pytest.raises(RpcProcessExited, match="boom"):
            client.get_state()
        assert time.monotonic() - started < 3
        assert client.returncode == 3
        assert list(client.iter_events(timeout=1)) == []
    with SyncRpcClient(fake("plain"), call_timeout=10) as client:
        assert client.get_state()["mode"] == "plain"
        with pytest.raises(RpcCommandError):
            client.request("bogus")
        with pytest.raises(RpcTimeoutError):
            next(client.iter_events(timeout=0.1))


# -- the real pisces --mode rpc with the faux model -------------------------------------------------
async def test_real_start_get_state_stop(faux_args, tmp_path):
    async def body():
        client = RpcClient(args=faux_args({"text": "unused"}), cwd=tmp_path, request_timeout=10)
        await client.start()
        try:
            assert client.ready_received
            state = await client.get_state()
            assert state["model"]["provider"] == "faux" and state["isStreaming"] is False
        finally:
            assert await client.stop() == 0

    await bounded(body())


async def test_real_prompt_and_wait_collects_the_run(faux_args, tmp_path):
    async def body():
        async with RpcClient(args=faux_args({"text": "hello from faux"}), cwd=tmp_path, request_timeout=10) as client:
            events = await client.prompt_and_wait("hi", timeout=20)
            types = [ev["type"] for ev in events]
            assert types[0] == "agent_start" and "agent_end" in types and types[-1] == "agent_settled"
            end = next(ev for ev in events if ev["type"] == "agent_end")
            assistant = end["messages"][-1]
            assert assistant["role"] == "assistant"
            assert assistant["content"][0]["text"] == "hello from faux"
            assert await client.get_last_assistant_text() == {"text": "hello from faux"}
            assert (await client.wait_for_idle(timeout=5))["isStreaming"] is False

    await bounded(body())


async def test_real_command_error_raises(faux_args, tmp_path):
    async def body():
        async with RpcClient(args=faux_args(), cwd=tmp_path, request_timeout=10) as client:
            with pytest.raises(RpcCommandError) as info:
                await client.set_model("nope", "missing-model")
            assert info.value.command == "set_model"
            assert info.value.error == "Model not found: nope/missing-model"
            with pytest.raises(RpcCommandError, match="Unknown command: no_such"):
                await client.request("no_such")

    await bounded(body())


async def test_real_events_iterator_and_no_ready_flag(faux_args, tmp_path):
    async def body():
        args = faux_args({"text": "streamed"}, extra=("--no-ready",))
        async with RpcClient(args=args, cwd=tmp_path, ready_timeout=0.2, request_timeout=10) as client:
            assert not client.ready_received  # started through the get_state probe
            types = []
            with client.events() as stream:
                await client.prompt("go")
                async for event in stream:
                    types.append(event["type"])
                    if event["type"] == "agent_settled":
                        break
            assert types[0] == "agent_start" and "message_update" in types
            assert types[-2:] == ["agent_end", "agent_settled"]

    await bounded(body())


async def test_real_process_killed_mid_run(faux_args, tmp_path):
    async def body():
        args = faux_args({"text": "slow " * 200, "chunkSize": 1, "delayMs": 50})
        async with RpcClient(args=args, cwd=tmp_path, request_timeout=10) as client:
            with client.events("message_update") as stream:
                waiting = asyncio.ensure_future(client.prompt_and_wait("go"))
                await stream.get(10)
                os.kill(client.pid, signal.SIGKILL)
                started = time.monotonic()
                with pytest.raises(RpcProcessExited) as info:
                    await waiting
                assert time.monotonic() - started < 3
            assert info.value.returncode == -signal.SIGKILL and "SIGKILL" in str(info.value)

    await bounded(body())


async def test_real_prompt_refused_after_its_ack_raises(faux_args, tmp_path):
    """A spent budget: the prompt is acknowledged, then failed with the same id (seed 000's late prompt
    failure). prompt_and_wait raises at once instead of waiting for a run that never starts."""
    async def body():
        args = faux_args({"text": "first", "usage": {"input": 5, "output": 50}}, {"text": "never"})
        async with RpcClient(args=args, cwd=tmp_path, request_timeout=10) as client:
            budget = await client.set_budget({"maxOutputTokens": 10})
            assert budget["status"] == "ok" and budget["limits"]["maxOutputTokens"] == 10
            await client.prompt_and_wait("spend", timeout=20)
            with pytest.raises(RpcCommandError) as info:
                await client.prompt_and_wait("refused", timeout=20)
            assert info.value.error == "Session budget exceeded (output_tokens)"
            assert (await client.get_state())["budget"]["status"] == "exceeded"
            assert (await client.set_budget(None))["limits"] == {"warnAtRatio": 0.8, "abortOnExceeded": False}

    await bounded(body())


def test_real_sync_client(faux_args, tmp_path):
    with SyncRpcClient(args=faux_args({"text": "sync hello"}), cwd=tmp_path, call_timeout=20) as client:
        assert client.get_state()["model"]["provider"] == "faux"
        events = client.prompt_and_wait("hi", timeout=15)
        assert events[-1]["type"] == "agent_settled"
        assert client.get_last_assistant_text()["text"] == "sync hello"
        tools = client.get_tools()
        assert "activeToolNames" in tools
        with pytest.raises(RpcCommandError, match="Model not found"):
            client.set_model("nope", "nope")
        seen = []
        unsubscribe = client.on_event(seen.append)
        client.set_session_name("named")
        unsubscribe()
        assert any(ev["type"] == "session_info_changed" for ev in seen)
    assert client.returncode == 0


# -- frames the client cannot decode, and deep ones it must -------------------------------------------------
@pytest.mark.parametrize("kind", ["broken", "deep", "idless"])
async def test_a_response_that_cannot_be_decoded_fails_its_call_and_the_reader_goes_on(fake, kind):
    """No request timeout: only the client noticing the undecodable response can end the call."""
    async def body():
        async with RpcClient(fake("plain"), request_timeout=None) as client:
            with pytest.raises(RpcClientError, match="response to garbled could not be decoded"):
                await bounded(client.request("garbled", kind=kind), 20)
            assert (await bounded(client.get_state(), 10))["mode"] == "plain"

    await bounded(body())


def _tree_depth(tree: dict) -> int:
    depth, nodes = 0, tree["nodes"]
    while nodes:  # a loop: the test's own recursion limit must not matter
        assert len(nodes) == 1
        depth += 1
        nodes = nodes[0]["children"]
    return depth


async def test_real_deep_session_tree_is_decoded(faux_args, tmp_path):
    """A 500-entry branch nests get_session_tree 1,000+ levels deep, past Python's default recursion limit:
    the client once dropped the frame (a RecursionError in the reader) and waited forever."""
    async def body():
        async with RpcClient(args=faux_args({"text": "x"}), cwd=tmp_path, request_timeout=None) as client:
            for i in range(500):
                await client.set_session_name(f"n{i}")
            tree = await bounded(client.get_session_tree(), 30)
            assert _tree_depth(tree) == 502  # model_change, thinking_level_change, then one per name
            assert (await client.get_state())["sessionName"] == "n499"

    await bounded(body(), 90)


def test_real_sync_client_decodes_a_deep_session_tree(faux_args, tmp_path):
    with SyncRpcClient(args=faux_args({"text": "x"}), cwd=tmp_path, call_timeout=30) as client:
        for i in range(500):
            client.set_session_name(f"n{i}")
        assert _tree_depth(client.get_session_tree()) == 502
