"""Skills: SKILL.md discovery and front matter, the system prompt section, /skill:name expansion, commands."""

from __future__ import annotations

import os

from pisces.core.resources.skills import format_skills_for_prompt, load_skills, parse_frontmatter
from pisces.core.session.build import create_agent_session


def skill(root, name, description="Does a thing", extra="", body="Body text.\n"):
    d = root / name
    d.mkdir(parents=True, exist_ok=True)
    desc = f"description: {description}\n" if description is not None else ""
    (d / "SKILL.md").write_text(f"---\nname: {name}\n{desc}{extra}---\n{body}")
    return d / "SKILL.md"


def test_frontmatter_values():
    meta, body = parse_frontmatter("---\nname: x\ndescription: 'quoted: yes'\nflag: true\n---\n\nhello\n")
    assert meta == {"name": "x", "description": "quoted: yes", "flag": True}
    assert body == "\nhello\n"


def test_discovery_order_first_name_wins_and_rules(tmp_path, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    agent = tmp_path / "agent"
    cwd = tmp_path / "repo" / "sub"
    (tmp_path / "repo" / ".git").mkdir(parents=True)
    cwd.mkdir()
    skill(cwd / ".pisces" / "skills", "shared", "project version")
    skill(agent / "skills", "shared", "user version")
    skill(agent / "skills" / "nested" / "deeper", "deep")
    skill(tmp_path / "repo" / ".agents" / "skills", "ancestor")
    skill(tmp_path / ".agents" / "skills", "above-git-root")  # beyond the git root: not searched
    skill(agent / "skills", "nodesc", description=None)  # no description: not loaded
    (agent / "skills" / "loose.md").write_text("---\ndescription: a root file\n---\nx\n")
    skill(home / ".agents" / "skills", "global-agents")
    skills = load_skills(str(cwd), agent_dir=str(agent))
    assert [(s.name, s.scope) for s in skills] == [
        ("shared", "project"), ("ancestor", "project"), ("skills", "user"), ("deep", "user"),
        ("global-agents", "user")]
    assert [s.description for s in skills][0] == "project version"
    assert load_skills(str(cwd), agent_dir=str(agent), defaults=False) == []
    extra = load_skills(str(cwd), agent_dir=str(agent), defaults=False, paths=[str(agent / "skills" / "shared")])
    assert [s.name for s in extra] == ["shared"]


def test_prompt_section_lists_visible_skills_as_pi():
    from pisces.core.resources.skills import Skill

    skills = [Skill("a&b", "Uses <tags>", "/s/a/SKILL.md", "user", False),
              Skill("hidden", "x", "/s/h/SKILL.md", "user", True)]
    text = format_skills_for_prompt(skills)
    assert text.startswith("\n\nThe following skills provide specialized instructions for specific tasks.\n")
    assert "<name>a&amp;b</name>" in text and "<description>Uses &lt;tags&gt;</description>" in text
    assert "hidden" not in text and text.endswith("</available_skills>")
    assert format_skills_for_prompt([skills[1]]) == ""


async def test_skill_commands_expansion_and_system_prompt(tmp_path, faux, monkeypatch):
    cwd = tmp_path / "work"
    path = skill(cwd / ".pisces" / "skills", "deploy", "Deploys the app", body="Run make deploy.\n")
    session = create_agent_session(cwd=str(cwd), provider="faux", no_session=True)
    cmds = [c for c in session.commands() if c["source"] == "skill"]
    assert cmds == [{"name": "skill:deploy", "description": "Deploys the app", "source": "skill",
                     "sourceInfo": {"path": str(path), "source": "local", "scope": "project",
                                    "origin": "top-level", "baseDir": os.path.dirname(path)},
                     "location": "project", "path": str(path)}]
    faux.enqueue({"text": "ok"}, {"text": "ok"})
    await session.prompt("/skill:deploy to staging")
    sent = faux.requests[0].messages[0].content[0].text
    assert sent == (f'<skill name="deploy" location="{path}">\nReferences are relative to {os.path.dirname(path)}.'
                    f"\n\nRun make deploy.\n</skill>\n\nto staging")
    assert "<name>deploy</name>" in faux.requests[0].systemPrompt
    await session.prompt("/skill:unknown stays")
    assert faux.requests[1].messages[-1].content[0].text == "/skill:unknown stays"


def test_no_skills_and_extra_paths(tmp_path, faux):
    cwd = tmp_path / "work"
    skill(cwd / ".pisces" / "skills", "found")
    extra = skill(tmp_path / "elsewhere", "given")
    session = create_agent_session(cwd=str(cwd), provider="faux", no_session=True, no_skills=True,
                                   skill_paths=[str(extra)])
    assert [c["name"] for c in session.commands() if c["source"] == "skill"] == ["skill:given"]


def test_a_skill_file_that_is_too_large_or_not_regular_is_skipped(tmp_path, monkeypatch):
    from pisces.core.safe_open import TEXT_MAX_BYTES

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    agent = tmp_path / "agent"
    skill(agent / "skills", "fine")
    skill(agent / "skills", "huge", body="x" * (TEXT_MAX_BYTES + 1))
    (agent / "skills" / "fifo").mkdir()
    os.mkfifo(agent / "skills" / "fifo" / "SKILL.md")  # opened, it would block the loader forever
    skills = load_skills(str(tmp_path), agent_dir=str(agent))
    assert [s.name for s in skills] == ["fine"]


def test_skills_of_a_parent_directory_are_not_read_outside_a_repository(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    skill(tmp_path / ".agents" / "skills", "planted")  # a shared parent, no repository anywhere
    cwd = tmp_path / "work"
    skill(cwd / ".agents" / "skills", "own")
    names = {s.name for s in load_skills(str(cwd), agent_dir=str(tmp_path / "agent"))}
    assert "own" in names and "planted" not in names
