"""End to end, the real ``pisces --mode rpc`` with the faux model: the exact event sequences of a text turn,
a bash tool turn, steering and follow-ups while streaming, a busy prompt, abort mid-stream and mid-tool."""

from __future__ import annotations

import time

from e2eproc import compact

BUSY = "Agent is already processing. Specify streamingBehavior ('steer' or 'followUp') to queue the message."
ZERO_USAGE = {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0,
              "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}}


def user_texts(frames):
    return [f["message"]["content"][0]["text"] for f in frames
            if f.get("type") == "message_start" and f["message"]["role"] == "user"]


def test_text_prompt_exact_event_order(home, spawn):
    p = spawn("--faux-script", home.faux_script([{"text": "Hello there, friend.", "chunkSize": 6}]))
    p.send({"id": "p1", "type": "prompt", "message": "Say hello"})
    frames = p.until_type("agent_settled")
    assert compact(frames) == [
        "response:prompt", "agent_start", "turn_start", "message_start:user", "message_end:user",
        "message_start:assistant", "message_update*", "message_end:assistant", "turn_end", "agent_end",
        "agent_settled"]
    assert frames[0] == {"id": "p1", "type": "response", "command": "prompt", "success": True}
    assert all("id" not in f for f in frames[1:])  # events never carry an id
    user = frames[3]["message"]
    assert user["role"] == "user" and user["content"] == [{"type": "text", "text": "Say hello"}]
    assert frames[4]["message"] == user
    start = frames[5]["message"]
    assert start["content"] == [] and start["usage"] == ZERO_USAGE
    update_frames = [f for f in frames if f["type"] == "message_update"]
    # pi's frame: the snapshot in ``message`` and again in the event's ``partial``, taken when it was sent
    assert all(f["assistantMessageEvent"]["partial"] == f["message"] for f in update_frames)
    assert [f["message"]["content"][0]["text"] for f in update_frames[1:]] == [
        "Hello ", "Hello there,", "Hello there, frien", "Hello there, friend.", "Hello there, friend."]
    updates = [{k: v for k, v in f["assistantMessageEvent"].items() if k != "partial"} for f in update_frames]
    assert [u["type"] for u in updates] == ["text_start", "text_delta", "text_delta", "text_delta", "text_delta",
                                            "text_end"]
    assert "".join(u.get("delta", "") for u in updates) == "Hello there, friend."
    assert updates[-1] == {"type": "text_end", "contentIndex": 0, "content": "Hello there, friend."}
    end = frames[-4]["message"]
    assert end["content"] == [{"type": "text", "text": "Hello there, friend."}] and end["stopReason"] == "stop"
    assert frames[-3] == {"type": "turn_end", "message": end, "toolResults": []}
    assert frames[-2] == {"type": "agent_end", "messages": [user, end]}
    assert frames[-1] == {"type": "agent_settled"}
    assert p.drain(0.2) == []  # nothing after agent_settled
    assert p.close() == 0


def test_bash_tool_turn_exact_event_order(home, spawn):
    p = spawn("--faux-script", home.faux_script([
        {"toolCalls": [{"name": "bash", "arguments": {"command": "echo one; sleep 0.25; echo two"}}]},
        {"text": "done"}]))
    p.send({"id": "p1", "type": "prompt", "message": "run it"})
    frames = p.until_type("agent_settled")
    seq = [t for t in compact(frames) if t != "tool_execution_update:bash"]
    assert seq == [
        "response:prompt", "agent_start", "turn_start", "message_start:user", "message_end:user",
        "message_start:assistant", "message_update*", "message_end:assistant",
        "tool_execution_start:bash", "tool_execution_end:bash", "message_start:toolResult",
        "message_end:toolResult", "turn_end",
        "turn_start", "message_start:assistant", "message_update*", "message_end:assistant", "turn_end",
        "agent_end", "agent_settled"]
    kinds = [f["type"] for f in frames]
    first_update = kinds.index("tool_execution_update")
    assert kinds.index("tool_execution_start") < first_update < kinds.index("tool_execution_end")
    updates = [f for f in frames if f["type"] == "tool_execution_update"]
    assert updates[0]["partialResult"] == {"content": []}  # as pi: an empty first update
    assert updates[-1]["partialResult"]["content"] == [{"type": "text", "text": "one\ntwo\n"}]
    call = [f for f in frames if f["type"] == "message_end"][1]["message"]  # [0] is the user message
    assert call["stopReason"] == "toolUse"
    tc = call["content"][0]
    assert tc["type"] == "toolCall" and tc["name"] == "bash"
    assert tc["arguments"] == {"command": "echo one; sleep 0.25; echo two"}
    start = next(f for f in frames if f["type"] == "tool_execution_start")
    assert start == {"type": "tool_execution_start", "toolCallId": tc["id"], "toolName": "bash",
                     "args": {"command": "echo one; sleep 0.25; echo two"}}
    end = next(f for f in frames if f["type"] == "tool_execution_end")
    assert end == {"type": "tool_execution_end", "toolCallId": tc["id"], "toolName": "bash",
                   "result": {"content": [{"type": "text", "text": "one\ntwo\n"}]}, "isError": False}
    result = next(f for f in frames if f["type"] == "message_end" and f["message"]["role"] == "toolResult")
    msg = result["message"]
    assert msg["toolCallId"] == tc["id"] and msg["toolName"] == "bash" and msg["isError"] is False
    assert "details" not in msg  # a clean bash result has no details, as pi
    first_turn_end = next(f for f in frames if f["type"] == "turn_end")
    assert first_turn_end["message"] == call and first_turn_end["toolResults"] == [msg]
    agent_end = frames[-2]
    assert [m["role"] for m in agent_end["messages"]] == ["user", "assistant", "toolResult", "assistant"]
    assert p.close() == 0


def test_steer_follow_up_and_prompt_while_streaming(home, spawn):
    slow = {"text": "a slow answer " * 8, "chunkSize": 4, "delayMs": 15}
    p = spawn("--faux-script", home.faux_script([slow, {"text": "r-steer"}, {"text": "r-prompt-steer"},
                                                  {"text": "r-follow"}, {"text": "r-prompt-follow"}]))
    p.send({"id": "p1", "type": "prompt", "message": "go"})
    p.until(lambda f: f.get("type") == "message_update")

    r = p.request({"id": "busy", "type": "prompt", "message": "again"})
    assert r == {"id": "busy", "type": "response", "command": "prompt", "success": False, "error": BUSY}

    def queued(rid, cmd, steering, follow):
        r = p.request({"id": rid, **cmd})
        assert r == {"id": rid, "type": "response", "command": cmd["type"], "success": True}
        evs = [e for e in p.last_events if e["type"] in ("queue_update", "queue_changed")]
        n = len(steering) + len(follow)
        assert evs == [{"type": "queue_update", "steering": steering, "followUp": follow},
                       {"type": "queue_changed", "pendingMessageCount": n, "queuedMessageCount": n}]

    queued("s", {"type": "steer", "message": "steer one"}, ["steer one"], [])
    queued("f", {"type": "follow_up", "message": "follow one"}, ["steer one"], ["follow one"])
    queued("ps", {"type": "prompt", "message": "prompt as steer", "streamingBehavior": "steer"},
           ["steer one", "prompt as steer"], ["follow one"])
    queued("pf", {"type": "prompt", "message": "prompt as followUp", "streamingBehavior": "followUp"},
           ["steer one", "prompt as steer"], ["follow one", "prompt as followUp"])
    state = p.ok({"type": "get_state"})
    assert state["isStreaming"] is True and state["pendingMessageCount"] == state["queuedMessageCount"] == 4

    frames = p.until_type("agent_settled", timeout=20)
    # as pi's run 11: steering first (one at a time), then the follow-ups, all in one run
    assert user_texts(frames) == ["steer one", "prompt as steer", "follow one", "prompt as followUp"]
    assert [f["type"] for f in frames].count("agent_start") == 0 and \
        [f["type"] for f in frames].count("agent_end") == 1
    # each delivery: turn_start, then queue_update (the item removed), then the user message
    i = next(i for i, f in enumerate(frames) if f.get("type") == "message_start"
             and f["message"]["role"] == "user")
    assert [f["type"] for f in frames[i - 3:i + 1]] == ["turn_start", "queue_update", "queue_changed",
                                                         "message_start"]
    assert frames[i - 2] == {"type": "queue_update", "steering": ["prompt as steer"],
                             "followUp": ["follow one", "prompt as followUp"]}
    assert p.ok({"type": "get_state"})["pendingMessageCount"] == 0
    texts = [m["content"][0]["text"] for m in p.ok({"type": "get_messages"})["messages"] if m["role"] == "assistant"]
    assert texts[1:] == ["r-steer", "r-prompt-steer", "r-follow", "r-prompt-follow"]
    assert p.close() == 0


def test_abort_mid_stream_answers_after_agent_end(home, spawn):
    p = spawn("--faux-script", home.faux_script([{"text": "x" * 400, "chunkSize": 4, "delayMs": 20}]))
    p.send({"id": "p1", "type": "prompt", "message": "go"})
    p.until(lambda f: f.get("type") == "message_update" and f["assistantMessageEvent"]["type"] == "text_delta")
    t0 = time.monotonic()
    p.send({"id": "a", "type": "abort"})
    frames = p.until(lambda f: f.get("id") == "a", timeout=30)
    assert time.monotonic() - t0 < 30  # bounds a hang; the kept partial text below shows the stream was cut
    seq = compact(frames)
    assert seq[-6:] == ["message_update*", "message_end:assistant", "turn_end", "agent_end", "agent_settled",
                        "response:abort"]
    assert frames[-1] == {"id": "a", "type": "response", "command": "abort", "success": True}
    end = [f for f in frames if f["type"] == "message_end"][-1]["message"]
    assert end["stopReason"] == "aborted" and end["errorMessage"] == "Request was aborted"
    assert end["usage"] == ZERO_USAGE
    partial = end["content"][0]["text"]
    assert 0 < len(partial) < 400 and set(partial) == {"x"}  # the partial text is kept
    state = p.ok({"type": "get_state"})
    assert state["isStreaming"] is False and state["messageCount"] == 2
    assert p.close() == 0


def test_abort_during_a_tool_run(home, spawn):
    p = spawn("--faux-script", home.faux_script([
        {"toolCalls": [{"name": "bash", "arguments": {"command": "sleep 30"}}]}, {"text": "never"}]))
    p.send({"id": "p1", "type": "prompt", "message": "sleep"})
    p.until_type("tool_execution_start")
    time.sleep(0.1)
    t0 = time.monotonic()
    p.send({"id": "a", "type": "abort"})
    frames = p.until(lambda f: f.get("id") == "a", timeout=25)
    assert time.monotonic() - t0 < 25  # well before the 30 s sleep would end
    assert [t for t in compact(frames) if t != "tool_execution_update:bash"] == [
        "tool_execution_end:bash", "message_start:toolResult", "message_end:toolResult", "turn_end",
        "turn_start", "message_start:assistant", "message_end:assistant", "turn_end", "agent_end",
        "agent_settled", "response:abort"]
    end = next(f for f in frames if f["type"] == "tool_execution_end")
    assert end["isError"] is True and end["result"] == {"content": [{"type": "text", "text": "Command aborted"}],
                                                        "details": {}}
    last = [f for f in frames if f["type"] == "message_end"][-1]["message"]
    # as pi: an empty aborted assistant message, "Request was aborted." with a full stop
    assert last["content"] == [] and last["stopReason"] == "aborted"
    assert last["errorMessage"] == "Request was aborted."
    assert p.close() == 0


def test_abort_and_prompt_while_streaming(home, spawn):
    p = spawn("--faux-script", home.faux_script([{"text": "y" * 400, "chunkSize": 4, "delayMs": 20},
                                                  {"text": "fresh"}]))
    p.send({"id": "p1", "type": "prompt", "message": "first"})
    p.until(lambda f: f.get("type") == "message_update")
    p.send({"id": "ap", "type": "abort_and_prompt", "message": "second"})
    frames = p.until_type("agent_settled")
    frames += p.until_type("agent_settled")
    seq = compact(frames)
    i = seq.index("response:abort_and_prompt")
    assert seq[:i] == ["message_update*", "message_end:assistant", "turn_end", "agent_end", "agent_settled"]
    assert seq[i:] == ["response:abort_and_prompt", "agent_start", "turn_start", "message_start:user",
                       "message_end:user", "message_start:assistant", "message_update*", "message_end:assistant",
                       "turn_end", "agent_end", "agent_settled"]
    assert user_texts(frames) == ["second"]
    assert p.ok({"type": "get_last_assistant_text"}) == {"text": "fresh"}
    assert p.close() == 0


def test_rpc_bash_while_streaming_waits_for_the_next_prompt(home, spawn):
    p = spawn("--faux-script", home.faux_script([{"text": "z" * 120, "chunkSize": 4, "delayMs": 10},
                                                  {"text": "seen"}]))
    p.send({"id": "p1", "type": "prompt", "message": "first"})
    p.until(lambda f: f.get("type") == "message_update")
    r = p.request({"id": "b", "type": "bash", "command": "echo side"})
    assert r["data"] == {"output": "side\n", "exitCode": 0, "cancelled": False, "truncated": False}
    p.until_type("agent_settled")
    roles = [m["role"] for m in p.ok({"type": "get_messages"})["messages"]]
    assert roles == ["user", "assistant"]  # held back, as pi, until the next prompt
    p.send({"id": "p2", "type": "prompt", "message": "second"})
    p.until_type("agent_settled")
    roles = [m["role"] for m in p.ok({"type": "get_messages"})["messages"]]
    assert roles == ["user", "assistant", "bashExecution", "user", "assistant"]
    assert p.close() == 0
