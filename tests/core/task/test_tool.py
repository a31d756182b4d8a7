"""The task tool in process, on the faux model: its schema, its refusals (pisces' strings), how a subagent ends
(submit_result, an error result, no result after the reminders, a schema mismatch), the spawn gate and the usage
callback (TEAM.md interface 8), nested subagents, and a crash or a failed set-up that still cleans up."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest
from task_util import call_task, git, subagent_events, submit, task_end, worktrees

from pisces.core.task.hooks import SpawnRequest, UsageReport


def text_of(event) -> str:
    return event.result.content[0].text


async def run(session, arguments: dict, subagents: dict | None = None, faux=None) -> tuple[str, dict]:
    from pisces.ai.providers.faux import SCRIPT

    SCRIPT.enqueue(call_task(arguments), {"text": "parent done"})
    for name, responses in (subagents or {}).items():
        SCRIPT.enqueue_for(name, *responses)
    await session.prompt("go")
    end = task_end(session.events)
    return text_of(end), end.result.details


def one(tasks_id: str = "T", assignment: str = "do it") -> list[dict]:
    return [{"id": tasks_id, "description": "d", "assignment": assignment}]


def test_task_tool_is_registered_but_not_active_by_default_and_loads_lazily(faux, repo):
    from pisces.core.session.build import create_agent_session

    for name in ("pisces.core.task.tool", "pisces.core.task.runner", "pisces.core.task.isolation"):
        sys.modules.pop(name, None)
    s = create_agent_session(cwd=repo, provider="faux", no_session=True)
    assert "task" in s.all_tools and "task" not in [t.name for t in s.agent.tools]
    assert "pisces.core.task.tool" not in sys.modules  # nothing is loaded until the tool is described or run
    info = s.tools_info()
    task = next(t for t in info["allTools"] if t["name"] == "task")
    assert "Agents:" in task["description"] and "- explore (tools: read, grep, find, ls)" in task["description"]
    assert set(task["parameters"]["properties"]) == {"agent", "context", "schema", "tasks"}


def test_schema_has_isolated_and_verify_only_when_isolation_is_enabled(session, task_settings):
    task_settings({"isolation": {"mode": "worktree"}})
    params = session().all_tools["task"].parameters
    assert set(params["properties"]) == {"agent", "context", "schema", "tasks", "isolated", "verify"}
    assert params["required"] == ["agent", "tasks"]
    assert [b.get("type") for b in params["properties"]["verify"]["anyOf"]] == ["boolean", "string", "object"]


@pytest.mark.parametrize("arguments, expected", [
    ({"agent": "task", "isolated": True, "tasks": one()},
     "Task isolation is disabled. Remove the isolated argument or set task.isolation.mode to 'worktree', "
     "'fuse-overlay', or 'fuse-projfs'."),
    ({"agent": "nobody", "tasks": one()}, 'Unknown agent "nobody". Available: task, quick_task, explore, plan, '
                                          "reviewer"),
    ({"agent": "task", "tasks": []}, "No tasks provided. Use: { agent, context, tasks: [{id, description, args}, "
                                     "...] }"),
    ({"agent": "task", "tasks": [{"id": "A", "description": "", "assignment": "x"},
                                 {"id": " ", "description": "", "assignment": "x"},
                                 {"id": "a", "description": "", "assignment": "x"}]},
     "Invalid tasks: Missing task ids at indexes: 1. Duplicate task ids detected (case-insensitive): A (indexes 0, 2)"),
    ({"agent": "task", "verify": True, "tasks": one()},
     "Verification requires isolated task execution. Pass isolated: true or disable verify."),
])
async def test_refusals(session, arguments, expected):
    s = session()
    text, details = await run(s, arguments)
    assert text == expected
    assert details == {"projectAgentsDir": None, "results": [], "totalDurationMs": 0}
    assert subagent_events(s.events) == []


async def test_disabled_agent_and_non_repository(session, task_settings, tmp_path):
    task_settings({"disabledAgents": ["plan"], "isolation": {"mode": "worktree"}})
    s = session()
    text, _ = await run(s, {"agent": "plan", "tasks": one()})
    assert text == ('Agent "plan" is disabled in settings. Enable it via /agents, or use a different agent type. '
                    "Available: task, quick_task, explore, reviewer")
    plain = tmp_path / "plain"
    plain.mkdir()
    s2 = session(str(plain))
    text, _ = await run(s2, {"agent": "task", "isolated": True, "tasks": one()})
    assert text == ("Isolated task execution requires a git repository. "
                    "Git repository not found for isolated task execution.")


async def test_submit_error_missing_submit_and_schema_mismatch(session):
    from pisces.ai.providers.faux import SCRIPT

    s = session()
    schema = {"properties": {"count": {"type": "int32"}}}
    text, details = await run(s, {"agent": "task", "schema": schema, "tasks": [
        {"id": "Gives", "description": "", "assignment": "a"}, {"id": "Silent", "description": "", "assignment": "b"},
        {"id": "Typed", "description": "", "assignment": "c"}]}, {
        "Gives": [{"toolCalls": [{"name": "submit_result", "arguments": {"result": {"error": "no access"}}}]}],
        "Silent": [{"text": "I did it, honest."}, {"text": "still no call"}, {"text": "nope"}, {"text": "never"}],
        "Typed": [submit({"count": "three"}), submit({"count": 3})]})
    gives, silent, typed = details["results"]
    assert (gives["exitCode"], gives["aborted"], gives["abortReason"]) == (0, True, "no access")
    assert json.loads(gives["output"]) == {"aborted": True, "error": "no access"}
    assert silent["exitCode"] == 1 and silent["error"] == (
        "SYSTEM WARNING: Subagent exited without calling submit_result tool after 3 reminders.")
    assert SCRIPT.subagents["Silent"] == type(SCRIPT.subagents["Silent"])()  # the first reply and 3 reminders
    reminders = [c.messages[-1].content[0].text for c, who in zip(SCRIPT.requests, SCRIPT.requesters, strict=False)
                 if "Silent" in who][1:]
    assert [("reminder %d of 3" % i) in r for i, r in enumerate(reminders, 1)] == [True, True, True]
    assert typed["exitCode"] == 0 and json.loads(typed["output"]) == {"count": 3}
    typed_requests = [c for c, who in zip(SCRIPT.requests, SCRIPT.requesters, strict=False) if "Typed" in who]
    first_answer = typed_requests[1].messages[-1]
    assert first_answer.isError and "Output does not match schema: /count: must be int32" in first_answer.content[0].text
    assert "<status>cancelled</status>" in text and "<status>failed (exit 1)</status>" in text
    system = typed_requests[0].systemPrompt
    assert "submit_result" in system and '"int32"' in system


async def test_spawn_gate_counts_before_spawning_and_usage_reaches_the_parent(session):
    s = session()
    asked: list[SpawnRequest] = []
    usage: list[UsageReport] = []

    def gate(request: SpawnRequest) -> str | None:
        asked.append(request)
        return None if len(asked) <= 2 else "Budget exceeded (subagents)"

    s.subagents.spawn_gate = gate
    s.subagents.on_usage = usage.append
    text, details = await run(s, {"agent": "task", "tasks": [
        {"id": n, "description": "", "assignment": n} for n in ("A", "B", "C")]},
        {"A": [{"text": "thinking", "usage": {"input": 10, "output": 5}}, submit("a")],
         "B": [submit("b")], "C": [submit("c")]})
    assert [(r.id, r.kind, r.depth, r.isolated) for r in asked] == [
        ("0-A", "subagent", 1, False), ("1-B", "subagent", 1, False), ("2-C", "subagent", 1, False)]
    assert [e["id"] for e in subagent_events(s.events) if e["type"] == "subagent_start"] == ["0-A", "1-B"]
    refused = details["results"][2]
    assert (refused["exitCode"], refused["error"], refused["aborted"]) == (1, "Budget exceeded (subagents)", True)
    a_reports = [u for u in usage if u.id == "0-A"]
    assert a_reports[0].usage["input"] == 10 and a_reports[0].usage["output"] == 5
    assert a_reports[-1].total["totalTokens"] == details["results"][0]["usage"]["totalTokens"]
    assert {u.id for u in usage} == {"0-A", "1-B"}
    assert "<header>2/3 succeeded" in text


async def test_a_broken_gate_refuses_nothing(session, capsys):
    s = session()
    s.subagents.spawn_gate = lambda request: 1 / 0
    _, details = await run(s, {"agent": "task", "tasks": one()}, {"T": [submit("ok")]})
    assert details["results"][0]["exitCode"] == 0
    assert "spawn_gate hook failed: division by zero" in capsys.readouterr().err


async def test_nested_subagents_show_their_events_and_depth_is_bounded(session):
    from pisces.ai.providers.faux import SCRIPT

    s = session()
    asked: list[SpawnRequest] = []
    s.subagents.spawn_gate = lambda r: asked.append(r)
    _, details = await run(s, {"agent": "task", "tasks": one("Outer")}, {
        "Outer": [call_task({"agent": "explore", "tasks": one("Inner")}), submit("outer done")],
        "Inner": [submit({"summary": "s", "files": [], "architecture": "a"})]})
    starts = [(e["id"], e["type"]) for e in subagent_events(s.events)]
    assert starts == [("0-Outer", "subagent_start"), ("0-Outer.0-Inner", "subagent_start"),
                      ("0-Outer.0-Inner", "subagent_end"), ("0-Outer", "subagent_end")]
    assert [(r.id, r.depth) for r in asked] == [("0-Outer", 1), ("0-Outer.0-Inner", 2)]
    assert details["results"][0]["exitCode"] == 0
    inner_tools = [t.name for c, who in zip(SCRIPT.requests, SCRIPT.requesters, strict=False) if "Inner" in who for t in c.tools]
    outer_tools = [t.name for c, who in zip(SCRIPT.requests, SCRIPT.requesters, strict=False) if "Outer" in who for t in c.tools]
    assert "task" in outer_tools and "task" not in inner_tools  # depth 2 is task.maxRecursionDepth
    assert sorted(set(inner_tools)) == ["find", "grep", "ls", "read", "submit_result"]


async def test_spawn_policy_of_a_subagent(session):
    s = session()
    _, details = await run(s, {"agent": "plan", "tasks": one("Planner")}, {
        "Planner": [call_task({"agent": "task", "tasks": one("Worker")}), submit("planned")]})
    assert details["results"][0]["exitCode"] == 0
    from pisces.ai.providers.faux import SCRIPT

    answer = [c for c, who in zip(SCRIPT.requests, SCRIPT.requesters, strict=False) if "Planner" in who][1].messages[-1]
    assert answer.content[0].text == "Cannot spawn 'task'. Allowed: explore"


async def test_a_crashing_subagent_fails_its_task_and_its_worktree_is_removed(session, task_settings, repo,
                                                                              monkeypatch):
    from pisces.core.task import runner

    task_settings({"isolation": {"mode": "worktree"}})
    s = session()

    async def crash(*args, **kwargs):
        raise RuntimeError("segfault in the model")

    monkeypatch.setattr(runner, "run_subagent", crash)
    text, details = await run(s, {"agent": "task", "isolated": True, "tasks": one("Boom")})
    assert [(e["type"], e["id"]) for e in subagent_events(s.events)] == [
        ("subagent_start", "0-Boom"), ("subagent_end", "0-Boom")]
    assert subagent_events(s.events)[1]["exitCode"] == 1
    assert details["results"][0]["error"] == "Task crashed: segfault in the model"
    assert worktrees(repo) == [repo]


async def test_a_failed_worktree_setup_emits_nothing_and_hands_the_slot_back(session, task_settings, repo,
                                                                             monkeypatch):
    from pisces.core.task import isolation

    task_settings({"isolation": {"mode": "worktree"}})
    s = session()
    cancelled: list[SpawnRequest] = []
    s.subagents.spawn_cancelled = cancelled.append

    async def broken(*args, **kwargs):
        raise isolation.IsolationError("disk full")

    monkeypatch.setattr(isolation, "snapshot", broken)
    _, details = await run(s, {"agent": "task", "isolated": True, "tasks": one("Nope")})
    assert subagent_events(s.events) == []
    assert details["results"][0]["error"] == "Isolation setup failed: disk full"
    assert [r.id for r in cancelled] == ["0-Nope"]
    assert worktrees(repo) == [repo]


async def test_stale_worktrees_of_a_dead_process_are_swept(session, task_settings, repo, agent_dir):
    from pisces.core.task.isolation import worktrees_home

    task_settings({"isolation": {"mode": "worktree"}})
    home = worktrees_home(agent_dir, repo)
    stale = os.path.join(home, "999999999-0-Old")  # no process has that pid
    git(repo, "worktree", "add", "--detach", stale, "HEAD")
    gone = os.path.join(home, "999999998-0-Gone")  # its directory already deleted, its registration left
    git(repo, "worktree", "add", "--detach", gone, "HEAD")
    shutil.rmtree(gone)
    users = os.path.join(os.path.dirname(repo), "users-own-worktree")  # not ours: never touched, even missing
    git(repo, "worktree", "add", "--detach", users, "HEAD")
    shutil.rmtree(users)
    assert stale in worktrees(repo) and gone in worktrees(repo)
    s = session()
    _, details = await run(s, {"agent": "task", "isolated": True, "tasks": one("New")}, {"New": [submit("ok")]})
    assert details["results"][0]["exitCode"] == 0
    assert worktrees(repo) == [repo, users] and not os.path.exists(stale)


async def test_project_agent_overrides_bundled_only_in_a_trusted_project(session, repo, agent_dir):
    from pisces.ai.providers.faux import SCRIPT
    from pisces.core.config.trust import trust_project

    path = os.path.join(repo, ".pisces", "agents", "explore.md")
    os.makedirs(os.path.dirname(path))
    with open(path, "w") as f:
        f.write("---\nname: explore\ndescription: project scout\ntools: read\n---\nPROJECT SCOUT PROMPT\n")
    for trusted in (False, True):
        if trusted:
            trust_project(repo, agent_dir)  # what `pisces --trust-project` and RPC trust_project save
        SCRIPT.reset()
        s = session()
        _, details = await run(s, {"agent": "explore", "tasks": one(f"Scout{trusted}")},
                               {f"Scout{trusted}": [submit({"summary": "", "files": [], "architecture": ""})]})
        result = details["results"][0]
        system = next(c for c, who in zip(SCRIPT.requests, SCRIPT.requesters, strict=False) if who).systemPrompt
        tools = sorted(t.name for t in next(c for c, who in zip(SCRIPT.requests, SCRIPT.requesters, strict=False) if who).tools)
        if trusted:
            assert result["agentSource"] == "project" and "PROJECT SCOUT PROMPT" in system
            assert tools == ["read", "submit_result"]
            assert details["projectAgentsDir"] == os.path.dirname(path)
        else:
            assert result["agentSource"] == "bundled" and "PROJECT SCOUT PROMPT" not in system
            assert tools == ["find", "grep", "ls", "read", "submit_result"]


async def test_branch_merge_keeps_the_branch_that_does_not_apply(session, task_settings, repo):
    task_settings({"isolation": {"mode": "worktree", "merge": "branch"}})
    s = session()

    def writes(text: str) -> list[dict]:
        return [{"toolCalls": [{"name": "write", "arguments": {"path": "app.txt", "content": text}}]}, submit("ok")]

    text, details = await run(s, {"agent": "task", "isolated": True, "tasks": [
        {"id": "A", "description": "first edit", "assignment": "a"},
        {"id": "B", "description": "second edit", "assignment": "b"}]},
        {"A": writes("from A\n"), "B": writes("from B\n")})
    assert [r["branchName"] for r in details["results"]] == ["pisces/task/0-A", "pisces/task/1-B"]
    assert "Branch merge failed. Merged: pisces/task/0-A.\nFailed: pisces/task/1-B.\nConflict: pisces/task/1-B:" in text
    assert "Unmerged branches remain for manual resolution." in text
    assert git(repo, "branch", "--list", "pisces/*").split() == ["pisces/task/1-B"]  # the merged one is gone
    assert git(repo, "log", "-1", "--format=%s") == "first edit\n"
    assert git(repo, "status", "--porcelain") == ""  # the failed cherry-pick was aborted cleanly
    assert git(repo, "show", "pisces/task/1-B:app.txt") == "from B\n"
    assert worktrees(repo) == [repo]


async def test_a_refused_repair_fails_the_task_without_a_repair_subagent(session, task_settings):
    task_settings({"isolation": {"mode": "worktree"}})
    s = session()
    s.subagents.spawn_gate = lambda r: "Budget exceeded (subagents)" if r.kind == "repair" else None
    _, details = await run(s, {"agent": "task", "isolated": True, "tasks": one("Fix"),
                               "verify": {"commands": [{"name": "no", "command": "exit 1"}], "onFailure": "retry_once"}},
                           {"Fix": [submit("done")]})
    assert [(e["type"], e["id"]) for e in subagent_events(s.events)] == [
        ("subagent_start", "0-Fix"), ("subagent_verification_start", "0-Fix"),
        ("subagent_verification_command_start", "0-Fix"), ("subagent_verification_command_end", "0-Fix"),
        ("subagent_verification_end", "0-Fix"), ("subagent_verification_end", "0-Fix"), ("subagent_end", "0-Fix")]
    ends = [e for e in subagent_events(s.events) if e["type"] == "subagent_verification_end"]
    assert [(e["attempt"], e["status"]) for e in ends] == [(1, "failed"), (2, "budget_exceeded")]  # seed 000's
    r = details["results"][0]
    assert (r["exitCode"], r["error"]) == (1, "Budget exceeded (subagents); repair skipped")
    assert (r["verification"]["status"], r["verification"]["retriesUsed"]) == ("failed", 0)


async def test_abort_during_verification_kills_the_command_and_cleans_up(session, task_settings, repo, tmp_path):
    import asyncio

    from proc_table import _info

    task_settings({"isolation": {"mode": "worktree"}})
    s = session()
    # verification is confined to the worktree and the session's private temp dir: the pid goes there
    pid_file = Path(s.sandbox.temp_dir()) / "check.pid" if s.sandbox is not None else tmp_path / "check.pid"
    started = asyncio.Event()
    s.subscribe(lambda e: started.set() if isinstance(e, dict)
                and e.get("type") == "subagent_verification_command_start" else None)
    from pisces.ai.providers.faux import SCRIPT

    SCRIPT.enqueue(call_task({"agent": "task", "isolated": True, "tasks": one("Hang"), "verify": {"commands": [
        {"name": "hang", "command": f"echo $$ > {pid_file}.tmp; mv {pid_file}.tmp {pid_file}; exec sleep 60"}]}}),
        {"text": "unused"})
    SCRIPT.enqueue_for("Hang", submit("done"))
    run_task = asyncio.ensure_future(s.prompt("go"))
    await asyncio.wait_for(started.wait(), 30)
    for _ in range(1500):
        if pid_file.exists():
            break
        await asyncio.sleep(0.02)
    pid = int(pid_file.read_text())
    await s.abort()
    await asyncio.wait_for(run_task, 30)
    kinds = [(e["type"], e.get("status")) for e in subagent_events(s.events)]
    assert kinds[-2:] == [("subagent_verification_end", "failed"), ("subagent_end", None)]
    assert subagent_events(s.events)[-1]["exitCode"] == 1
    assert _info(pid) is None
    assert worktrees(repo) == [repo]


async def test_subagents_share_the_sessions_file_backend_except_in_a_worktree(faux, repo, task_settings):
    """A mode that serves a session's files (ACP: the editor's buffers) serves its subagents' too; an isolated
    subagent works in a local worktree, which only the local file system has."""
    from pisces.core.session.build import create_agent_session
    from pisces.core.tools.backends import ToolBackends

    class Files:
        def __init__(self) -> None:
            self.written: dict[str, str] = {}

        async def read_text(self, path: str) -> str:
            return self.written.get(path, "")

        async def write_text(self, path: str, content: str) -> None:
            self.written[path] = content

    task_settings({"isolation": {"mode": "worktree"}})
    files = Files()
    s = create_agent_session(cwd=repo, provider="faux", no_session=True, tools=["read", "write", "task"],
                             backends=ToolBackends(files=files))
    s.events = []
    s.subscribe(s.events.append)
    write = {"toolCalls": [{"name": "write", "arguments": {"path": "note.txt", "content": "hello\n"}}]}
    _, details = await run(s, {"agent": "task", "tasks": [
        {"id": "Here", "description": "", "assignment": "a"}]}, {"Here": [write, submit("ok")]})
    assert details["results"][0]["exitCode"] == 0
    assert files.written == {os.path.join(repo, "note.txt"): "hello\n"}
    assert not os.path.exists(os.path.join(repo, "note.txt"))
    _, details = await run(s, {"agent": "task", "isolated": True, "tasks": [
        {"id": "Away", "description": "", "assignment": "a"}]}, {"Away": [write, submit("ok")]})
    assert details["results"][0]["exitCode"] == 0 and len(files.written) == 1
    with open(os.path.join(repo, "note.txt")) as f:  # the worktree's local file, brought back by its patch
        assert f.read() == "hello\n"


async def test_every_subagent_run_goes_through_the_executor_interface(session, monkeypatch):
    """The task tool hands each subagent to ``submit(spec)`` of the executor (core/executor/subagent.py, local
    by default) and reports what the executor returned; an executor name other than local is refused."""
    from pisces.core.executor import subagent

    seen: list[tuple[str, str, str]] = []
    original = subagent.LocalSubagentExecutor.submit

    async def recording(self, spec):
        seen.append((spec.run.task_id, spec.kind, spec.run.agent.name))
        result = await original(self, spec)
        return {**result, "output": result["output"] + " (via the executor)"} if spec.run.raw_id == "B" else result

    monkeypatch.setattr(subagent.LocalSubagentExecutor, "submit", recording)
    s = session()
    _text, details = await run(s, {"agent": "task", "tasks": [
        {"id": "A", "description": "", "assignment": "a"}, {"id": "B", "description": "", "assignment": "b"}]},
        {"A": [submit({"done": "a"})], "B": [submit({"done": "b"})]})
    assert sorted(seen) == [("0-A", "subagent", "task"), ("1-B", "subagent", "task")]
    a, b = details["results"]
    assert json.loads(a["output"]) == {"done": "a"} and b["output"].endswith(" (via the executor)")
    with pytest.raises(ValueError, match="in-process subagent executor is .inprocess."):
        subagent.make_subagent_executor("ray", original)


async def test_progress_shows_the_subagents_recent_output_as_it_streams(session):
    from pisces.agent.types import ToolExecutionUpdateEvent

    s = session()
    reply = {"text": "alpha line\n\nbeta line", **submit("ok")}
    await run(s, {"agent": "task", "tasks": one()}, {"T": [reply]})
    shown = [p["recentOutput"] for e in s.events if isinstance(e, ToolExecutionUpdateEvent) and e.toolName == "task"
             for p in (e.partialResult.details or {}).get("progress", []) if p.get("id") == "0-T"]
    # newest line first, blank lines left out: what a host shows under the running task
    assert ["beta line", "alpha line"] in shown, shown
