"""Todos end to end through the real ``pisces --mode rpc`` (docs/planning.md): the ``todo_write`` tool with
oh-my-pi's operations and stable ids, ``todo_update`` events, ``todo_reminder{todos, attempt, maxAttempts}``
continuing the run at most ``todo.reminders.max`` times, ``set_todos{phases}`` and ``todoPhases`` in
``get_state``, and the list restored on resume, fork and tree navigation."""

from __future__ import annotations

import json

from e2eproc import compact

HANG = 30
TOOLS = ("--tools", "read,bash,edit,write,todo_write")


def todo(call_id: str, *ops: dict) -> dict:
    return {"toolCalls": [{"name": "todo_write", "arguments": {"ops": list(ops)}, "id": call_id}]}


PLAN = {"op": "replace", "phases": [{"name": "Build", "tasks": [{"content": "write the parser"},
                                                                 {"content": "write the tests"}]}]}


def statuses(phases: list[dict]) -> list[tuple[str, str, str]]:
    return [(t["id"], t["content"], t["status"]) for p in phases for t in p["tasks"]]


def test_todo_write_reminder_and_resume(home, spawn):
    script = home.faux_script([
        todo("c1", PLAN),
        {"text": "I will stop here."},  # stops with two open items: reminded once
        todo("c2", {"op": "update", "id": "t1", "status": "completed"},
             {"op": "add_task", "phase": "Build", "content": "update the docs"},
             {"op": "update", "id": "t2", "status": "abandoned", "notes": "covered elsewhere"},
             {"op": "update", "id": "t3", "status": "completed"}),
        {"text": "All done."},
    ])
    p = spawn(*TOOLS, "--faux-script", script)
    p.send({"id": "p1", "type": "prompt", "message": "plan and do it"})
    frames = p.until_type("agent_settled", HANG)
    names = [n for n in compact(frames) if n != "message_update*"]
    assert names.count("todo_update") == 2 and names.count("todo_reminder") == 1
    first = next(f for f in frames if f["type"] == "todo_update")
    assert first["source"] == "tool"
    assert statuses(first["todoPhases"]) == [("t1", "write the parser", "in_progress"),
                                             ("t2", "write the tests", "pending")]
    end = next(f for f in frames if f["type"] == "tool_execution_end")
    text = end["result"]["content"][0]["text"]
    assert "t1 write the parser" in text and "t2 write the tests" in text  # ids the model can address
    assert end["result"]["details"]["phases"] == first["todoPhases"]

    reminder = next(f for f in frames if f["type"] == "todo_reminder")
    assert (reminder["attempt"], reminder["maxAttempts"]) == (1, 3)
    assert [(t["id"], t["status"]) for t in reminder["todos"]] == [("t1", "in_progress"), ("t2", "pending")]
    # the reminder is a visible message of the transcript, and the run continued after it
    at = names.index("todo_reminder")
    assert names[at + 1:at + 3] == ["agent_start", "turn_start"]
    custom = [f for f in frames if f["type"] == "message_end" and f["message"]["role"] == "custom"]
    assert custom and custom[0]["message"]["customType"] == "todo_reminder"
    assert "<system-reminder>You stopped with 2 incomplete todo item(s)" in custom[0]["message"]["content"]

    final = p.ok({"type": "get_state"})["todoPhases"]
    assert statuses(final) == [("t1", "write the parser", "completed"),
                               ("t2", "write the tests", "abandoned"), ("t3", "update the docs", "completed")]
    assert final[0]["tasks"][1]["notes"] == "covered elsewhere"
    session_file = p.ok({"type": "get_state"})["sessionFile"]
    p.close()

    # the file holds the list as pi-readable custom entries, and a resumed process restores it
    with open(session_file, encoding="utf-8") as f:
        entries = [json.loads(line) for line in f]
    saved = [e for e in entries if e["type"] == "custom" and e["customType"] == "pisces.todos"]
    assert len(saved) == 2 and saved[-1]["data"]["phases"] == final
    q = spawn(*TOOLS, "--session", session_file, "--provider", "faux")
    assert q.ok({"type": "get_state"})["todoPhases"] == final
    # a new id after the resume is never one used before
    data = q.ok({"type": "set_todos", "phases": [*final, {"name": "More", "tasks": [{"content": "ship"}]}]})
    assert [t["id"] for t in data["todoPhases"][1]["tasks"]] == ["t4"]


def test_reminders_stop_at_the_maximum_and_reset_per_prompt(home, spawn):
    home.write_json("settings.json", {"todo.reminders.max": 2})
    script = home.faux_script([todo("c1", PLAN), {"text": "stop 1"}, {"text": "stop 2"}, {"text": "stop 3"},
                               {"text": "again 1"}, {"text": "again 2"}, {"text": "again 3"}])
    p = spawn(*TOOLS, "--no-session", "--faux-script", script)
    p.send({"id": "p1", "type": "prompt", "message": "go"})
    frames = p.until_type("agent_settled", HANG)
    reminders = [f for f in frames if f["type"] == "todo_reminder"]
    assert [(r["attempt"], r["maxAttempts"]) for r in reminders] == [(1, 2), (2, 2)]
    assert p.ok({"type": "get_last_assistant_text"})["text"] == "stop 3"  # the third stop is final
    p.send({"id": "p2", "type": "prompt", "message": "continue"})
    frames = p.until_type("agent_settled", HANG)
    assert [r["attempt"] for r in frames if r["type"] == "todo_reminder"] == [1, 2], compact(frames)  # per prompt


def test_reminders_off_and_todos_off(home, spawn):
    home.write_json("settings.json", {"todo": {"reminders": False}})
    p = spawn(*TOOLS, "--no-session", "--faux-script", home.faux_script([todo("c1", PLAN), {"text": "stop"}]))
    p.send({"id": "p1", "type": "prompt", "message": "go"})
    frames = p.until_type("agent_settled", HANG)
    assert "todo_reminder" not in [f["type"] for f in frames] and "todo_update" in [f["type"] for f in frames]
    p.close()

    home.write_json("settings.json", {"todo": {"enabled": False}})
    q = spawn("--no-session", "--provider", "faux")
    assert "todoPhases" not in q.ok({"type": "get_state"})
    assert "todo_write" not in [t["name"] for t in q.ok({"type": "get_tools"})["allTools"]]
    resp = q.request({"type": "set_todos", "phases": []})
    assert resp["success"] is False and "todo.enabled" in resp["error"]


def test_set_todos_validates_and_announces(home, spawn):
    p = spawn("--no-session", "--provider", "faux")
    assert p.ok({"type": "get_state"})["todoPhases"] == []
    data = p.ok({"type": "set_todos", "phases": [{"name": "A", "tasks": [
        {"content": "one", "status": "completed"}, {"content": "two"}, {"id": "mine", "content": "three"}]}]})
    assert statuses(data["todoPhases"]) == [("t1", "one", "completed"), ("t2", "two", "in_progress"),
                                            ("mine", "three", "pending")]
    assert data["todoPhases"][0]["id"] == "p1"
    event = next(f for f in p.last_events if f["type"] == "todo_update")
    assert event == {"type": "todo_update", "todoPhases": data["todoPhases"], "source": "rpc"}
    for bad, needle in (([{"name": "A", "tasks": [{"content": "x", "status": "done"}]}], "invalid status"),
                        ("nope", "array"), ([{"tasks": []}], "name")):
        resp = p.request({"type": "set_todos", "phases": bad})
        assert resp["success"] is False and needle in resp["error"], resp
    assert p.ok({"type": "get_state"})["todoPhases"] == data["todoPhases"]  # unchanged by the refusals
    missing = p.request({"type": "set_todos"})
    assert missing["success"] is False and "phases" in missing["error"]


def test_bad_operation_is_an_error_result_that_changes_nothing(home, spawn):
    script = home.faux_script([todo("c1", PLAN),
                               todo("c2", {"op": "update", "id": "t1", "status": "completed"},
                                    {"op": "remove_task", "id": "t99"}),
                               {"text": "ok"}])
    home.write_json("settings.json", {"todo": {"reminders": False}})
    p = spawn(*TOOLS, "--no-session", "--faux-script", script)
    p.send({"id": "p1", "type": "prompt", "message": "go"})
    frames = p.until_type("agent_settled", HANG)
    ends = [f for f in frames if f["type"] == "tool_execution_end"]
    assert ends[1]["isError"] is True
    assert "no task 't99'" in ends[1]["result"]["content"][0]["text"]
    assert statuses(p.ok({"type": "get_state"})["todoPhases"])[0][2] == "in_progress"  # t1 not completed


def test_tree_navigation_and_fork_restore_the_branch_list(home, spawn):
    home.write_json("settings.json", {"todo": {"reminders": False}})
    script = home.faux_script([{"text": "hello"}, todo("c1", PLAN), {"text": "planned"}, {"text": "third"}])
    p = spawn(*TOOLS, "--faux-script", script)
    p.send({"id": "p1", "type": "prompt", "message": "first"})
    p.until_type("agent_settled", HANG)
    p.send({"id": "p2", "type": "prompt", "message": "second"})
    p.until_type("agent_settled", HANG)
    planned = p.ok({"type": "get_state"})["todoPhases"]
    assert len(planned[0]["tasks"]) == 2
    second = next(m for m in p.ok({"type": "get_fork_messages"})["messages"] if m["text"] == "second")

    # back to before the second prompt: the list written after it is not on that branch
    p.ok({"type": "navigate_tree", "targetId": second["entryId"]})
    restored = next(f for f in p.last_events if f["type"] == "todo_update")
    assert restored["source"] == "restore" and restored["todoPhases"] == []
    assert p.ok({"type": "get_state"})["todoPhases"] == []

    # the leaf of the second prompt again: its list comes back; a clone keeps it
    tree = p.ok({"type": "get_session_tree"})
    assert tree  # navigate to the last entry (the final reply) by its id
    entries = p.ok({"type": "get_entries"})["entries"]
    last_reply = [e for e in entries if e["type"] == "message" and e["message"]["role"] == "assistant"][-1]
    p.ok({"type": "navigate_tree", "targetId": last_reply["id"]})
    assert p.ok({"type": "get_state"})["todoPhases"] == planned
    p.ok({"type": "clone"})
    assert p.ok({"type": "get_state"})["todoPhases"] == planned

    # fork before a later prompt: the new session file carries the list written before it
    p.send({"id": "p3", "type": "prompt", "message": "third"})
    p.until_type("agent_settled", HANG)
    third = next(m for m in p.ok({"type": "get_fork_messages"})["messages"] if m["text"] == "third")
    before = p.ok({"type": "get_state"})["sessionFile"]
    assert p.ok({"type": "fork", "entryId": third["entryId"]})["cancelled"] is False
    state = p.ok({"type": "get_state"})
    assert state["sessionFile"] != before and state["todoPhases"] == planned


def test_subagents_do_not_get_the_parents_list(home, spawn):
    from taskkit import call_task, run_prompt, script, start, submit

    home.write_json("settings.json", {"todo": {"reminders": False}})
    p = start(spawn, home, "--no-session", "--tools", "read,bash,edit,write,task,todo_write", "--faux-script",
              script(home, [todo("c1", PLAN),
                            call_task({"agent": "task", "tasks": [{"id": "Sub", "description": "d",
                                                                   "assignment": "Try the todo list."}]}),
                            {"text": "done"}],
                     {"Sub": [todo("s1", {"op": "update", "id": "t1", "status": "completed"}),
                              submit({"ok": True})]}))
    frames = run_prompt(p)
    ends = [f for f in frames if f["type"] == "tool_execution_end"]
    assert [e["toolName"] for e in ends] == ["todo_write", "task"]
    # the subagent's call found no such tool: the parent's list is untouched and no todo_update came of it
    assert [f["source"] for f in frames if f["type"] == "todo_update"] == ["tool"]
    assert statuses(p.ok({"type": "get_state"})["todoPhases"])[0] == ("t1", "write the parser", "in_progress")
    tools = p.ok({"type": "get_tools"})
    assert "todo_write" in tools["activeToolNames"]
