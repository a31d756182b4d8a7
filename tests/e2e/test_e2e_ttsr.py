"""Stream rules (TTSR) end to end through the real ``pisces --mode rpc`` (docs/planning.md): a rule file's
regex firing while a reply streams aborts it, emits ``ttsr_triggered{rules}``, injects one
``<system-interrupt>`` per rule and continues; ``ttsr.contextMode`` discard|keep; ``ttsr.repeatMode``
once|after-gap; the fired rules persisted so a resumed session does not fire a ``once`` rule again; tool
scopes with globs; project rules only in a trusted project; and ``pisces rules test``."""

from __future__ import annotations

import json
import os
import subprocess

from e2eproc import PISCES, compact

HANG = 30
NO_VAR = """---
description: Use let or const, never var
ttsrTrigger: '\\bvar\\s+\\w+'
scope: text, tool:write(*.js)
---
Do not declare variables with `var`: use `let` or `const`.
"""


def rule(directory: str, name: str, text: str = NO_VAR) -> str:
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, name + ".md")
    with open(path, "w") as f:
        f.write(text)
    return path


def slow(text: str) -> dict:
    return {"text": text, "chunkSize": 4}


def run(p, message: str = "go") -> list[dict]:
    p.send({"type": "prompt", "message": message})
    return p.until_type("agent_settled", HANG)


def names(frames: list[dict]) -> list[str]:
    return [n for n in compact(frames) if n != "message_update*"]


def context(p) -> list[tuple[str, str]]:
    out = []
    for m in p.ok({"type": "get_messages"})["messages"]:
        c = m.get("content")
        out.append((m["role"], c if isinstance(c, str) else "".join(b.get("text", "") for b in c)))
    return out


def test_a_rule_aborts_injects_and_continues_and_a_resume_remembers_it(home, spawn):
    path = rule(os.path.join(home.agent_dir, "rules"), "no-var")
    script = home.faux_script([slow("Sure. I will write var x = 1; then a long explanation nobody should see."),
                               {"text": "Using let x = 1 instead."}])
    p = spawn("--faux-script", script)
    frames = run(p, "write js")
    seq = names(frames)
    at = seq.index("ttsr_triggered")
    assert seq[at:] == ["ttsr_triggered", "message_end:assistant", "turn_end", "agent_end",
                        "agent_start", "turn_start", "message_start:custom", "message_end:custom",
                        "message_start:assistant", "message_end:assistant", "turn_end", "agent_end", "agent_settled"]
    event = frames[[f.get("type") for f in frames].index("ttsr_triggered")]
    assert [r["name"] for r in event["rules"]] == ["no-var"]
    assert event["rules"][0]["path"] == path and event["rules"][0]["ttsrTrigger"] == "\\bvar\\s+\\w+"
    aborted = [f for f in frames if f["type"] == "message_end" and f["message"]["role"] == "assistant"][0]
    assert aborted["message"]["stopReason"] == "aborted"
    assert "nobody should see" not in aborted["message"]["content"][0]["text"]  # stopped while streaming
    interrupt = f'<system-interrupt reason="rule_violation" rule="no-var" path="{path}">\n' \
                "Do not declare variables with `var`: use `let` or `const`.\n</system-interrupt>"
    # discard (the default): the partial reply left the context; the interrupt is a visible message
    assert context(p) == [("user", "write js"), ("custom", interrupt), ("assistant", "Using let x = 1 instead.")]
    session_file = p.ok({"type": "get_state"})["sessionFile"]
    p.close()

    with open(session_file) as f:
        entries = [json.loads(line) for line in f]
    fired = [e for e in entries if e.get("type") == "custom" and e.get("customType") == "pisces.ttsr"]
    assert len(fired) == 1 and fired[0]["data"]["rules"] == ["no-var"]
    assert any(e.get("type") == "message" and e["message"].get("stopReason") == "aborted" for e in entries)  # kept

    # resumed: a once rule that fired on this branch does not fire again
    q = spawn("--session", session_file, "--faux-script", home.faux_script([slow("ok, var y = 2 here")], "b.json"))
    frames = run(q)
    assert "ttsr_triggered" not in names(frames)
    assert q.ok({"type": "get_last_assistant_text"})["text"] == "ok, var y = 2 here"


def test_keep_mode_and_after_gap(home, spawn):
    rule(os.path.join(home.agent_dir, "rules"), "no-var")
    home.write_json("settings.json", {"ttsr": {"contextMode": "keep", "repeatMode": "after-gap", "repeatGap": 2}})
    script = home.faux_script([slow("first var a = 1 and more"), {"text": "fixed"},
                               slow("second var b = 2 within the gap"),  # 1 reply since: not yet
                               slow("third var c = 3 past the gap and more"), {"text": "fixed again"}])
    p = spawn("--no-session", "--faux-script", script)
    frames = run(p)
    assert names(frames).count("ttsr_triggered") == 1
    ctx = context(p)
    assert ctx[1][0] == "assistant" and ctx[1][1].startswith("first var a")  # keep: the partial reply stays
    assert ctx[2][0] == "custom" and ctx[3] == ("assistant", "fixed")
    assert names(run(p)).count("ttsr_triggered") == 0
    frames = run(p)
    assert names(frames).count("ttsr_triggered") == 1
    assert p.ok({"type": "get_last_assistant_text"})["text"] == "fixed again"


def test_tool_scope_with_a_glob(home, spawn):
    rule(os.path.join(home.agent_dir, "rules"), "no-var")
    write = lambda path: {"toolCalls": [{"name": "write", "arguments": {  # noqa: E731
        "path": path, "content": "var v = 1;\n" + "x" * 40}}], "chunkSize": 6}
    script = home.faux_script([write("a.py"), {"text": "py ok"}, write("a.js"), {"text": "js fixed"}])
    p = spawn("--no-session", "--faux-script", script)
    frames = run(p, "python")
    assert "ttsr_triggered" not in names(frames)
    assert os.path.exists(os.path.join(home.cwd, "a.py"))
    frames = run(p, "javascript")
    assert names(frames).count("ttsr_triggered") == 1
    assert not os.path.exists(os.path.join(home.cwd, "a.js"))  # the aborted call never ran
    assert p.ok({"type": "get_last_assistant_text"})["text"] == "js fixed"


def test_project_rules_need_trust_and_ttsr_can_be_turned_off(home, spawn):
    rule(os.path.join(home.cwd, ".pisces", "rules"), "no-var")
    script = home.faux_script([slow("a var x = 1 here"), slow("b var y = 2 here"), {"text": "fixed"}])
    p = spawn("--no-session", "--faux-script", script)
    assert "ttsr_triggered" not in names(run(p))  # untrusted project: its rules are not read
    p.ok({"type": "trust_project", "trusted": True})
    p.ok({"type": "reload_resources"})
    assert names(run(p)).count("ttsr_triggered") == 1
    p.close()

    home.write_json("settings.json", {"ttsr": {"enabled": False}})
    rule(os.path.join(home.agent_dir, "rules"), "no-var")
    q = spawn("--no-session", "--faux-script", home.faux_script([slow("c var z = 3 here")], "c.json"))
    assert "ttsr_triggered" not in names(run(q))


def _rules_cli(home, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*PISCES, "rules", *args], capture_output=True, text=True, timeout=60, cwd=home.cwd,
                          env=home.env())


def test_pisces_rules_test_and_list(home):
    path = rule(os.path.join(home.agent_dir, "rules"), "no-var")
    rule(os.path.join(home.agent_dir, "rules"), "broken", "---\nttsrTrigger: '(?<=x)y'\n---\nlookbehind\n")
    hit = _rules_cli(home, "test", "no-var", "--text", "let a; var b = 1")
    assert hit.returncode == 0 and "no-var: fires on 'var b'" in hit.stdout
    miss = _rules_cli(home, "test", path, "--text", "let a")
    assert miss.returncode == 1 and "no match" in miss.stdout
    scoped = _rules_cli(home, "test", "no-var", "--scope", "tool:write", "--path", "a.py", "--text", "var b")
    assert scoped.returncode == 1 and "does not look at tool:write" in scoped.stdout
    unknown = _rules_cli(home, "test", "nope", "--text", "x")
    assert unknown.returncode == 2 and "no rule named 'nope'" in unknown.stderr
    listed = _rules_cli(home, "list")
    assert listed.returncode == 0 and listed.stdout.startswith("no-var\t\\bvar\\s+\\w+\ttext,tool:write(*.js)")
    assert "broken.md: RE2 cannot compile" in listed.stderr  # a bad rule is reported, never fatal
