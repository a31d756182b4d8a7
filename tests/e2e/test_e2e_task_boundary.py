"""An isolated subagent stays in its worktree, through the real ``pisces --mode rpc``: its write by absolute
path into the user's working tree is not delegated work, so it asks the person (and is refused when they say
no) although subagents otherwise run as ``yolo``; a write inside its worktree runs unasked."""

from __future__ import annotations

import os

from taskkit import call_task, make_repo, read, script, settings, start, submit, write_file

HANG = 60


def test_an_isolated_subagent_cannot_write_the_parent_tree_by_absolute_path(home, spawn):
    repo = make_repo(home.cwd)
    settings(home, {"isolation": {"mode": "worktree"}})
    target = os.path.join(repo, "app.txt")
    p = start(spawn, home, "--faux-script", script(home, [
        call_task({"agent": "task", "isolated": True, "tasks": [
            {"id": "Escape", "description": "escape", "assignment": "Write the parent tree."}]}),
        {"text": "done"}], {
        "Escape": [write_file(target, "owned\n"), write_file("inside.txt", "ok\n"), submit({"done": True})]}))
    p.ok({"type": "negotiate_protocol", "protocolVersion": 2, "clientCapabilities": {"typedToolApprovals": 1}})
    p.ok({"type": "set_approval_mode", "mode": "yolo"})  # even when the parent runs everything unasked
    p.send({"type": "prompt", "message": "go"})
    asked = []
    while True:
        frame = p.until(lambda f: f.get("type") in ("tool_approval_request", "agent_settled"), HANG)[-1]
        if frame["type"] == "agent_settled":
            break
        asked.append(frame)
        p.send({"type": "tool_approval_response", "id": frame["id"], "toolCallId": frame["toolCallId"],
                "approved": False})
    assert [(f["toolName"], f["tier"]) for f in asked] == [("write", "exec")]
    assert "outside the workspace" in asked[0]["detail"] or "outside the workspace" in str(asked[0])
    assert read(target) == "alpha\nbeta\ngamma\n"  # the user's tree is untouched
    assert read(os.path.join(repo, "inside.txt")) == "ok\n"  # the write inside its worktree came back as a patch


def test_the_task_tools_git_does_not_run_the_repositorys_configured_programs(home, spawn):
    repo = make_repo(home.cwd)
    marks = os.path.join(home.root, "marks")
    os.makedirs(marks)
    with open(os.path.join(repo, ".git", "config"), "a") as f:  # a repository shipped with its own config
        f.write(f"[core]\n\tfsmonitor = touch {marks}/fsmonitor; true\n"
                f"[filter \"x\"]\n\tclean = touch {marks}/clean; cat\n\tsmudge = touch {marks}/smudge; cat\n"
                f"[diff]\n\texternal = touch {marks}/external\n")
    with open(os.path.join(repo, ".gitattributes"), "w") as f:
        f.write("*.txt filter=x\n")
    hook = os.path.join(repo, ".git", "hooks", "post-checkout")
    with open(hook, "w") as f:
        f.write(f"#!/bin/sh\ntouch {marks}/post-checkout\n")
    os.chmod(hook, 0o755)
    settings(home, {"isolation": {"mode": "worktree"}})
    p = start(spawn, home, "--faux-script", script(home, [
        call_task({"agent": "task", "isolated": True, "tasks": [
            {"id": "Edit", "description": "edit", "assignment": "Change beta."}]}),
        {"text": "done"}], {
        "Edit": [{"toolCalls": [{"name": "edit", "arguments": {
            "path": "app.txt", "edits": [{"oldText": "beta", "newText": "BETA"}]}}]}, submit({"ok": True})]}))
    p.send({"type": "prompt", "message": "go"})
    p.until_type("agent_settled", HANG)
    assert read(os.path.join(repo, "app.txt")) == "alpha\nBETA\ngamma\n"  # the task did its work through git
    assert os.listdir(marks) == []
