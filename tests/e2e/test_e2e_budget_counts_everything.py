"""Every request the session makes on the user's behalf counts toward its budget, and a stop says which limit
stopped it: a compaction's summary, the tool calls of subagents, no retry once the budget is spent, and -p."""

from __future__ import annotations

import subprocess
import sys

from taskkit import call_task, run_prompt, script, start, submit
from test_e2e_budget import PRICED, PRICED_ARGS, budget_settings, text


def test_a_compaction_summary_is_counted(home, spawn):
    home.write_json("models.json", PRICED)
    budget_settings(home, {"maxCostUsd": 1000})
    p = spawn("--no-session", *PRICED_ARGS, "--faux-script", home.faux_script([
        text("first answer", 100, 10), text("second answer", 100, 10),
        {"text": "the summary of it all", "usage": {"input": 500, "output": 100}}]))
    run_prompt(p, "q1")
    run_prompt(p, "q2")
    before = p.ok({"type": "get_state"})["budget"]
    assert "summary" in p.ok({"type": "compact"}, 60)
    after = p.ok({"type": "get_state"})["budget"]
    assert before["costUsd"] == 0.24
    assert after["costUsd"] == 0.24 + 0.7  # the summary request: $0.50 input + $0.20 output
    assert after["inputTokens"] - before["inputTokens"] == 500


def test_tool_calls_of_subagents_count_in_the_parents_max_tool_calls(home, spawn):
    budget_settings(home, {"maxToolCalls": 3})
    bash = {"toolCalls": [{"name": "bash", "arguments": {"command": "echo sub"}}]}
    p = start(spawn, home, "--no-session", "--faux-script", script(home, [
        call_task({"agent": "task", "tasks": [{"id": "Sub", "description": "s", "assignment": "work"}]}),
        {"text": "parent done"}], {"Sub": [bash, bash, submit("done")]}))
    frames = run_prompt(p)
    state = p.ok({"type": "get_state"})["budget"]
    # the parent's task call, the subagent's two bash calls and its submit_result
    assert state["toolCalls"] == 4 and state["status"] == "exceeded"
    exceeded = [f for f in frames if f.get("type") == "budget_exceeded"]
    assert exceeded and exceeded[0]["snapshot"]["reason"] == "tool_calls"


def test_no_retry_starts_once_the_budget_is_spent(home, spawn):
    home.write_json("models.json", PRICED)
    home.write_json("settings.json", {"task": {"budget": {"maxCostUsd": 0.1}},
                                      "retry": {"enabled": True, "baseDelayMs": 10}})
    p = spawn("--no-session", *PRICED_ARGS, "--faux-script", home.faux_script([
        {"text": "costly and then", "usage": {"input": 100, "output": 10}, "error": "503 overloaded"},
        text("the retry's answer", 10, 10)]))
    frames = run_prompt(p)
    kinds = [f["type"] for f in frames]
    assert "budget_exceeded" in kinds
    assert "auto_retry_start" not in kinds, "a retry is a new request: none starts past the budget"
    assert not [f for f in frames if f.get("type") == "auto_retry_end" and f.get("success")]
    assert "the retry's answer" not in str(p.ok({"type": "get_messages"}))


def test_print_mode_names_the_limit_that_stopped_it(home):
    budget_settings(home, {"maxToolCalls": 1, "abortOnExceeded": True})
    script_path = home.faux_script([{"toolCalls": [{"name": "bash", "arguments": {"command": "echo 1"}}]},
                                    {"toolCalls": [{"name": "bash", "arguments": {"command": "echo 2"}}]},
                                    {"text": "never"}])
    done = subprocess.run([sys.executable, "-m", "pisces", "-p", "--no-session", "--faux-script", script_path, "go"],
                          cwd=home.cwd, env=home.env(), capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 1
    assert "pisces: budget exceeded: maxToolCalls 1 (spent 2)" in done.stderr
    assert done.stderr.rstrip().endswith("pisces: stopped by the budget: maxToolCalls 1 (spent 2)"), done.stderr
