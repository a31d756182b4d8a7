"""Helpers of the in-process task tool tests."""

from __future__ import annotations

import subprocess
from typing import Any


def git(repo: str, *args: str) -> str:
    out = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=False)
    assert out.returncode == 0, f"git {' '.join(args)}: {out.stderr}"
    return out.stdout


def call_task(arguments: dict[str, Any]) -> dict[str, Any]:
    return {"toolCalls": [{"name": "task", "arguments": arguments}]}


def submit(data: Any) -> dict[str, Any]:
    return {"toolCalls": [{"name": "submit_result", "arguments": {"result": {"data": data}}}]}


def subagent_events(events: list[Any]) -> list[dict[str, Any]]:
    return [e for e in events if isinstance(e, dict) and str(e.get("type", "")).startswith("subagent_")]


def task_end(events: list[Any]) -> Any:
    from pisces.agent.types import ToolExecutionEndEvent

    return next(e for e in events if isinstance(e, ToolExecutionEndEvent) and e.toolName == "task")


def worktrees(repo: str) -> list[str]:
    return [line.split(" ", 1)[1] for line in git(repo, "worktree", "list", "--porcelain").splitlines()
            if line.startswith("worktree ")]
