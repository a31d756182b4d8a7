"""The web host over real WebSockets, against the real ``pisces --mode web`` / ``--mode rpc --web`` process:
responses to the asker, events to all with gapless sequence numbers, the first answer wins, replay after a
dropped connection mid-reply, a snapshot once the replay buffer no longer reaches back, stdio and two
browsers on one session."""

from __future__ import annotations

import json
import threading

from webproc import WebProc

from scripted_server import Gate, Reply

DIALOG_EXTENSION = '''
def register(pi):
    @pi.on("tool_call")
    async def gate(event, ctx):
        if event.tool_name != "bash":
            return None
        choice = await ctx.ui.select("Run " + event.input.get("command", "") + "?", ["Approve", "Deny"])
        if choice != "Approve":
            return {"block": True, "reason": "Denied from the dialog"}
        return None
'''


HELD = {"retry": {"provider": {"idleTimeoutMs": 120000}}}  # a reply held at a gate is not a silent provider


def chunk(delta: dict | None = None, finish: str | None = None) -> dict:
    return {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "scripted-model",
            "choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish}]}


def held_reply(words: list[str], gate: threading.Event, hold_after: int) -> Reply:
    """A streamed reply of ``words`` that stops after ``hold_after`` of them until ``gate`` is set."""
    events: list = [chunk({"role": "assistant", "content": ""})]
    for i, w in enumerate(words):
        if i == hold_after:
            events.append(Gate(gate))
        events.append(chunk({"content": w}))
    events.append(chunk({}, "stop"))
    events.append({"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "scripted-model",
                   "choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": len(words),
                                            "total_tokens": 10 + len(words)}})
    return Reply.sse(events, done=True)


def seqs(frames: list[dict]) -> list[int]:
    return [f["seq"] for f in frames if "seq" in f and f.get("type") not in ("snapshot", "resumed")]


def text_of(message: dict) -> str:
    return "".join(b.get("text", "") for b in message.get("content", []) if b.get("type") == "text")


def deltas(frames: list[dict]) -> str:
    return "".join(f["assistantMessageEvent"].get("delta", "") for f in frames
                   if f.get("type") == "message_update" and f["assistantMessageEvent"]["type"] == "text_delta")


def test_responses_to_the_asker_events_to_all_without_gaps(home):
    script = home.faux_script([{"text": "Hello from the faux model, to every client.", "chunkSize": 4}])
    with WebProc(home, "--provider", "faux", "--faux-script", script, "--no-session") as w:
        a, b = w.ws(), w.ws()
        snap_a, snap_b = w.recv(a), w.recv(b)
        assert snap_a["type"] == snap_b["type"] == "snapshot" and snap_a["reason"] == "new"
        assert snap_a["streamId"] == snap_b["streamId"]
        a.send(json.dumps({"id": "mine", "type": "get_state"}))
        got_a = w.until(a, lambda f: f.get("id") == "mine")
        assert got_a[-1]["success"] and got_a[-1]["data"]["model"]["id"] == "faux"
        # B asks something after A did: nothing addressed to A reaches B before B's own answer
        b.send(json.dumps({"id": "b1", "type": "get_state"}))
        got_b = w.until(b, lambda f: f.get("id") == "b1")
        assert all(f.get("id") != "mine" for f in got_b)

        a.send(json.dumps({"id": "p", "type": "prompt", "message": "hi"}))
        frames_a = w.until(a, lambda f: f.get("type") == "agent_settled")
        frames_b = w.until(b, lambda f: f.get("type") == "agent_settled")
        assert any(f.get("id") == "p" and f.get("type") == "response" for f in frames_a)
        assert not any(f.get("id") == "p" for f in frames_b)  # the prompt's response went to A only
        events_a = [f for f in frames_a if f.get("type") != "response"]
        assert events_a == frames_b  # the same frames, the same numbers, in the same order
        numbers = seqs(frames_b)
        assert numbers == list(range(snap_b["seq"] + 1, snap_b["seq"] + 1 + len(numbers)))  # no gap
        assert deltas(frames_b) == "Hello from the faux model, to every client."
        assert all(f["type"] != "message_update" or "message" not in f for f in frames_b)  # deltas profile
        a.close()
        b.close()


def test_first_answer_wins_and_the_others_are_told(home):
    ext = home.faux_script([], name="ignored.json")  # a path inside the test's root
    ext = ext.replace("ignored.json", "gate_ext.py")
    with open(ext, "w") as f:
        f.write(DIALOG_EXTENSION)
    script = home.faux_script([{"toolCalls": [{"name": "bash", "arguments": {"command": "echo approved-run"}}]},
                               {"text": "done"}])
    with WebProc(home, "--provider", "faux", "--faux-script", script, "--no-session", "-e", ext, "--yolo") as w:
        a, b = w.ws(), w.ws()
        w.recv(a), w.recv(b)
        a.send(json.dumps({"id": "p", "type": "prompt", "message": "run it"}))
        ask_a = w.until(a, lambda f: f.get("type") == "extension_ui_request" and f.get("method") == "select")[-1]
        ask_b = w.until(b, lambda f: f.get("type") == "extension_ui_request" and f.get("method") == "select")[-1]
        assert ask_a == ask_b and ask_a["options"] == ["Approve", "Deny"]
        # a third client attaching now is sent the open dialog in its snapshot
        c = w.ws()
        snap_c = w.recv(c)
        assert [r["id"] for r in snap_c["requests"]] == [ask_a["id"]]
        b.send(json.dumps({"type": "extension_ui_response", "id": ask_a["id"], "value": "Approve"}))
        a.send(json.dumps({"type": "extension_ui_response", "id": ask_a["id"], "value": "Deny"}))  # too late
        rest_a = w.until(a, lambda f: f.get("type") == "agent_settled")
        cancels = [f for f in rest_a if f.get("method") == "cancel"]
        assert [f["targetId"] for f in cancels] == [ask_a["id"]]  # everyone is told the dialog is over
        end = next(f for f in rest_a if f.get("type") == "tool_execution_end")
        assert not end["isError"] and "approved-run" in end["result"]["content"][0]["text"]  # B's answer won
        rest_c = w.until(c, lambda f: f.get("type") == "agent_settled")
        assert any(f.get("method") == "cancel" and f["targetId"] == ask_a["id"] for f in rest_c)
        for ws in (a, b, c):
            ws.close()


def test_replay_after_a_dropped_connection_mid_reply(home, server):
    gate = threading.Event()
    words = [f"word{i} " for i in range(40)]
    server.push(held_reply(words, gate, hold_after=15))
    home.scripted_provider(server.url + "/v1", HELD)
    with WebProc(home, "--no-session") as w:
        a, b = w.ws(), w.ws()
        snap = w.recv(a)
        w.recv(b)
        a.send(json.dumps({"id": "p", "type": "prompt", "message": "stream"}))
        before = w.until(a, lambda f: f.get("type") == "message_update" and
                         f["assistantMessageEvent"].get("delta") == "word14 ")
        last_seen = before[-1]["seq"]
        a.close()  # the phone sleeps, mid-reply
        # while A is away: frames it misses (the reply is held, B renames the session)
        assert w.request(b, {"type": "set_session_name", "name": "while away"})["success"]
        a2 = w.ws(f"since={last_seen}&stream={snap['streamId']}")
        resumed = w.recv(a2)
        assert resumed["type"] == "resumed" and resumed["fromSeq"] == last_seen
        missed = [w.recv(a2) for _ in range(resumed["toSeq"] - last_seen)]
        assert [f["type"] for f in missed][-1] == "session_info_changed"
        gate.set()
        after = w.until(a2, lambda f: f.get("type") == "agent_settled")
        frames = before + missed + after
        numbers = seqs(frames)
        assert numbers == list(range(snap["seq"] + 1, snap["seq"] + 1 + len(numbers)))  # nothing lost, nothing twice
        final = next(f for f in after if f.get("type") == "message_end" and f["message"]["role"] == "assistant")
        assert deltas(frames) == text_of(final["message"]) == "".join(words)
        a2.close()
        b.close()


def test_snapshot_when_the_buffer_no_longer_reaches_back(home, server):
    gate = threading.Event()
    words = [f"w{i} " for i in range(30)]
    server.push(held_reply(words, gate, hold_after=20))
    home.scripted_provider(server.url + "/v1", {**HELD, "web": {"replayEvents": 4}})
    with WebProc(home, "--no-session") as w:
        a, b = w.ws(), w.ws()
        snap = w.recv(a)
        w.recv(b)
        a.send(json.dumps({"id": "p", "type": "prompt", "message": "stream"}))
        before = w.until(a, lambda f: f.get("type") == "message_update" and
                         f["assistantMessageEvent"].get("delta") == "w4 ")
        a.close()
        w.until(b, lambda f: f.get("type") == "message_update" and f["assistantMessageEvent"].get("delta") == "w19 ")
        a2 = w.ws(f"since={before[-1]['seq']}&stream={snap['streamId']}")
        snap2 = w.recv(a2)
        assert snap2["type"] == "snapshot" and snap2["reason"] == "gap"
        assert snap2["state"]["isStreaming"] is True, json.dumps(snap2)[:3000]
        partial = text_of(snap2["streamingMessage"])
        assert partial == "".join(words[:20])  # the reply as far as it had streamed, exactly
        gate.set()
        after = w.until(a2, lambda f: f.get("type") == "agent_settled")
        numbers = seqs(after)
        assert numbers[0] == snap2["seq"] + 1 and numbers == list(range(numbers[0], numbers[0] + len(numbers)))
        final = next(f for f in after if f.get("type") == "message_end" and f["message"]["role"] == "assistant")
        assert partial + deltas(after) == text_of(final["message"]) == "".join(words)
        # a client from another stream (a restarted server) gets a snapshot too
        a3 = w.ws("since=3&stream=0000000000000000")
        assert w.recv(a3)["reason"] == "stream"
        for ws in (a2, a3, b):
            ws.close()


def test_stdio_and_two_browsers_on_one_session(home):
    script = home.faux_script({"responses": [{"text": "first reply"}, {"text": "second reply"}], "loop": True})
    with WebProc(home, "--provider", "faux", "--faux-script", script, "--no-session", rpc=True) as w:
        a, b = w.ws(), w.ws()
        w.recv(a), w.recv(b)
        w.stdio_until(lambda f: f.get("type") == "ready")
        # stdio prompts: both browsers see the run
        w.stdio_send({"id": "s1", "type": "prompt", "message": "from the terminal"})
        stdio_run = w.stdio_until(lambda f: f.get("type") == "agent_settled")
        assert all("seq" not in f for f in stdio_run)  # pi's stream, byte for byte: no extra field
        for ws in (a, b):
            run = w.until(ws, lambda f: f.get("type") == "agent_settled")
            assert not any(f.get("id") == "s1" for f in run)
            users = [f for f in run if f.get("type") == "message_end" and f["message"]["role"] == "user"]
            assert users[0]["message"]["content"][0]["text"] == "from the terminal"
        # a browser prompts: stdio sees the run, and not the browser's response
        # (the option is answered before the browser prompts: stdin and the WebSocket are two channels, and
        # nothing orders one's line before the other's message)
        start = len(w.stdout_lines)
        w.stdio_send({"id": "opt", "type": "set_stream_options", "seq": True})
        opt = w.stdio_until(lambda f: f.get("id") == "opt", start=start)[-1]
        assert opt["data"]["seq"] is True
        start = len(w.stdout_lines)
        a.send(json.dumps({"id": "w1", "type": "prompt", "message": "from the phone"}))
        stdio_run = w.stdio_until(lambda f: f.get("type") == "agent_settled", start=start)
        assert not any(f.get("id") == "w1" for f in stdio_run)
        browser_run = w.until(b, lambda f: f.get("type") == "agent_settled")
        # once stdio asked for numbers, its frames carry the browsers' numbers
        stdio_seq = {f["seq"]: f["type"] for f in stdio_run if "seq" in f}
        assert stdio_seq and all(stdio_seq.get(f["seq"]) == f["type"] for f in browser_run if f["seq"] in stdio_seq)
        assert "second reply" in json.dumps(browser_run)
        a.close()
        b.close()


def test_a_slow_or_closed_client_does_not_stop_the_others(home):
    script = home.faux_script([{"text": "x" * 400, "chunkSize": 2}])
    with WebProc(home, "--provider", "faux", "--faux-script", script, "--no-session") as w:
        a, b = w.ws(), w.ws()
        w.recv(a), w.recv(b)
        b.close()  # gone without a word
        a.send(json.dumps({"id": "p", "type": "prompt", "message": "go"}))
        run = w.until(a, lambda f: f.get("type") == "agent_settled")
        assert deltas(run) == "x" * 400
        status, _, body = w.http("/health")
        assert status == 200 and json.loads(body) == {"status": "ok", "clients": 1}
        a.close()


def test_bad_frames_get_errors_and_the_connection_lives(home):
    with WebProc(home, "--provider", "faux", "--no-session") as w:
        a = w.ws()
        w.recv(a)
        a.send("{not json")
        err = w.until(a, lambda f: f.get("type") == "response")[-1]
        assert err["success"] is False and err["command"] == "parse"
        assert w.request(a, {"type": "no_such_command"})["error"] == "Unknown command: no_such_command"
        pair = w.request(a, {"type": "web_pair"})["data"]
        assert pair["pairUrl"].startswith(w.base + "/pair?token=") and pair["url"] == w.base + "/"
        a.close()
        assert w.close() == 143  # SIGTERM ends the web mode cleanly, as the other modes (128 + 15)


def test_web_pair_link_works_once(home):
    with WebProc(home, "--provider", "faux", "--no-session") as w:
        secret = w.pair_device()
        status, headers, _ = w.http(w.pair_url[len(w.base):])
        assert status == 303 and headers["location"] == "/login?failed=1"  # used up
        status, _, body = w.http("/login?failed=1")
        assert status == 200 and b'class="failed"' in body and b'class="failed" hidden' not in body
        assert w.http("/auth", {"Authorization": f"Bearer {secret}"})[0] == 200


def test_approvals_reach_every_client_in_its_form_and_the_first_answer_wins(home):
    """The session's approval policy over the web host: a typed client and a pi-form client get the same
    request (same id, same number), either may answer, and a client attaching meanwhile finds it waiting."""
    script = home.faux_script([{"toolCalls": [{"name": "bash", "arguments": {"command": "echo from-approval"}}]},
                               {"text": "done"}])
    with WebProc(home, "--provider", "faux", "--faux-script", script, "--no-session") as w:
        typed, plain = w.ws("approvals=typed"), w.ws()
        w.recv(typed), w.recv(plain)
        plain.send(json.dumps({"id": "p", "type": "prompt", "message": "run"}))
        ask_t = w.until(typed, lambda f: f.get("type") == "tool_approval_request")[-1]
        ask_p = w.until(plain, lambda f: f.get("type") == "extension_ui_request" and f.get("method") == "select")[-1]
        assert ask_t["id"] == ask_p["id"] and ask_t["seq"] == ask_p["seq"]
        assert ask_t["identity"] == {"kind": "shell", "command": "echo from-approval"} and ask_t["tier"] == "exec"
        assert ask_p["options"] == ["Approve", "Deny"] and ask_p["title"].startswith("Allow tool: bash")
        late = w.ws("approvals=typed")  # attaches while the request waits: it is in the snapshot
        late_req = w.recv(late)["requests"]
        assert [(r["type"], r["id"]) for r in late_req] == [("tool_approval_request", ask_t["id"])]
        assert 0 < late_req[0]["timeout"] <= ask_t["timeout"]  # the time it has left
        plain.send(json.dumps({"type": "extension_ui_response", "id": ask_p["id"], "value": "Approve"}))
        typed.send(json.dumps({"type": "tool_approval_response", "id": ask_t["id"], "toolCallId": ask_t["toolCallId"],
                               "approved": False}))  # too late: the first answer won
        run_t = w.until(typed, lambda f: f.get("type") == "agent_settled")
        assert any(f.get("type") == "tool_approval_cancel" and f["targetId"] == ask_t["id"] for f in run_t)
        end = next(f for f in run_t if f.get("type") == "tool_execution_end")
        assert not end["isError"] and "from-approval" in end["result"]["content"][0]["text"]
        run_p = w.until(plain, lambda f: f.get("type") == "agent_settled")
        assert any(f.get("method") == "cancel" and f["targetId"] == ask_p["id"] for f in run_p)
        state = w.request(plain, {"type": "get_state"})["data"]
        assert state["approval"]["mode"] == "write"  # the web mode asks before commands by default
        for ws in (typed, plain, late):
            ws.close()
