"""Rule files without a session: frontmatter keys (ttsrTrigger, condition, scope, globs, name), scopes with
tools and globs, RE2's refusals reported per file, the bounded window, project rules only when trusted."""

from __future__ import annotations

import os

import pytest

from pisces.core.planning.rules import WINDOW, Rule, load_rule, load_rules, parse_scope, rule_dirs


def write(path: str, text: str) -> str:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    return path


def test_frontmatter_keys(tmp_path):
    r = load_rule(write(str(tmp_path / "a.md"), "---\nname: custom\ncondition: 'TODO\\('\n"
                        "scope: [thinking, tool:edit(*.{ts,js}), tool:bash]\n---\nNo TODO( calls.\n"))
    assert (r.name, r.trigger, r.body) == ("custom", "TODO\\(", "No TODO( calls.")
    assert [repr(s) for s in r.scopes] == ["thinking", "tool:edit(*.{ts,js})", "tool:bash"]
    assert load_rule(write(str(tmp_path / "plain.md"), "---\ndescription: x\n---\nbody\n")) is None  # no trigger


def test_scope_matching():
    rule = Rule("r", "x", parse_scope("text, tool:write(*.js)", []), "b", "p")
    assert rule.applies("text") and not rule.applies("thinking")
    assert rule.applies("tool", "write", "src/a.js") and not rule.applies("tool", "write", "a.py")
    assert not rule.applies("tool", "edit", "a.js") and not rule.applies("tool", "write", None)
    anytool = Rule("r", "x", parse_scope(None, ["*.md"]), "b", "p")  # default scope, globs applied to tools
    assert anytool.applies("text") and anytool.applies("tool", "edit", "docs/x.md")
    assert not anytool.applies("tool", "edit", "x.py")
    with pytest.raises(ValueError, match="unknown scope"):
        parse_scope("prose", [])


def test_window_is_bounded():
    rule = Rule("r", "^start", parse_scope("text", []), "b", "p")
    assert rule.matches("start" + "x" * 10)
    assert not rule.matches("start" + "x" * WINDOW)  # only the last WINDOW characters are searched


def test_load_rules_reports_bad_files_and_needs_trust(tmp_path):
    agent, cwd = str(tmp_path / "agent"), str(tmp_path / "work")
    write(os.path.join(agent, "rules", "one.md"), "---\nttsrTrigger: one\n---\nuser\n")
    write(os.path.join(agent, "rules", "bad.md"), "---\nttsrTrigger: '(?=x)'\n---\nlookahead\n")
    write(os.path.join(cwd, ".pisces", "rules", "one.md"), "---\nttsrTrigger: uno\n---\nproject\n")
    rules, errors = load_rules(rule_dirs(agent, cwd, project_trusted=False))
    assert [(r.name, r.body) for r in rules] == [("one", "user")]
    assert len(errors) == 1 and "bad.md: RE2 cannot compile" in errors[0]
    rules, _ = load_rules(rule_dirs(agent, cwd, project_trusted=True))
    assert [(r.name, r.body) for r in rules] == [("one", "project")]  # the project's rule of the same name wins
