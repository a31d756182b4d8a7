"""AgentSession.prepare_first_prompt: the RPC server's idle warm-up builds the system prompt ahead of the
first prompt, which then uses it as built."""

from __future__ import annotations

from pisces.core.session.build import create_agent_session


def _session(tmp_path):
    cwd = tmp_path / "work"
    cwd.mkdir()
    (cwd / "AGENTS.md").write_text("Project rule: marker-one\n")
    return cwd, create_agent_session(cwd=str(cwd), provider="faux", no_session=True)


async def test_the_first_prompt_uses_the_system_prompt_built_while_idle(tmp_path, faux):
    cwd, session = _session(tmp_path)
    session.prepare_first_prompt()
    # Edited after the warm-up: the session's prompt was already built, as it would be after a first prompt.
    (cwd / "AGENTS.md").write_text("Project rule: marker-two\n")
    faux.enqueue({"text": "ok"})
    await session.prompt("hi")
    await session.agent.wait_for_idle()
    assert len(faux.requests) == 1
    assert "marker-one" in faux.requests[0].systemPrompt
    assert "marker-two" not in faux.requests[0].systemPrompt


async def test_without_the_warm_up_the_prompt_is_built_at_the_first_request(tmp_path, faux):
    cwd, session = _session(tmp_path)
    (cwd / "AGENTS.md").write_text("Project rule: marker-two\n")
    faux.enqueue({"text": "ok"})
    await session.prompt("hi")
    await session.agent.wait_for_idle()
    assert "marker-two" in faux.requests[0].systemPrompt


def test_a_failing_build_is_left_for_the_prompt_to_report(tmp_path, faux):
    _, session = _session(tmp_path)

    calls: list[int] = []

    def broken() -> str:
        calls.append(1)
        raise OSError("AGENTS.md vanished")

    session.agent.system_prompt = broken
    assert session.prepare_first_prompt() is None  # tried, and did not raise
    assert calls == [1]
