"""Helpers of the task-tool end-to-end tests: real git repositories, faux scripts for the parent and its
subagents, and the ``subagent_*`` event sequence in a compact, exactly comparable form."""

from __future__ import annotations

import json
import os
import subprocess
from typing import Any

TOOLS = "read,bash,edit,write,task"

# The fields of each event of seed 000 (optional ones in the second set).
EVENT_FIELDS = {
    "subagent_start": ({"type", "id", "agent", "isolated"}, set()),
    "subagent_end": ({"type", "id", "agent", "exitCode"}, {"verification"}),
    "subagent_verification_start": ({"type", "id", "attempt"}, {"profile"}),
    "subagent_verification_command_start": ({"type", "id", "attempt", "commandName"}, set()),
    "subagent_verification_command_end": ({"type", "id", "attempt", "commandName", "exitCode", "durationMs"},
                                          {"artifactId"}),
    "subagent_verification_end": ({"type", "id", "attempt", "status"}, set()),
}


def git(repo: str, *args: str, check: bool = True) -> str:
    out = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=False)
    if check and out.returncode != 0:
        raise AssertionError(f"git {' '.join(args)}: {out.stderr}")
    return out.stdout


def make_repo(path: str, files: dict[str, str] | None = None) -> str:
    os.makedirs(path, exist_ok=True)
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "user.email", "dev@example.com")
    git(path, "config", "user.name", "Dev")
    for name, text in (files or {"app.txt": "alpha\nbeta\ngamma\n"}).items():
        write(os.path.join(path, name), text)
    git(path, "add", "-A")
    git(path, "commit", "-qm", "base")
    return path


def write(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def read(path: str) -> str:
    with open(path) as f:
        return f.read()


def worktrees(repo: str) -> list[str]:
    return [line.split(" ", 1)[1] for line in git(repo, "worktree", "list", "--porcelain").splitlines()
            if line.startswith("worktree ")]


# -- scripting --------------------------------------------------------------------------------------
def call_task(arguments: dict[str, Any]) -> dict[str, Any]:
    return {"toolCalls": [{"name": "task", "arguments": arguments}]}


def submit(data: Any) -> dict[str, Any]:
    return {"toolCalls": [{"name": "submit_result", "arguments": {"result": {"data": data}}}]}


def bash(command: str) -> dict[str, Any]:
    return {"toolCalls": [{"name": "bash", "arguments": {"command": command}}]}


def write_file(path: str, content: str) -> dict[str, Any]:
    return {"toolCalls": [{"name": "write", "arguments": {"path": path, "content": content}}]}


def start(spawn: Any, home: Any, *args: str) -> Any:
    """``pisces --mode rpc --tools ...,task *args`` with its own TMPDIR (artifacts of in-memory sessions go
    there), so a test leaves nothing behind in the machine's /tmp."""
    tmp = os.path.join(home.root, "tmp")
    os.makedirs(tmp, exist_ok=True)
    return spawn("--tools", TOOLS, *args, env=home.env(TMPDIR=tmp))


def script(home: Any, parent: list[dict], subagents: dict[str, list[dict]]) -> str:
    return home.faux_script({"responses": parent, "subagents": subagents})


def settings(home: Any, task: dict[str, Any]) -> None:
    home.write_json("settings.json", {"task": task})


# -- reading a run --------------------------------------------------------------------------------------
def run_prompt(p: Any, text: str = "go", timeout: float = 60.0) -> list[dict]:
    p.send({"type": "prompt", "message": text})
    return p.until_type("agent_settled", timeout)


def lifecycle(frames: list[dict]) -> list[str]:
    """The task tool's frames as short strings: its start and end, and every subagent_* event."""
    out = []
    for f in frames:
        t = f.get("type", "")
        if t in ("tool_execution_start", "tool_execution_end") and f.get("toolName") == "task":
            out.append(t)
        elif t == "subagent_start":
            out.append(f"start {f['id']}" + (" isolated" if f["isolated"] else ""))
        elif t == "subagent_end":
            v = f.get("verification")
            out.append(f"end {f['id']} exit={f['exitCode']}" + (f" verification={v['status']}" if v else ""))
        elif t == "subagent_verification_start":
            out.append(f"verify {f['id']} a{f['attempt']}" + (f" profile={f['profile']}" if "profile" in f else ""))
        elif t == "subagent_verification_command_start":
            out.append(f"run {f['id']} a{f['attempt']} {f['commandName']}")
        elif t == "subagent_verification_command_end":
            out.append(f"ran {f['id']} a{f['attempt']} {f['commandName']} exit={f['exitCode']}")
        elif t == "subagent_verification_end":
            out.append(f"verified {f['id']} a{f['attempt']} {f['status']}")
    return out


def check_event_shapes(frames: list[dict]) -> None:
    for f in frames:
        spec = EVENT_FIELDS.get(f.get("type", ""))
        if spec is None:
            continue
        required, optional = spec
        keys = set(f)
        assert required <= keys <= required | optional, f
        assert "id" in f and isinstance(f["id"], str)


def task_result(frames: list[dict]) -> dict:
    end = next(f for f in frames if f.get("type") == "tool_execution_end" and f.get("toolName") == "task")
    return end["result"]


def summary_text(frames: list[dict]) -> str:
    return task_result(frames)["content"][0]["text"]


def dump(frames: list[dict]) -> str:
    return "\n".join(json.dumps(f)[:300] for f in frames)
