"""Plan mode's gate in process, on a real session (docs/planning.md#plan-mode): which calls pass, which are
refused, the plan file matched by its real path (``..`` spellings pass, a symbolic link out is refused), the
approval gate's exemption for exactly that file, and nothing refused once plan mode is off."""

from __future__ import annotations

import os

from pisces.agent.types import ToolCallInfo
from pisces.ai.abort import AbortSignal
from pisces.core.session.build import create_agent_session


def _info(session, name: str, **args: object) -> ToolCallInfo:
    return ToolCallInfo("c1", name, dict(args), session.all_tools.get(name), None, AbortSignal())


async def test_the_gate_lets_reads_and_the_plan_file_through_and_refuses_the_rest(tmp_path, monkeypatch):
    monkeypatch.setenv("PISCES_CODING_AGENT_DIR", str(tmp_path / "agent"))
    repo = tmp_path / "repo"
    repo.mkdir()
    session = create_agent_session(cwd=str(repo), provider="faux", no_session=True)
    assert session.get_state()["planMode"] == {"enabled": False, "planFile": None, "continueIn": "same"}
    plan_mode = session.load_plan_mode()
    state = await plan_mode.set_enabled(True)
    plan = state["planFile"]
    assert plan == os.path.join(os.path.realpath(repo), ".pisces", "plans", os.path.basename(plan))
    rel = os.path.relpath(plan, os.path.realpath(repo))

    async def decision(name: str, **args: object):
        return await plan_mode.before_tool_call(_info(session, name, **args))

    for name, args in (("write", {"path": rel, "content": "x"}), ("edit", {"path": plan, "edits": []}),
                       ("write", {"path": "sub/../" + rel, "content": "x"}), ("read", {"path": "a.txt"}),
                       ("grep", {"pattern": "x"}), ("todo_write", {"ops": []}), ("exit_plan_mode", {"title": "t"})):
        assert await decision(name, **args) is None, name
    for name, args, words in (("write", {"path": rel + ".bak", "content": "x"}, "only the plan file"),
                              ("edit", {"path": "a.txt", "edits": []}, "only the plan file"),
                              ("bash", {"command": "ls"}, "bash is not allowed"),
                              ("task", {"prompt": "x"}, "task is not allowed")):
        refused = await decision(name, **args)
        assert refused is not None and refused.block and words in refused.reason, name
        assert "Plan mode is on" in refused.reason

    # the approval gate lets exactly the plan file through unasked (.pisces is otherwise a protected path)
    assert session.approval.exempt(_info(session, "write", path=rel, content="x")) is True
    assert session.approval.exempt(_info(session, "write", path=".pisces/settings.json", content="{}")) is False
    assert session.approval.exempt(_info(session, "bash", command=f"cat > {rel}")) is False

    # a symbolic link at the plan file's place, leading out of the project: refused
    os.makedirs(os.path.dirname(plan))
    os.symlink(tmp_path / "elsewhere.md", plan)
    refused = await decision("write", path=rel, content="x")
    assert refused is not None and refused.block
    assert session.approval.exempt(_info(session, "write", path=rel, content="x")) is False

    # off: the gate refuses nothing, the exemption is gone, exit_plan_mode leaves the active tools
    await plan_mode.set_enabled(False)
    assert await decision("bash", command="ls") is None
    assert session.approval.exempt(_info(session, "write", path=rel, content="x")) is False
    assert "exit_plan_mode" not in [t.name for t in session.agent.tools]
