"""Agent definitions: the front matter subset, the bundled agents, and discovery with its precedence (project
over user over bundled, pisces over pi over Claude) and the project trust rule."""

from __future__ import annotations

import os

import pytest

from pisces.core.task import agents
from pisces.core.task.agents import AgentParseError, discover_agents, parse_agent
from pisces.core.task.frontmatter import FrontmatterError, parse_frontmatter


def write(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def agent_md(name: str, description: str = "does things", extra: str = "", body: str = "Be useful.") -> str:
    return f"---\nname: {name}\ndescription: {description}\n{extra}---\n{body}\n"


def test_front_matter_subset():
    meta, body = parse_frontmatter(
        "---\nname: scout  # trailing comment\ndescription: \"Reads: never writes\"\ntools: [read, 'grep']\n"
        "n: 3\nratio: 0.5\nflag: true\nnothing: ~\nnested:\n  list:\n    - a\n    - b: 1\n      c: two\n"
        "  inline: {x: 1, y: [p, q]}\nblock: |\n  line one\n  line two\n---\nThe body.\n")
    assert meta == {"name": "scout", "description": "Reads: never writes", "tools": ["read", "grep"], "n": 3,
                    "ratio": 0.5, "flag": True, "nothing": None,
                    "nested": {"list": ["a", {"b": 1, "c": "two"}], "inline": {"x": 1, "y": ["p", "q"]}},
                    "block": "line one\nline two"}
    assert body == "The body.\n"
    assert parse_frontmatter("no front matter\n") == ({}, "no front matter\n")
    with pytest.raises(FrontmatterError, match="never closed"):
        parse_frontmatter("---\nname: x\n")
    with pytest.raises(FrontmatterError, match="line 2"):
        parse_frontmatter("---\nname: x\n  - stray\n---\n")


def test_parse_agent_fields():
    a = parse_agent(agent_md("worker", extra="tools: Read, bash, task\nmodel: anthropic/claude-haiku*, gpt-5-mini\n"
                                            "thinking-level: med\nblocking: true\n"), "user", "/x/worker.md")
    assert (a.name, a.tools, a.spawns, a.model, a.thinking_level, a.blocking, a.source) == (
        "worker", ["read", "bash", "task"], "*", ["anthropic/claude-haiku*", "gpt-5-mini"], "medium", True, "user")
    assert a.system_prompt == "Be useful."
    b = parse_agent(agent_md("lead", extra="spawns: explore, plan\nthinkingLevel: high\n"), "project")
    assert (b.tools, b.spawns, b.thinking_level) == (None, ["explore", "plan"], "high")
    with pytest.raises(AgentParseError, match="needs a 'name'"):
        parse_agent("---\ndescription: x\n---\nbody", "user", "/a.md")
    with pytest.raises(AgentParseError, match="needs a 'description'"):
        parse_agent("---\nname: x\n---\nbody", "user", "/a.md")
    with pytest.raises(AgentParseError, match="unknown thinking level"):
        parse_agent(agent_md("x", extra="thinking: lots\n"), "user")


def test_bundled_agents():
    bundled = {a.name: a for a in agents.bundled_agents()}
    assert {"task", "quick_task", "explore", "plan", "reviewer"} <= set(bundled)
    assert bundled["task"].spawns == "*" and bundled["task"].tools is None
    assert bundled["explore"].tools == ["read", "grep", "find", "ls"]
    assert set(bundled["explore"].output["properties"]) == {"summary", "files", "architecture"}
    assert bundled["plan"].spawns == ["explore"] and bundled["plan"].thinking_level == "high"
    assert bundled["reviewer"].blocking and "findings" in bundled["reviewer"].output["optionalProperties"]
    assert all(a.source == "bundled" and a.system_prompt for a in bundled.values())


def test_discovery_precedence_and_trust(tmp_path, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    agent_dir = str(home / ".pisces" / "agent")
    project = str(tmp_path / "proj")
    cwd = os.path.join(project, "src", "deep")
    os.makedirs(cwd)
    os.makedirs(os.path.join(project, ".git"))  # the project root: discovery walks up to it
    write(os.path.join(agent_dir, "agents", "explore.md"), agent_md("explore", "user explore"))
    write(os.path.join(agent_dir, "agents", "mine.md"), agent_md("mine", "user only"))
    write(str(home / ".pi" / "agent" / "agents" / "mine.md"), agent_md("mine", "pi user, shadowed"))
    write(str(home / ".claude" / "agents" / "helper.md"), agent_md("helper", "claude user"))
    write(os.path.join(project, ".pisces", "agents", "explore.md"), agent_md("explore", "project explore"))
    write(os.path.join(project, ".pi", "agents", "plan.md"), agent_md("plan", "pi project plan"))
    write(os.path.join(project, ".pisces", "agents", "broken.md"), "---\nname: broken\n---\nno description\n")

    trusted = discover_agents(cwd, agent_dir, project_trusted=True)
    found = {a.name: (a.description, a.source) for a in trusted.agents}
    assert found["explore"] == ("project explore", "project")
    assert found["plan"] == ("pi project plan", "project")
    assert found["mine"] == ("user only", "user")
    assert found["helper"] == ("claude user", "user")
    assert found["task"][1] == "bundled" and "broken" not in found
    assert trusted.project_agents_dir == os.path.join(project, ".pisces", "agents")

    untrusted = discover_agents(cwd, agent_dir, project_trusted=False)
    found = {a.name: (a.description, a.source) for a in untrusted.agents}
    assert found["explore"] == ("user explore", "user")  # the project's definition is ignored
    assert found["plan"][1] == "bundled"
    assert untrusted.project_agents_dir is None
    assert sorted(untrusted.skipped_untrusted) == sorted([os.path.join(project, ".pisces", "agents"),
                                                          os.path.join(project, ".pi", "agents")])


def test_trust_comes_from_the_shared_trust_module(tmp_path):
    """Interface 1: the project trust of ``pisces.core.config.trust`` (trust.json) decides."""
    from pisces.core.config.trust import trust_project

    agent_dir, project = str(tmp_path / "agent"), str(tmp_path / "proj")
    os.makedirs(agent_dir)
    os.makedirs(project)
    assert agents.is_project_trusted(project, agent_dir) is False
    trust_project(project, agent_dir)
    assert agents.is_project_trusted(project, agent_dir) is True


def test_discovery_stops_at_the_project_root(tmp_path, monkeypatch):
    """A ``task.md`` planted in a shared parent (the system temp directory) replaces no project's agent."""
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    agent_dir = str(home / ".pisces" / "agent")
    shared = tmp_path / "shared"
    for family in (".claude", ".pi", ".pisces"):
        write(str(shared / family / "agents" / "task.md"), agent_md("task", f"planted {family}"))
    repo = shared / "repo"
    os.makedirs(repo / ".git")
    cwd = repo / "sub"
    os.makedirs(cwd)
    plain = shared / "plain"  # no repository: the root is the working directory itself
    os.makedirs(plain)
    for where in (str(cwd), str(repo), str(plain)):
        found = {a.name: a for a in discover_agents(where, agent_dir, project_trusted=True).agents}
        assert found["task"].source == "bundled", where
    write(str(repo / ".claude" / "agents" / "task.md"), agent_md("task", "the repository's own"))
    found = {a.name: a for a in discover_agents(str(cwd), agent_dir, project_trusted=True).agents}
    assert found["task"].description == "the repository's own"


def test_a_world_writable_parent_is_never_the_project_root(tmp_path, monkeypatch):
    """Planting ``.git`` next to ``.claude/agents`` in a shared directory (mode 1777, like /tmp) does not make
    it the root of the projects below."""
    from pisces.core.config.paths import project_root

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    shared = tmp_path / "shared"
    os.makedirs(shared / ".git")
    write(str(shared / ".claude" / "agents" / "task.md"), agent_md("task", "planted"))
    os.chmod(shared, 0o1777)
    cwd = shared / "proj"
    os.makedirs(cwd)
    assert project_root(str(cwd)) == str(cwd)
    found = {a.name: a for a in discover_agents(str(cwd), str(tmp_path / "agent"), project_trusted=True).agents}
    assert found["task"].source == "bundled"
