"""End to end, the real ``pisces --mode rpc`` with the faux model scripting the parent and each subagent apart:
a parallel batch, isolated tasks in real git repositories (the patch lands, the user's dirty tree is left as it
was, a subagent that commits, two patches that conflict, branch mode) and an abort mid-task. Every case checks
the ``subagent_*`` events against seed 000's order exactly, and that no worktree is left behind."""

from __future__ import annotations

import json
import os
import time

from taskkit import (
    bash,
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
    submit,
    summary_text,
    task_result,
    worktrees,
    write,
    write_file,
)

from proc_table import _info

ISOLATED = {"isolation": {"mode": "worktree"}}


def _updates(frames: list[dict]) -> list[list[tuple[str, str]]]:
    return [[(p["id"], p["status"]) for p in f["partialResult"]["details"]["progress"]]
            for f in frames if f.get("type") == "tool_execution_update" and f.get("toolName") == "task"]


def test_parallel_batch_runs_subagents_side_by_side(home, spawn):
    p = start(spawn, home, "--no-session", "--faux-script", script(home, [
        call_task({"agent": "task", "context": "Shared notes for both.", "tasks": [
            {"id": "Left", "description": "left side", "assignment": "Report the left side."},
            {"id": "Right", "description": "right side", "assignment": "Report the right side."}]}),
        {"text": "both done"}], {
        "Left": [submit({"side": "left"})],
        "Right": [bash("echo right-ran"), submit({"side": "right"})]}))
    frames = run_prompt(p)
    seq = lifecycle(frames)
    # both subagents are running before either ends (parallel), each start has its end, all inside the tool call
    assert seq[:3] == ["tool_execution_start", "start 0-Left", "start 1-Right"], seq
    assert sorted(seq[3:5]) == ["end 0-Left exit=0", "end 1-Right exit=0"] and seq[5:] == ["tool_execution_end"]
    check_event_shapes(frames)
    result = task_result(frames)
    results = result["details"]["results"]
    assert [(r["id"], r["agent"], r["exitCode"]) for r in results] == [("0-Left", "task", 0), ("1-Right", "task", 0)]
    assert json.loads(results[0]["output"]) == {"side": "left"} and json.loads(results[1]["output"]) == {"side": "right"}
    assert "Shared notes for both." in results[0]["task"] and "Report the left side." in results[0]["task"]
    assert results[1]["usage"]["totalTokens"] > 0 and result["details"]["usage"]["totalTokens"] == sum(
        r["usage"]["totalTokens"] for r in results)
    text = summary_text(frames)
    assert text.startswith("<task-summary>\n<header>2/2 succeeded [")
    assert '<agent id="0-Left" agent="task">\n<status>completed</status>' in text
    # progress a host can follow: every task pending first, later running, finally completed
    updates = _updates(frames)
    assert updates[0] == [("0-Left", "pending"), ("1-Right", "pending")]
    assert ("1-Right", "running") in [s for u in updates for s in u]
    assert updates[-1] == [("0-Left", "completed"), ("1-Right", "completed")]
    running = next(f for f in frames if f.get("type") == "tool_execution_update"
                   and any(x.get("currentTool") == "bash" for x in f["partialResult"]["details"]["progress"]))
    assert running["partialResult"]["content"] == [{"type": "text", "text": "Running 2 agents..."}]
    assert p.ok({"type": "get_last_assistant_text"}) == {"text": "both done"}


def test_max_concurrency_one_runs_tasks_one_after_another(home, spawn):
    settings(home, {"maxConcurrency": 1})
    p = start(spawn, home, "--no-session", "--faux-script", script(home, [
        call_task({"agent": "quick_task", "tasks": [
            {"id": "A", "description": "a", "assignment": "a"}, {"id": "B", "description": "b", "assignment": "b"}]}),
        {"text": "ok"}], {"A": [submit("a")], "B": [submit("b")]}))
    frames = run_prompt(p)
    assert lifecycle(frames) == ["tool_execution_start", "start 0-A", "end 0-A exit=0", "start 1-B", "end 1-B exit=0",
                                 "tool_execution_end"]
    assert [r["agent"] for r in task_result(frames)["details"]["results"]] == ["quick_task", "quick_task"]


def test_isolated_task_patch_lands_in_the_users_tree(home, spawn):
    repo = make_repo(home.cwd)
    settings(home, ISOLATED)
    p = start(spawn, home, "--faux-script", script(home, [
        call_task({"agent": "task", "isolated": True, "tasks": [
            {"id": "Edit", "description": "uppercase beta", "assignment": "Change beta to BETA in app.txt."}]}),
        {"text": "done"}], {
        "Edit": [{"toolCalls": [{"name": "edit", "arguments": {
            "path": "app.txt", "edits": [{"oldText": "beta", "newText": "BETA"}]}}]}, submit({"changed": "app.txt"})]}))
    frames = run_prompt(p)
    assert lifecycle(frames) == ["tool_execution_start", "start 0-Edit isolated", "end 0-Edit exit=0",
                                 "tool_execution_end"]
    check_event_shapes(frames)
    assert read(os.path.join(repo, "app.txt")) == "alpha\nBETA\ngamma\n"
    assert git(repo, "status", "--short") == " M app.txt\n"
    result = task_result(frames)["details"]["results"][0]
    session_file = p.ok({"type": "get_state"})["sessionFile"]
    artifacts = session_file[:-len(".jsonl")]
    assert result["patchPath"] == os.path.join(artifacts, "0-Edit.patch") and result["patchApplied"] is True
    assert read(result["patchPath"]) .replace("\n", "").endswith("-beta+BETA gamma")
    assert result["outputPath"] == os.path.join(artifacts, "0-Edit.md")
    assert "Applied patches: yes" in summary_text(frames)
    assert worktrees(repo) == [repo]
    assert os.listdir(os.path.join(home.agent_dir, "worktrees", os.listdir(os.path.join(home.agent_dir, "worktrees"))[0])) == []


def _dirty(repo: str) -> dict[str, str]:
    """The user's pending work: a staged change, an unstaged change and an untracked file."""
    write(os.path.join(repo, "notes.txt"), "n\nstaged line\n")
    git(repo, "add", "notes.txt")
    write(os.path.join(repo, "app.txt"), "ALPHA (user)\nbeta\ngamma\ndelta\nepsilon\n")
    write(os.path.join(repo, "scratch.txt"), "mine\n")
    return {"cached": git(repo, "diff", "--cached"), "head": git(repo, "rev-parse", "HEAD")}


_FILES = {"app.txt": "alpha\nbeta\ngamma\ndelta\nepsilon\n", "notes.txt": "n\n"}


def _check_dirt_intact(repo: str, before: dict[str, str], patch: str) -> None:
    assert git(repo, "diff", "--cached") == before["cached"]  # the index: exactly the user's staged change
    assert git(repo, "rev-parse", "HEAD") == before["head"]
    assert read(os.path.join(repo, "app.txt")) == "ALPHA (user)\nbeta\ngamma\ndelta\nEPSILON (task)\n"
    assert read(os.path.join(repo, "notes.txt")) == "n\nstaged line\n"
    assert read(os.path.join(repo, "scratch.txt")) == "mine\n"
    assert read(os.path.join(repo, "new.txt")) == "from the task\n"
    changed = [ln for ln in patch.splitlines() if ln[:1] in "+-" and not ln.startswith(("+++", "---"))]
    assert changed == ["-epsilon", "+EPSILON (task)", "+from the task"], changed  # none of the user's own work
    assert "scratch" not in patch and "notes.txt" not in patch
    assert worktrees(repo) == [repo]


def test_isolated_task_leaves_the_users_dirty_tree_intact(home, spawn):
    repo = make_repo(home.cwd, _FILES)
    before = _dirty(repo)
    settings(home, ISOLATED)
    p = start(spawn, home, "--faux-script", script(home, [
        call_task({"agent": "task", "isolated": True, "tasks": [
            {"id": "Tail", "description": "shout epsilon", "assignment": "Uppercase epsilon; add new.txt."}]}),
        {"text": "done"}], {
        "Tail": [bash("test \"$(head -1 app.txt)\" = 'ALPHA (user)' && test -f scratch.txt && "
                      "git diff --cached --name-only"),
                 {"toolCalls": [{"name": "edit", "arguments": {
                     "path": "app.txt", "edits": [{"oldText": "epsilon", "newText": "EPSILON (task)"}]}}]},
                 write_file("new.txt", "from the task\n"), submit("done")]}))
    frames = run_prompt(p)
    assert lifecycle(frames) == ["tool_execution_start", "start 0-Tail isolated", "end 0-Tail exit=0",
                                 "tool_execution_end"]
    # the subagent saw the user's pending work in its worktree (staged change staged there too)
    seen = [f for f in frames if f.get("type") == "tool_execution_update"]
    result = task_result(frames)["details"]["results"][0]
    assert result["exitCode"] == 0, result
    _check_dirt_intact(repo, before, read(result["patchPath"]))
    assert seen  # progress was reported while it ran


def test_subagent_that_commits_brings_back_only_its_own_changes(home, spawn):
    repo = make_repo(home.cwd, _FILES)
    before = _dirty(repo)
    settings(home, ISOLATED)
    p = start(spawn, home, "--faux-script", script(home, [
        call_task({"agent": "task", "isolated": True, "tasks": [
            {"id": "Commit", "description": "commits", "assignment": "Make the change and commit it."}]}),
        {"text": "done"}], {
        "Commit": [{"toolCalls": [{"name": "edit", "arguments": {
                       "path": "app.txt", "edits": [{"oldText": "epsilon", "newText": "EPSILON (task)"}]}}]},
                   write_file("new.txt", "from the task\n"),
                   # the commit sweeps up the user's replayed changes too: they must not come back as the task's
                   bash("git add -A && git -c user.name=T -c user.email=t@e commit -qm 'task work' && git log --oneline"),
                   submit("committed")]}))
    frames = run_prompt(p)
    assert lifecycle(frames) == ["tool_execution_start", "start 0-Commit isolated", "end 0-Commit exit=0",
                                 "tool_execution_end"]
    result = task_result(frames)["details"]["results"][0]
    _check_dirt_intact(repo, before, read(result["patchPath"]))
    assert git(repo, "log", "--oneline").count("\n") == 1  # the user's history is untouched


def test_conflicting_patches_apply_the_first_and_report_the_second(home, spawn):
    repo = make_repo(home.cwd)
    settings(home, ISOLATED)
    p = start(spawn, home, "--faux-script", script(home, [
        call_task({"agent": "task", "isolated": True, "tasks": [
            {"id": "First", "description": "b1", "assignment": "beta -> B1"},
            {"id": "Second", "description": "b2", "assignment": "beta -> B2"}]}),
        {"text": "done"}], {
        "First": [write_file("app.txt", "alpha\nB1\ngamma\n"), submit("b1")],
        "Second": [write_file("app.txt", "alpha\nB2\ngamma\n"), submit("b2")]}))
    frames = run_prompt(p)
    seq = lifecycle(frames)
    # the two run in parallel, so their events may interleave either way; each task's own order is fixed
    assert seq[0] == "tool_execution_start" and seq[-1] == "tool_execution_end" and len(seq) == 6, seq
    assert [e for e in seq if "0-First" in e] == ["start 0-First isolated", "end 0-First exit=0"]
    assert [e for e in seq if "1-Second" in e] == ["start 1-Second isolated", "end 1-Second exit=0"]
    results = task_result(frames)["details"]["results"]
    assert read(os.path.join(repo, "app.txt")) == "alpha\nB1\ngamma\n"
    assert results[0]["patchApplied"] is True and results[1]["patchApplied"] is False
    assert results[1]["error"] == "Patch not applied: conflict in app.txt"
    assert os.path.isfile(results[1]["patchPath"]) and "+B2" in read(results[1]["patchPath"])
    text = summary_text(frames)
    assert "<header>1/2 succeeded" in text and "<status>merge failed</status>" in text
    assert "Applied patches: 0-First" in text
    assert f"- 1-Second: {results[1]['patchPath']} (conflict in app.txt)" in text
    assert worktrees(repo) == [repo]


def test_branch_mode_commits_to_a_task_branch_and_merges_it(home, spawn):
    repo = make_repo(home.cwd)
    write(os.path.join(repo, "scratch.txt"), "mine\n")  # untracked: must not end up in the task's commit
    settings(home, {"isolation": {"mode": "worktree", "merge": "branch"}})
    p = start(spawn, home, "--no-session", "--faux-script", script(home, [
        call_task({"agent": "task", "isolated": True, "tasks": [
            {"id": "Feature", "description": "Add feature.txt", "assignment": "Create feature.txt."}]}),
        {"text": "done"}], {"Feature": [write_file("feature.txt", "feature\n"), submit("added")]}))
    frames = run_prompt(p)
    assert lifecycle(frames) == ["tool_execution_start", "start 0-Feature isolated", "end 0-Feature exit=0",
                                 "tool_execution_end"]
    result = task_result(frames)["details"]["results"][0]
    assert result["branchName"] == "pisces/task/0-Feature"
    assert "Merged 1 branch: pisces/task/0-Feature" in summary_text(frames)
    assert git(repo, "log", "-1", "--format=%s") == "Add feature.txt\n"
    assert git(repo, "show", "--name-only", "--format=", "HEAD") == "feature.txt\n"
    assert git(repo, "branch", "--list", "pisces/*") == ""  # merged, so removed
    assert git(repo, "status", "--short") == "?? scratch.txt\n"
    assert worktrees(repo) == [repo]


def test_abort_mid_task_stops_the_subagent_and_leaves_no_worktree(home, spawn):
    repo = make_repo(home.cwd)
    # the subagent's command is sandboxed: the test's directory is made writable for its pid file
    home.write_json("settings.json", {"task": ISOLATED, "sandbox": {"writableRoots": [home.root]}})
    pid_file = os.path.join(home.root, "sleeper.pid")
    p = start(spawn, home, "--no-session", "--faux-script", script(home, [
        call_task({"agent": "task", "isolated": True, "tasks": [
            {"id": "Slow", "description": "slow", "assignment": "Wait."},
            {"id": "Later", "description": "later", "assignment": "Never starts."}]}),
        {"text": "unused"}], {"Slow": [bash(f"echo $$ > {pid_file}.tmp && mv {pid_file}.tmp {pid_file}; exec sleep 60")],
                              "Later": [bash("sleep 60")]}))
    p.send({"type": "prompt", "message": "go"})
    p.until(lambda f: f.get("type") == "subagent_start" and f["id"] == "1-Later", 30)
    deadline = time.monotonic() + 30
    while not os.path.exists(pid_file):  # the subagent's command is running
        assert time.monotonic() < deadline, "the subagent's command never started"
        time.sleep(0.02)
    sleeper = int(read(pid_file))
    assert _info(sleeper) is not None
    p.send({"id": "stop", "type": "abort"})
    p.until(lambda f: f.get("type") == "response" and f.get("id") == "stop", 30)
    frames = p.frames
    seq = lifecycle(frames)
    assert seq[0] == "tool_execution_start" and seq[-1] == "tool_execution_end"
    assert sorted(seq[1:-1]) == ["end 0-Slow exit=1", "end 1-Later exit=1", "start 0-Slow isolated",
                                 "start 1-Later isolated"]
    assert seq.index("end 0-Slow exit=1") > seq.index("start 0-Slow isolated")
    results = task_result(frames)["details"]["results"]
    assert [r["aborted"] for r in results] == [True, True]
    assert "<header>0/2 succeeded (2 cancelled)" in summary_text(frames)
    assert _info(sleeper) is None  # the subagent's command was killed
    assert worktrees(repo) == [repo]
    home_dir = os.path.join(home.agent_dir, "worktrees")
    assert all(os.listdir(os.path.join(home_dir, d)) == [] for d in os.listdir(home_dir))
    assert git(repo, "status", "--short") == ""


def test_project_agents_are_used_only_in_a_trusted_project(home, spawn):
    write(os.path.join(home.cwd, ".pisces", "agents", "scout.md"),
          "---\nname: scout\ndescription: the project's own scout\ntools: read, ls\n---\nScout this project.\n")
    parent = [call_task({"agent": "scout", "tasks": [{"id": "Look", "description": "d", "assignment": "look"}]}),
              {"text": "ok"}]
    p = start(spawn, home, "--no-session", "--faux-script", script(home, parent, {"Look": [submit("seen")]}))
    frames = run_prompt(p)
    assert summary_text(frames) == ('Unknown agent "scout". Available: task, quick_task, explore, plan, reviewer')
    assert lifecycle(frames) == ["tool_execution_start", "tool_execution_end"]
    p.wait_stderr("project agents in")
    p.wait_stderr("the project is not trusted")
    p.close()

    p = start(spawn, home, "--no-session", "--trust-project", "--faux-script", script(home, parent,
                                                                                      {"Look": [submit("seen")]}))
    frames = run_prompt(p)
    assert lifecycle(frames) == ["tool_execution_start", "start 0-Look", "end 0-Look exit=0", "tool_execution_end"]
    result = task_result(frames)["details"]
    assert result["results"][0]["agentSource"] == "project"
    assert result["projectAgentsDir"] == os.path.join(os.path.realpath(home.cwd), ".pisces", "agents")
