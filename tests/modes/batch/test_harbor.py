"""The Harbor adapter: its run command executed here as Harbor would run it in a task's environment, and the
ATIF trajectory it leaves checked against the format's rules (ATIF-v1.4: required fields, sequential step ids,
observations that answer the step's own tool calls). Harbor itself needs Python 3.12 and Docker, which this
project's machines do not have, so the trial loop is not run."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import jsonschema
import pytest
from test_batch_e2e import make_repo, write_script

from pisces.modes.batch.harbor import atif_from_session, install_script, run_command

_STEP = {
    "type": "object",
    "required": ["step_id", "source", "message"],
    "properties": {
        "step_id": {"type": "integer", "minimum": 1},
        "timestamp": {"type": "string", "pattern": r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$"},
        "source": {"enum": ["system", "user", "agent"]},
        "model_name": {"type": "string"},
        "message": {"type": "string"},
        "reasoning_content": {"type": "string"},
        "tool_calls": {"type": "array", "items": {
            "type": "object", "required": ["tool_call_id", "function_name", "arguments"],
            "properties": {"tool_call_id": {"type": "string"}, "function_name": {"type": "string"},
                           "arguments": {"type": "object"}}, "additionalProperties": False}},
        "observation": {"type": "object", "required": ["results"], "properties": {"results": {
            "type": "array", "items": {"type": "object", "properties": {
                "source_call_id": {"type": "string"}, "content": {"type": "string"}}}}}},
        "metrics": {"type": "object", "properties": {
            "prompt_tokens": {"type": "integer"}, "completion_tokens": {"type": "integer"},
            "cached_tokens": {"type": "integer"}, "cost_usd": {"type": "number"}, "extra": {"type": "object"}},
            "additionalProperties": False},
        "extra": {"type": "object"},
    },
    "additionalProperties": False,
}
ATIF_SCHEMA = {
    "type": "object",
    "required": ["schema_version", "session_id", "agent", "steps"],
    "properties": {
        "schema_version": {"const": "ATIF-v1.4"},
        "session_id": {"type": "string"},
        "agent": {"type": "object", "required": ["name", "version"], "properties": {
            "name": {"type": "string"}, "version": {"type": "string"}, "model_name": {"type": "string"},
            "extra": {"type": "object"}}, "additionalProperties": False},
        "steps": {"type": "array", "items": _STEP},
        "notes": {"type": "string"},
        "final_metrics": {"type": "object", "properties": {
            "total_prompt_tokens": {"type": "integer"}, "total_completion_tokens": {"type": "integer"},
            "total_cached_tokens": {"type": "integer"}, "total_cost_usd": {"type": "number"},
            "total_steps": {"type": "integer"}, "extra": {"type": "object"}}, "additionalProperties": False},
        "extra": {"type": "object"},
    },
    "additionalProperties": False,
}


def check_atif(doc: dict) -> None:
    jsonschema.validate(doc, ATIF_SCHEMA)
    assert [s["step_id"] for s in doc["steps"]] == list(range(1, len(doc["steps"]) + 1))
    for step in doc["steps"]:
        calls = {c["tool_call_id"] for c in step.get("tool_calls", [])}
        for result in step.get("observation", {}).get("results", []):
            if "source_call_id" in result:
                assert result["source_call_id"] in calls, "an observation answers a call of its own step"
        if step["source"] != "agent":
            assert not {"tool_calls", "metrics", "reasoning_content", "model_name"} & set(step)
    assert doc["final_metrics"]["total_steps"] == len(doc["steps"])


def test_the_run_command_leaves_a_valid_trajectory(tmp_path):
    repo = make_repo(tmp_path / "task", {"README": "a task\n"})
    script = write_script(tmp_path / "faux.json", [
        {"thinking": "Look first.", "toolCalls": [{"name": "bash", "arguments": {"command": "ls"}}]},
        {"toolCalls": [{"name": "write", "arguments": {"path": "hello.txt", "content": "Hello, world!\n"}}]},
        {"text": "Created hello.txt."}])
    logs = tmp_path / "logs"
    command = run_command("Create hello.txt", provider="faux", log_dir=str(logs),
                          extra_flags=["--faux-script", script])
    env = {**os.environ, "PATH": f"{os.path.dirname(sys.executable)}:{os.environ['PATH']}"}
    done = subprocess.run(["sh", "-c", command], cwd=repo, env=env, capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "task" / "hello.txt").read_text() == "Hello, world!\n"
    doc = json.loads((logs / "trajectory.json").read_text())
    check_atif(doc)
    sources = [s["source"] for s in doc["steps"]]
    assert sources == ["user", "agent", "agent", "agent"]
    first, second, last = doc["steps"][1:]
    assert first["reasoning_content"] == "Look first." and first["tool_calls"][0]["function_name"] == "bash"
    assert "README" in first["observation"]["results"][0]["content"]
    assert second["observation"]["results"][0]["content"] == "Successfully wrote 14 bytes to hello.txt"
    assert last["message"] == "Created hello.txt." and "observation" not in last
    assert doc["agent"] == {"name": "pisces", "version": doc["agent"]["version"], "model_name": "faux"}
    assert doc["final_metrics"]["total_prompt_tokens"] == sum(s["metrics"]["prompt_tokens"] for s in doc["steps"][1:])
    events = [json.loads(line)["type"] for line in (logs / "pisces.jsonl").read_text().splitlines()]
    assert events[0] == "session" and "agent_end" in events


def test_a_file_that_is_not_a_session_is_refused(tmp_path):
    bad = tmp_path / "x.jsonl"
    bad.write_text('{"type": "message"}\n')
    with pytest.raises(ValueError, match="is not a session file"):
        atif_from_session(str(bad))
    done = subprocess.run([sys.executable, "-m", "pisces.modes.batch.harbor", "atif", str(bad), str(tmp_path / "o")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "is not a session file" in done.stderr


def test_the_install_script_is_valid_shell_that_installs_the_named_package():
    script = install_script("pisces-agent==0.1.0")
    subprocess.run(["sh", "-n"], input=script, text=True, check=True, timeout=30)
    assert "pip install --quiet pisces-agent==0.1.0" in script and script.startswith("#!/bin/sh\nset -eu\n")
