"""Progress a host can follow while subagents run: the task tool's ``tool_execution_update`` frames carry one
``AgentProgress`` per task (status, current tool, recent tools and output, tool count, tokens, duration).

Updates are coalesced to one per ``INTERVAL_S`` (a subagent streaming text would otherwise send a frame per
delta); a change of status, and a tool call starting or ending, is sent at once.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Callable

from pisces.agent.types import AgentToolResult
from pisces.ai.types import TextContent

INTERVAL_S = 0.15


def new_progress(index: int, task_id: str, agent: Any, task: str, assignment: str, description: str,
                 status: str = "pending") -> dict[str, Any]:
    return {"index": index, "id": task_id, "agent": agent.name, "agentSource": agent.source, "status": status,
            "task": task, "assignment": assignment, "description": description, "recentTools": [],
            "recentOutput": [], "toolCount": 0, "tokens": 0, "durationMs": 0}


def _copy(progress: dict[str, Any]) -> dict[str, Any]:
    out = dict(progress)
    out["recentTools"] = [dict(t) for t in progress.get("recentTools", [])]
    out["recentOutput"] = list(progress.get("recentOutput", []))
    return out


class ProgressBoard:
    def __init__(self, count: int, on_update: Callable[[AgentToolResult], None], project_agents_dir: str | None,
                 started: float) -> None:
        self.count = count
        self.on_update = on_update
        self.project_agents_dir = project_agents_dir
        self.started = started
        self.items: dict[int, dict[str, Any]] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._last = 0.0
        self.closed = False

    def set(self, index: int, progress: dict[str, Any], *, flush: bool = False) -> None:
        self.items[index] = progress
        self.publish(flush=flush)

    def publish(self, *, flush: bool = False) -> None:
        if self.closed:
            return
        now = time.monotonic()
        if flush or now - self._last >= INTERVAL_S:
            self._send()
        elif self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(INTERVAL_S - (now - self._last), self._send)

    def _send(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self.closed:
            return
        self._last = time.monotonic()
        details = {"projectAgentsDir": self.project_agents_dir, "results": [],
                   "totalDurationMs": int((time.time() - self.started) * 1000),
                   "progress": [_copy(self.items[i]) for i in sorted(self.items)]}
        self.on_update(AgentToolResult(content=[TextContent(text=f"Running {self.count} agents...")],
                                       details=details))

    def close(self) -> None:
        self.closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
