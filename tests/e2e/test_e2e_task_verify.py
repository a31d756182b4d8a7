"""End to end: verification of isolated tasks over RPC, in real git repositories. Every ``verify`` shape of seed
000 (false, true, a profile name, an inline object, a profile plus an inline override, and the implicit one of
``requireForIsolated``), every ``onFailure`` (return_failure, discard_patch, retry_once with a repair that
passes and one that does not), an optional command, and a command that runs past its ``timeoutMs``. The
``subagent_*`` events of each case are compared with seed 000's order exactly."""

from __future__ import annotations

import os

from taskkit import (
    bash,
    call_task,
    check_event_shapes,
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
    write_file,
)

from proc_table import _info

# "check" passes when out.txt says "good"; like a real test run it leaves a file behind, which must never come
# back with the task's patch
CHECK = {"name": "check", "command": "echo checked > check-report.txt; "
                                     "grep -qx good out.txt || { echo 'out.txt is not good'; cat out.txt; exit 3; }"}
SAY = {"name": "say", "command": "echo said-it"}
PROFILES = {"strict": {"mode": "command", "commands": [CHECK], "onFailure": "discard_patch"},
            "quick": {"commands": [SAY]}}


def _batch(task_id: str, verify: object = None) -> dict:
    args: dict = {"agent": "task", "isolated": True,
                  "tasks": [{"id": task_id, "description": f"{task_id} work", "assignment": "Write out.txt."}]}
    if verify is not None:
        args["verify"] = verify
    return call_task(args)


def _writes(text: str) -> list[dict]:
    return [write_file("out.txt", text), submit("wrote out.txt")]


def _one(frames: list[dict]) -> dict:
    return task_result(frames)["details"]["results"][0]


def test_each_verify_shape(home, spawn):
    repo = make_repo(home.cwd)
    settings(home, {"isolation": {"mode": "worktree"}, "verification": {"profiles": PROFILES}})
    p = start(spawn, home, "--no-session", "--faux-script", script(home, [
        _batch("Off", False), {"text": "1"},
        _batch("Named", "strict"), {"text": "2"},
        _batch("Inline", {"commands": [CHECK, {"name": "lint", "command": "exit 1", "optional": True}]}), {"text": "3"},
        _batch("Override", {"profile": "strict", "commands": [SAY]}), {"text": "4"},
        _batch("NoProfile", True), {"text": "5"},
        _batch("Ghost", "nonexistent"), {"text": "6"},
    ], {name: _writes("good\n") for name in ("Off", "Named", "Inline", "Override")}))

    # verify: false -> no verification at all, no verification key
    frames = run_prompt(p)
    assert lifecycle(frames) == ["tool_execution_start", "start 0-Off isolated", "end 0-Off exit=0",
                                 "tool_execution_end"]
    assert "verification" not in _one(frames)

    # a profile name: its commands, its name in the events and the result
    frames = run_prompt(p)
    assert lifecycle(frames) == [
        "tool_execution_start", "start 1-Named isolated",
        "verify 1-Named a1 profile=strict", "run 1-Named a1 check", "ran 1-Named a1 check exit=0",
        "verified 1-Named a1 passed",
        "end 1-Named exit=0 verification=passed", "tool_execution_end"]
    check_event_shapes(frames)
    v = _one(frames)["verification"]
    assert {k: v[k] for k in ("requested", "profile", "mode", "status", "retriesUsed", "onFailure")} == {
        "requested": True, "profile": "strict", "mode": "command", "status": "passed", "retriesUsed": 0,
        "onFailure": "discard_patch"}
    end = next(f for f in frames if f.get("type") == "subagent_end")
    assert end["verification"] == v
    assert read(os.path.join(repo, "out.txt")) == "good\n"  # the patch landed, without what the check wrote
    assert not os.path.exists(os.path.join(repo, "check-report.txt"))

    # inline commands, no profile: a failing optional command does not fail verification
    frames = run_prompt(p)
    assert lifecycle(frames) == [
        "tool_execution_start", "start 2-Inline isolated", "verify 2-Inline a1",
        "run 2-Inline a1 check", "ran 2-Inline a1 check exit=0", "run 2-Inline a1 lint", "ran 2-Inline a1 lint exit=1",
        "verified 2-Inline a1 passed", "end 2-Inline exit=0 verification=passed", "tool_execution_end"]
    v = _one(frames)["verification"]
    assert "profile" not in v and v["onFailure"] == "return_failure"
    assert [(c["name"], c["exitCode"], c.get("optional")) for c in v["attempts"][0]["commandResults"]] == [
        ("check", 0, None), ("lint", 1, True)]
    begun = next(f for f in frames if f.get("type") == "subagent_verification_start")
    assert "profile" not in begun

    # a profile plus an inline override: the inline commands replace the profile's, the rest comes from it
    frames = run_prompt(p)
    assert lifecycle(frames) == [
        "tool_execution_start", "start 3-Override isolated", "verify 3-Override a1 profile=strict",
        "run 3-Override a1 say", "ran 3-Override a1 say exit=0", "verified 3-Override a1 passed",
        "end 3-Override exit=0 verification=passed", "tool_execution_end"]
    v = _one(frames)["verification"]
    assert v["onFailure"] == "discard_patch"
    cmd = v["attempts"][0]["commandResults"][0]
    assert cmd["outputPreview"] == "said-it" and read(cmd["artifactPath"]).strip() == "said-it"
    ran = next(f for f in frames if f.get("type") == "subagent_verification_command_end")
    assert ran["artifactId"] == cmd["artifactPath"] and cmd["artifactPath"].endswith("3-Override.verify.a1-1-say.log")

    # true without a default profile, and an unknown profile: refused before anything starts
    frames = run_prompt(p)
    assert lifecycle(frames) == ["tool_execution_start", "tool_execution_end"]
    assert summary_text(frames) == "Verification requested but no verification profile or commands were provided."
    frames = run_prompt(p)
    assert summary_text(frames) == 'Unknown or invalid verification profile "nonexistent".'
    assert lifecycle(frames) == ["tool_execution_start", "tool_execution_end"]
    assert read(os.path.join(repo, "out.txt")) == "good\n"
    assert worktrees(repo) == [repo]


def test_default_profile_for_true_and_required_verification(home, spawn):
    repo = make_repo(home.cwd)
    settings(home, {"isolation": {"mode": "worktree"}, "verification": {
        "enabled": True, "requireForIsolated": True, "defaultProfile": "quick", "profiles": PROFILES}})
    p = start(spawn, home, "--no-session", "--faux-script", script(home, [
        _batch("Default", True), {"text": "1"}, _batch("Implicit"), {"text": "2"}],
        {"Default": _writes("good\n"), "Implicit": _writes("good\n")}))
    for task_id in ("0-Default", "1-Implicit"):
        frames = run_prompt(p)
        assert lifecycle(frames) == [
            "tool_execution_start", f"start {task_id} isolated", f"verify {task_id} a1 profile=quick",
            f"run {task_id} a1 say", f"ran {task_id} a1 say exit=0", f"verified {task_id} a1 passed",
            f"end {task_id} exit=0 verification=passed", "tool_execution_end"]
    assert worktrees(repo) == [repo]


def _failed_check(task_id: str, attempt: int = 1) -> list[str]:
    return [f"verify {task_id} a{attempt}", f"run {task_id} a{attempt} check", f"ran {task_id} a{attempt} check exit=3",
            f"verified {task_id} a{attempt} failed"]


def test_each_on_failure_policy(home, spawn):
    repo = make_repo(home.cwd)
    settings(home, {"isolation": {"mode": "worktree"}})
    p = start(spawn, home, "--no-session", "--faux-script", script(home, [
        _batch("Keep", {"commands": [CHECK]}), {"text": "1"},
        _batch("Drop", {"commands": [CHECK], "onFailure": "discard_patch"}), {"text": "2"},
        _batch("Fix", {"commands": [CHECK], "onFailure": "retry_once"}), {"text": "3"},
        _batch("Stuck", {"commands": [CHECK], "onFailure": "retry_once"}), {"text": "4"},
    ], {"Keep": _writes("bad\n"), "Drop": _writes("bad\n"),
        "Fix": _writes("bad\n"), "Fix-repair": [bash("cat .pisces-none 2>/dev/null; echo good > out.txt"),
                                                  submit("fixed out.txt")],
        "Stuck": _writes("bad\n"), "Stuck-repair": _writes("still bad\n")}))

    # return_failure (the default): exit 1, the patch kept but not applied
    frames = run_prompt(p)
    assert lifecycle(frames) == ["tool_execution_start", "start 0-Keep isolated", *_failed_check("0-Keep"),
                                 "end 0-Keep exit=1 verification=failed", "tool_execution_end"]
    r = _one(frames)
    assert (r["exitCode"], r["error"], r["verification"]["onFailure"]) == (1, "Verification failed: check",
                                                                          "return_failure")
    assert "+bad" in read(r["patchPath"]) and not os.path.exists(os.path.join(repo, "out.txt"))
    cmd = r["verification"]["attempts"][0]["commandResults"][0]
    assert cmd["outputPreview"] == "out.txt is not good\nbad" and cmd["timedOut"] is False
    assert "<status>failed (exit 1)</status>" in summary_text(frames)
    assert "(not applied: the task failed)" in summary_text(frames)

    # discard_patch: exit 1 and no patch at all
    frames = run_prompt(p)
    assert lifecycle(frames) == ["tool_execution_start", "start 1-Drop isolated", *_failed_check("1-Drop"),
                                 "end 1-Drop exit=1 verification=failed", "tool_execution_end"]
    r = _one(frames)
    assert r["exitCode"] == 1 and "patchPath" not in r and r["verification"]["onFailure"] == "discard_patch"

    # retry_once: a repair subagent in the same worktree, then attempt 2 passes; its fix is what lands
    frames = run_prompt(p)
    assert lifecycle(frames) == [
        "tool_execution_start", "start 2-Fix isolated", *_failed_check("2-Fix"),
        "start 2-Fix-repair isolated", "end 2-Fix-repair exit=0",
        "verify 2-Fix a2", "run 2-Fix a2 check", "ran 2-Fix a2 check exit=0", "verified 2-Fix a2 passed",
        "end 2-Fix exit=0 verification=passed", "tool_execution_end"]
    check_event_shapes(frames)
    r = _one(frames)
    assert r["id"] == "2-Fix" and r["exitCode"] == 0 and r["output"] == '"fixed out.txt"'
    v = r["verification"]
    assert (v["status"], v["retriesUsed"], v["repaired"], [a["status"] for a in v["attempts"]]) == (
        "passed", 1, True, ["failed", "passed"])  # the seed's statuses; "repaired" is added
    assert r["repair"] == {"id": "2-Fix-repair", "exitCode": 0}
    assert read(os.path.join(repo, "out.txt")) == "good\n"
    assert "check-report" not in read(r["patchPath"])  # what the first check run wrote stayed behind
    assert not os.path.exists(os.path.join(repo, "check-report.txt"))

    # retry_once whose repair does not fix it: attempt 2 fails too, exit 1, patch kept
    frames = run_prompt(p)
    assert lifecycle(frames) == [
        "tool_execution_start", "start 3-Stuck isolated", *_failed_check("3-Stuck"),
        "start 3-Stuck-repair isolated", "end 3-Stuck-repair exit=0", *_failed_check("3-Stuck", 2),
        "end 3-Stuck exit=1 verification=failed", "tool_execution_end"]
    r = _one(frames)
    assert r["verification"]["retriesUsed"] == 1 and r["error"] == "Verification failed: check"
    assert "+still bad" in read(r["patchPath"])
    assert read(os.path.join(repo, "out.txt")) == "good\n"  # the failed task changed nothing
    assert worktrees(repo) == [repo]


def test_a_verification_command_past_its_timeout_is_killed_with_its_group(home, spawn):
    repo = make_repo(home.cwd)
    # verification is sandboxed: the test's directory is made writable for its pid file
    home.write_json("settings.json", {"task": {"isolation": {"mode": "worktree"}},
                                      "sandbox": {"writableRoots": [home.root]}})
    pid_file = os.path.join(home.root, "bg.pid")
    slow = {"name": "slow", "timeoutMs": 300,
            "command": f"sleep 60 & echo $! > {pid_file}; echo waiting; wait"}
    p = start(spawn, home, "--no-session", "--faux-script", script(home, [
        _batch("Hang", {"commands": [slow, SAY]}), {"text": "1"}], {"Hang": _writes("good\n")}))
    frames = run_prompt(p)
    assert lifecycle(frames) == [
        "tool_execution_start", "start 0-Hang isolated", "verify 0-Hang a1",
        "run 0-Hang a1 slow", "ran 0-Hang a1 slow exit=124", "run 0-Hang a1 say", "ran 0-Hang a1 say exit=0",
        "verified 0-Hang a1 failed", "end 0-Hang exit=1 verification=failed", "tool_execution_end"]
    r = _one(frames)
    cmd = r["verification"]["attempts"][0]["commandResults"][0]
    assert (cmd["exitCode"], cmd["timedOut"], cmd["outputPreview"]) == (124, True, "waiting")
    assert r["error"] == "Verification failed: slow"
    assert _info(int(read(pid_file))) is None  # the background child went with the group
    assert worktrees(repo) == [repo]


def test_a_repair_the_budget_refuses_ends_its_attempt_with_budget_exceeded(home, spawn):
    """Seed 000's ``subagent_verification_end`` status ``budget_exceeded``: attempt 2 could not run."""
    make_repo(home.cwd)
    settings(home, {"isolation": {"mode": "worktree"}, "budget": {"maxSubagents": 1}})
    p = start(spawn, home, "--no-session", "--faux-script", script(home, [
        _batch("Fix", {"commands": [CHECK], "onFailure": "retry_once"}), {"text": "done"}],
        {"Fix": _writes("bad\n"), "Fix-repair": [submit("never runs")]}))
    frames = run_prompt(p)
    assert lifecycle(frames) == [
        "tool_execution_start", "start 0-Fix isolated", *_failed_check("0-Fix"),
        "verified 0-Fix a2 budget_exceeded", "end 0-Fix exit=1 verification=failed", "tool_execution_end"]
    check_event_shapes(frames)
    r = _one(frames)
    assert r["error"].endswith("; repair skipped") and r["verification"]["status"] == "failed"


def test_seed_settings_example_is_enough_for_isolated_tasks(home, spawn):
    """Seed 000's settings example (flat keys, no task.isolation.mode) lets ``isolated: true`` with ``verify``
    run; an explicit ``task.isolation.mode: "none"`` still refuses it."""
    repo = make_repo(home.cwd)
    home.write_json("settings.json", {
        "task.verification.enabled": True, "task.verification.defaultProfile": "ci",
        "task.verification.profiles": {"ci": {"mode": "command", "commands": [CHECK], "onFailure": "return_failure"}}})
    p = start(spawn, home, "--no-session", "--faux-script", script(home, [_batch("Seed", True), {"text": "ok"}],
                                                                      {"Seed": _writes("good\n")}))
    frames = run_prompt(p)
    assert lifecycle(frames)[:2] == ["tool_execution_start", "start 0-Seed isolated"]
    r = _one(frames)
    assert r["exitCode"] == 0 and r["verification"]["status"] == "passed" and r["verification"]["profile"] == "ci"
    assert read(os.path.join(repo, "out.txt")) == "good\n"
    p.close()

    home.write_json("settings.json", {"task.verification.enabled": True, "task.isolation.mode": "none"})
    q = start(spawn, home, "--no-session", "--faux-script", script(home, [_batch("Off"), {"text": "ok"}],
                                                                      {"Off": _writes("x\n")}, ))
    frames = run_prompt(q)
    assert "Task isolation is disabled" in task_result(frames)["content"][0]["text"]
