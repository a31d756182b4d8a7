"""End to end, ``task.executor`` local and ray: an isolated subagent is submitted to the batch executor as a
manifest line (a fresh clone of the caller's repository at HEAD plus the caller's uncommitted work, a headless
``pisces --mode json`` in it) and its results line comes back as the task's result: the patch lands in the
caller's tree as a worktree's patch does, usage and the session file are reported, a failing verify is a
failed task with its patch kept, and no worktree is made."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time

import pytest
from taskkit import (
    TOOLS,
    call_task,
    check_event_shapes,
    git,
    lifecycle,
    make_repo,
    read,
    run_prompt,
    script,
    settings,
    start,
    summary_text,
    task_result,
    worktrees,
    write,
    write_file,
)

from proc_table import _info

_FILES = {"app.txt": "alpha\nbeta\ngamma\n"}


def _edit(old: str, new: str) -> dict:
    return {"toolCalls": [{"name": "edit", "arguments": {"path": "app.txt", "edits": [{"oldText": old,
                                                                                        "newText": new}]}}]}


def _dirty(repo: str) -> None:
    """The caller's pending work the subagent must see and the patch must not carry."""
    write(os.path.join(repo, "app.txt"), "ALPHA (user)\nbeta\ngamma\n")
    write(os.path.join(repo, "scratch.txt"), "mine\n")


def _run_edit_task(home, spawn, executor: dict, timeout: float, **env: str) -> tuple[list[dict], str]:
    repo = make_repo(home.cwd, _FILES)
    _dirty(repo)
    settings(home, {"isolation": {"mode": "worktree"}, "maxConcurrency": 2, **executor})
    tmp = os.path.join(home.root, "tmp")
    os.makedirs(tmp, exist_ok=True)
    p = spawn("--tools", TOOLS, "--faux-script", script(home, [
        call_task({"agent": "task", "isolated": True, "tasks": [
            {"id": "Edit", "description": "edit and add", "assignment": "Uppercase beta; add new.txt."}]}),
        {"text": "done"}], {
        # the headless subagent edits a line only the caller's uncommitted change has: it sees the caller's tree
        "Edit": [_edit("ALPHA (user)\nbeta", "ALPHA (user)\nBETA"), write_file("new.txt", "from the task\n"),
                 {"text": "changed app.txt and wrote new.txt"}]}), env=home.env(TMPDIR=tmp, **env))
    frames = run_prompt(p, timeout=timeout)
    return frames, repo


def _check_landed(frames: list[dict], repo: str, backend: str) -> None:
    assert lifecycle(frames) == ["tool_execution_start", "start 0-Edit isolated", "end 0-Edit exit=0",
                                 "tool_execution_end"], summary_text(frames)
    check_event_shapes(frames)
    assert read(os.path.join(repo, "app.txt")) == "ALPHA (user)\nBETA\ngamma\n"
    assert read(os.path.join(repo, "new.txt")) == "from the task\n"
    assert read(os.path.join(repo, "scratch.txt")) == "mine\n"
    assert git(repo, "log", "--oneline").count("\n") == 1  # nothing committed in the caller's repository
    details = task_result(frames)["details"]
    r = details["results"][0]
    assert (r["executor"], r["itemStatus"], r["exitCode"], r["patchApplied"]) == (backend, "succeeded", 0, True)
    assert r["output"] == "changed app.txt and wrote new.txt"
    patch = read(r["patchPath"])
    changed = [ln for ln in patch.splitlines() if ln[:1] in "+-" and not ln.startswith(("+++", "---"))]
    assert changed == ["-beta", "+BETA", "+from the task"], changed  # none of the caller's own work
    session = [json.loads(line) for line in read(r["sessionFile"]).splitlines()]
    assert session[0]["type"] == "session" and any(e.get("type") == "message" for e in session)
    assert "Uppercase beta; add new.txt." in json.dumps(session)  # the task's text was the item's prompt
    assert r["usage"]["totalTokens"] > 0 and r["tokens"] == r["usage"]["totalTokens"]
    assert details["usage"]["totalTokens"] == r["usage"]["totalTokens"]
    assert "Applied patches: yes" in summary_text(frames)
    assert worktrees(repo) == [repo]


def test_local_executor_runs_an_isolated_subagent_as_a_batch_item(home, spawn):
    frames, repo = _run_edit_task(home, spawn, {"executor": "local"}, 120)
    _check_landed(frames, repo, "local")


def test_local_executor_reports_a_failing_verify_and_keeps_the_patch_unapplied(home, spawn):
    repo = make_repo(home.cwd, _FILES)
    settings(home, {"isolation": {"mode": "worktree"}, "executor": "local", "verification": {"profiles": {
        "ci": {"commands": [{"name": "has-missing", "command": "echo looking; test -f missing.txt"}]}}}})
    p = start(spawn, home, "--faux-script", script(home, [
        call_task({"agent": "task", "isolated": True, "verify": "ci", "tasks": [
            {"id": "Add", "description": "add", "assignment": "Add added.txt."}]}),
        {"text": "done"}], {"Add": [write_file("added.txt", "x\n"), {"text": "added"}]}))
    frames = run_prompt(p, timeout=120)
    assert lifecycle(frames) == ["tool_execution_start", "start 0-Add isolated", "verify 0-Add a1 profile=ci",
                                 "run 0-Add a1 has-missing", "ran 0-Add a1 has-missing exit=1",
                                 "verified 0-Add a1 failed", "end 0-Add exit=1 verification=failed",
                                 "tool_execution_end"], lifecycle(frames)
    check_event_shapes(frames)
    r = task_result(frames)["details"]["results"][0]
    assert (r["itemStatus"], r["exitCode"], r["error"]) == ("verify_failed", 1, "Verification failed: has-missing")
    [command] = r["verification"]["attempts"][0]["commandResults"]
    assert (command["name"], command["exitCode"], command["outputPreview"]) == ("has-missing", 1, "looking")
    assert read(command["artifactPath"]).strip() == "looking"
    assert "+x" in read(r["patchPath"]) and r.get("patchApplied") is None
    assert not os.path.exists(os.path.join(repo, "added.txt"))
    assert "(not applied: the task failed)" in summary_text(frames)


def test_a_bad_executor_setting_is_refused_with_its_name(home, spawn):
    make_repo(home.cwd, _FILES)
    settings(home, {"isolation": {"mode": "worktree"}, "executor": "k8s"})
    p = start(spawn, home, "--faux-script", script(home, [
        call_task({"agent": "task", "isolated": True, "tasks": [{"id": "A", "description": "a", "assignment": "a"}]}),
        {"text": "done"}], {}))
    frames = run_prompt(p)
    assert summary_text(frames) == "task.executor must be one of inprocess, local, ray (got 'k8s')"
    assert lifecycle(frames) == ["tool_execution_start", "tool_execution_end"]


def test_ray_executor_runs_an_isolated_subagent_on_a_local_cluster(home, spawn):
    pytest.importorskip("ray", reason="Ray is an optional extra (pip install 'pisces-agent[ray]')")
    # Ray's sockets live under RAY_TMPDIR: a short one (a Unix socket path holds at most 107 bytes)
    ray_tmp = tempfile.mkdtemp(prefix="pr-", dir="/tmp")
    try:
        frames, repo = _run_edit_task(home, spawn, {"executor": "ray"}, 400, RAY_TMPDIR=ray_tmp,
                                      RAY_AUTH_MODE="disabled")
        _check_landed(frames, repo, "ray")
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)


def test_the_subagent_gets_the_rest_of_the_session_budget_and_its_calls_count_there(home, spawn):
    repo = make_repo(home.cwd, _FILES)
    settings(home, {"isolation": {"mode": "worktree"}, "executor": "local",
                    "budget": {"maxToolCalls": 2, "abortOnExceeded": False}})
    p = start(spawn, home, "--faux-script", script(home, [
        call_task({"agent": "task", "isolated": True, "tasks": [{"id": "Many", "description": "m", "assignment": "m"}]}),
        {"text": "done"}], {"Many": [write_file("a.txt", "a\n"), write_file("b.txt", "b\n"), write_file("c.txt", "c\n"),
                                    {"text": "wrote three"}]}))
    frames = run_prompt(p, timeout=120)
    r = task_result(frames)["details"]["results"][0]
    # the task call took one of the two calls: the item was given maxToolCalls 1 and stopped past it
    assert (r["itemStatus"], r["exitCode"]) == ("budget_exceeded", 1), r
    assert r["error"].startswith("budget exceeded: tool_calls (limit 1, spent 2)"), r["error"]
    assert not os.path.exists(os.path.join(repo, "a.txt"))  # a failed task's patch is not applied
    exceeded = [f for f in frames if f.get("type") == "budget_exceeded"]
    assert exceeded and exceeded[0]["scope"] == "session" and exceeded[0]["snapshot"]["toolCalls"] >= 3


def test_a_file_in_another_encoding_comes_back_byte_for_byte(home, spawn):
    repo = make_repo(home.cwd, {"latin.txt": "caf\n"})
    with open(os.path.join(repo, "latin.txt"), "wb") as f:  # the caller's uncommitted change, not UTF-8 either
        f.write(b"caf\xe9\n")
    settings(home, {"isolation": {"mode": "worktree"}, "executor": "local"})
    p = start(spawn, home, "--faux-script", script(home, [
        call_task({"agent": "task", "isolated": True, "tasks": [{"id": "Enc", "description": "e", "assignment": "e"}]}),
        {"text": "done"}], {"Enc": [{"toolCalls": [{"name": "bash", "arguments": {
            "command": "printf 'na\\xefve\\n' >> latin.txt"}}]}, {"text": "appended"}]}))
    frames = run_prompt(p, timeout=120)
    r = task_result(frames)["details"]["results"][0]
    assert (r["itemStatus"], r.get("patchApplied")) == ("succeeded", True), r
    with open(os.path.join(repo, "latin.txt"), "rb") as f:
        assert f.read() == b"caf\xe9\nna\xefve\n"


def test_a_headless_subagent_cannot_write_the_callers_tree_and_asks_nobody(home, spawn):
    """The item's commands are confined to its clone by the OS sandbox; what would need a person (running
    outside the sandbox) is denied in the item, and no request reaches the caller's client."""
    repo = make_repo(home.cwd, _FILES)
    outside = os.path.join(repo, "escaped.txt")
    settings(home, {"isolation": {"mode": "worktree"}, "executor": "local"})
    p = start(spawn, home, "--faux-script", script(home, [
        call_task({"agent": "task", "isolated": True, "tasks": [{"id": "Out", "description": "o", "assignment": "o"}]}),
        {"text": "done"}], {"Out": [{"toolCalls": [{"name": "bash", "arguments": {
            "command": f"echo escaped > {outside}"}}]}, {"text": "tried"}]}))
    frames = run_prompt(p, timeout=120)
    r = task_result(frames)["details"]["results"][0]
    assert r["itemStatus"] == "succeeded" and r["output"] == "tried"
    assert not os.path.exists(outside)
    assert not [f for f in frames if "approval" in f.get("type", "") or f.get("type") == "extension_ui_request"]
    session = read(r["sessionFile"])
    assert "escaped.txt" in session and ("sandbox" in session.lower() or "denied" in session.lower())


def test_abort_kills_the_headless_item_and_removes_its_clone(home, spawn):
    make_repo(home.cwd, _FILES)
    # the item's pisces reads the same settings: its sandbox lets the command write the pid file here
    home.write_json("settings.json", {"task": {"isolation": {"mode": "worktree"}, "executor": "local"},
                                      "sandbox": {"writableRoots": [home.root]}})
    pid_file = os.path.join(home.root, "sleeper.pid")
    p = start(spawn, home, "--faux-script", script(home, [
        call_task({"agent": "task", "isolated": True, "tasks": [{"id": "Slow", "description": "s", "assignment": "s"}]}),
        {"text": "unused"}], {"Slow": [{"toolCalls": [{"name": "bash", "arguments": {
            "command": f"echo $$ > {pid_file}.tmp && mv {pid_file}.tmp {pid_file}; exec sleep 60"}}]}]}))
    p.send({"type": "prompt", "message": "go"})
    deadline = time.monotonic() + 60
    while not os.path.exists(pid_file):  # the item's command is running
        assert time.monotonic() < deadline, "the headless subagent's command never started"
        time.sleep(0.05)
    sleeper = int(read(pid_file))
    assert _info(sleeper) is not None
    p.send({"id": "stop", "type": "abort"})
    p.until(lambda f: f.get("type") == "response" and f.get("id") == "stop", 30)
    if not any(f.get("type") == "agent_settled" for f in p.frames):
        p.until_type("agent_settled", 30)
    frames = p.frames
    assert lifecycle(frames) == ["tool_execution_start", "start 0-Slow isolated", "end 0-Slow exit=1",
                                 "tool_execution_end"]
    [r] = task_result(frames)["details"]["results"]
    assert r["aborted"] is True and r["exitCode"] == 1
    assert _info(sleeper) is None  # the item's whole process group was killed
    tmp = os.path.join(home.root, "tmp")
    assert not [n for n in os.listdir(tmp) if n.startswith("pisces-batch-")]  # the clone is gone


def test_a_repository_url_is_cloned_at_the_callers_head_with_the_uncommitted_work_on_top(home, spawn, tmp_path):
    """``executorOptions.repoUrl``: what a Ray worker without this filesystem clones; the URL has the caller's
    HEAD, and the caller's uncommitted change travels as the line's base_patch."""
    repo = make_repo(home.cwd, _FILES)
    bare = str(tmp_path / "remote.git")
    git(str(tmp_path), "clone", "-q", "--bare", repo, bare)
    _dirty(repo)
    settings(home, {"isolation": {"mode": "worktree"}, "executor": "local",
                    "executorOptions": {"repoUrl": f"file://{bare}"}})
    p = start(spawn, home, "--faux-script", script(home, [
        call_task({"agent": "task", "isolated": True, "tasks": [
            {"id": "Edit", "description": "e", "assignment": "Uppercase beta."}]}),
        {"text": "done"}], {"Edit": [_edit("ALPHA (user)\nbeta", "ALPHA (user)\nBETA"), {"text": "ok"}]}))
    frames = run_prompt(p, timeout=120)
    r = task_result(frames)["details"]["results"][0]
    assert (r["itemStatus"], r["patchApplied"]) == ("succeeded", True), r
    assert read(os.path.join(repo, "app.txt")) == "ALPHA (user)\nBETA\ngamma\n"
    assert git(bare, "log", "--oneline", "--all").count("\n") == 1  # the remote was only read
