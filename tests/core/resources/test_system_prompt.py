import datetime as dt
import os

import pytest

from pisces.core.resources.system_prompt import build_system_prompt, default_guidelines, load_context_files

TOOLS = [("read", "Read file contents"), ("bash", "Run shell commands"), ("edit", "Edit files"),
         ("write", "Write files")]
DAY = dt.date(2026, 3, 4)


def put(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


@pytest.fixture
def tree(tmp_path):
    """tmp/agent (global dir) and tmp/repo/pkg/sub (cwd)."""
    agent = tmp_path / "agent"
    agent.mkdir()
    cwd = tmp_path / "repo" / "pkg" / "sub"
    cwd.mkdir(parents=True)
    (tmp_path / "repo" / ".git").mkdir()  # repo is the project root: discovery goes no higher
    return str(tmp_path), str(agent), str(cwd)


# -- context files ---------------------------------------------------------------------------------
def test_context_files_global_then_root_to_cwd(tree):
    root, agent, cwd = tree
    put(f"{root}/AGENTS.md", "planted in a shared parent")
    put(f"{agent}/AGENTS.md", "global rules")
    put(f"{root}/repo/CLAUDE.md", "repo rules")
    put(f"{root}/repo/pkg/AGENTS.md", "pkg rules")
    put(f"{cwd}/AGENTS.md", "sub rules")
    files = load_context_files(cwd, agent)
    assert files == [
        (f"{agent}/AGENTS.md", "global rules"),
        (f"{root}/repo/CLAUDE.md", "repo rules"),
        (f"{root}/repo/pkg/AGENTS.md", "pkg rules"),
        (f"{cwd}/AGENTS.md", "sub rules"),
    ]


def test_context_files_outside_a_repository_are_read_from_cwd_only(tree):
    root, agent, cwd = tree
    os.rmdir(f"{root}/repo/.git")
    put(f"{root}/repo/AGENTS.md", "a parent that is no project root")
    put(f"{cwd}/AGENTS.md", "sub rules")
    assert load_context_files(cwd, agent) == [(f"{cwd}/AGENTS.md", "sub rules")]


def test_agents_md_preferred_over_claude_md(tree):
    root, agent, cwd = tree
    put(f"{cwd}/AGENTS.md", "a")
    put(f"{cwd}/CLAUDE.md", "c")
    put(f"{agent}/CLAUDE.md", "global claude")
    assert load_context_files(cwd, agent) == [(f"{agent}/CLAUDE.md", "global claude"), (f"{cwd}/AGENTS.md", "a")]


def test_no_context_files(tree):
    _, agent, cwd = tree
    assert load_context_files(cwd, agent) == []


def test_agent_dir_inside_tree_is_not_listed_twice(tree):
    root, _, cwd = tree
    agent = f"{root}/repo"
    put(f"{agent}/AGENTS.md", "once")
    assert load_context_files(cwd, agent) == [(f"{agent}/AGENTS.md", "once")]


def test_relative_cwd(tree, monkeypatch):
    root, agent, cwd = tree
    put(f"{cwd}/AGENTS.md", "x")
    monkeypatch.chdir(f"{root}/repo")
    assert load_context_files("pkg/sub", agent) == [(f"{cwd}/AGENTS.md", "x")]


def test_directory_named_agents_md_is_skipped(tree):
    _, agent, cwd = tree
    os.makedirs(f"{cwd}/AGENTS.md")
    put(f"{cwd}/CLAUDE.md", "claude")
    assert load_context_files(cwd, agent) == [(f"{cwd}/CLAUDE.md", "claude")]


# -- the prompt ------------------------------------------------------------------------------------
def test_base_prompt_structure(tree):
    _, agent, cwd = tree
    p = build_system_prompt(cwd, tools=TOOLS, guidelines=["Do X first"], agent_dir=agent, now=DAY)
    assert "pisces" in p.split("\n")[0]
    assert "Available tools:\n- read: Read file contents\n- bash: Run shell commands\n- edit: Edit files\n" \
           "- write: Write files\n" in p
    assert "Guidelines:\n- Do X first\n- Be concise in your responses\n" \
           "- Show file paths clearly when working with files" in p
    assert "# Project Context" not in p
    assert p.endswith(f"\nCurrent date: 2026-03-04\nCurrent working directory: {cwd}")
    assert "pi" not in p.split()  # our own prompt, not pi's


def test_no_tools(tree):
    _, agent, cwd = tree
    p = build_system_prompt(cwd, tools=[], guidelines=[], agent_dir=agent, now=DAY)
    assert "Available tools:\n(none)\n" in p


def test_default_guidelines_follow_tools(tree):
    _, agent, cwd = tree
    g = default_guidelines(["read", "bash", "edit", "write"])
    assert any("bash" in x and "rg" in x for x in g)
    g2 = default_guidelines(["bash", "grep"])
    assert any("grep/find/ls" in x for x in g2)
    assert default_guidelines([]) == []
    p = build_system_prompt(cwd, tools=TOOLS, agent_dir=agent, now=DAY)  # guidelines=None: derived
    for line in g:
        assert f"- {line}\n" in p


def test_guidelines_deduplicated_and_stripped(tree):
    _, agent, cwd = tree
    p = build_system_prompt(cwd, tools=TOOLS, guidelines=["  A  ", "A", "", "Be concise in your responses"],
                            agent_dir=agent, now=DAY)
    assert p.count("- A\n") == 1
    assert p.count("Be concise in your responses") == 1


def test_context_files_in_prompt(tree):
    root, agent, cwd = tree
    put(f"{agent}/AGENTS.md", "G")
    put(f"{root}/repo/AGENTS.md", "R")
    p = build_system_prompt(cwd, tools=TOOLS, guidelines=[], agent_dir=agent, now=DAY)
    section = p[p.index("# Project Context"):]
    assert f"## {agent}/AGENTS.md\n\nG\n\n## {root}/repo/AGENTS.md\n\nR\n\n\nCurrent date: 2026-03-04" in section


def test_context_files_disabled_or_given(tree):
    root, agent, cwd = tree
    put(f"{cwd}/AGENTS.md", "secret")
    assert "secret" not in build_system_prompt(cwd, tools=TOOLS, agent_dir=agent, context_files=False, now=DAY)
    p = build_system_prompt(cwd, tools=TOOLS, agent_dir=agent, context_files=[("/x/AGENTS.md", "given")], now=DAY)
    assert "## /x/AGENTS.md\n\ngiven" in p and "secret" not in p


def test_project_system_md_replaces_base(tree):
    _, agent, cwd = tree
    put(f"{agent}/SYSTEM.md", "GLOBAL SYSTEM")
    put(f"{cwd}/.pisces/SYSTEM.md", "PROJECT SYSTEM")
    put(f"{cwd}/AGENTS.md", "ctx")
    p = build_system_prompt(cwd, tools=TOOLS, agent_dir=agent, now=DAY)
    assert p.startswith("PROJECT SYSTEM\n\n# Project Context")
    assert "GLOBAL" not in p and "Available tools" not in p
    assert "ctx" in p and p.endswith(f"Current working directory: {cwd}")


def test_global_system_md(tree):
    _, agent, cwd = tree
    put(f"{agent}/SYSTEM.md", "GLOBAL SYSTEM")
    assert build_system_prompt(cwd, tools=TOOLS, agent_dir=agent, now=DAY).startswith(
        "GLOBAL SYSTEM\nCurrent date: 2026-03-04")


def test_append_system_md(tree):
    _, agent, cwd = tree
    put(f"{agent}/APPEND_SYSTEM.md", "GLOBAL APPEND")
    p = build_system_prompt(cwd, tools=TOOLS, agent_dir=agent, now=DAY)
    assert "Available tools" in p and "\n\nGLOBAL APPEND\nCurrent date" in p
    put(f"{cwd}/.pisces/APPEND_SYSTEM.md", "PROJECT APPEND")
    p = build_system_prompt(cwd, tools=TOOLS, agent_dir=agent, now=DAY)
    assert "PROJECT APPEND" in p and "GLOBAL APPEND" not in p


def test_append_comes_before_context(tree):
    _, agent, cwd = tree
    put(f"{cwd}/AGENTS.md", "ctx")
    p = build_system_prompt(cwd, tools=TOOLS, agent_dir=agent, append="EXTRA", now=DAY)
    assert p.index("EXTRA") < p.index("# Project Context")


def test_cli_prompts_win_over_files_and_may_be_paths(tree):
    root, agent, cwd = tree
    put(f"{agent}/SYSTEM.md", "FILE SYSTEM")
    put(f"{agent}/APPEND_SYSTEM.md", "FILE APPEND")
    p = build_system_prompt(cwd, tools=TOOLS, agent_dir=agent, custom_prompt="CLI SYSTEM", append="CLI APPEND",
                            now=DAY)
    assert p.startswith("CLI SYSTEM\n\nCLI APPEND\nCurrent date")
    put(f"{root}/mine.md", "FROM PATH")
    p = build_system_prompt(cwd, tools=TOOLS, agent_dir=agent, custom_prompt=f"{root}/mine.md", now=DAY)
    assert p.startswith("FROM PATH\n\nFILE APPEND")


def test_date_defaults_to_today_utc(tree):
    _, agent, cwd = tree
    p = build_system_prompt(cwd, tools=TOOLS, agent_dir=agent)
    assert f"Current date: {dt.datetime.now(dt.timezone.utc).date().isoformat()}" in p


def test_aware_datetime_converted_to_utc(tree):
    _, agent, cwd = tree
    late = dt.datetime(2026, 3, 4, 23, 30, tzinfo=dt.timezone(dt.timedelta(hours=-5)))
    assert "Current date: 2026-03-05" in build_system_prompt(cwd, tools=TOOLS, agent_dir=agent, now=late)


def test_uses_env_agent_dir_by_default(tree, monkeypatch):
    _, agent, cwd = tree
    monkeypatch.setenv("PISCES_CODING_AGENT_DIR", agent)
    put(f"{agent}/AGENTS.md", "from env dir")
    assert "from env dir" in build_system_prompt(cwd, tools=TOOLS, now=DAY)
