"""Rows for the transcript's richer cards: a group of consecutive read/grep/find/ls calls, the task tool's
subagents while they run, a retry's countdown, the session's todo list, image placeholders and the MCP
servers' state.

Guarantees: every function returns a bounded number of rows (at most GROUP_ROWS, SUBAGENT_ROWS, TODO_ROWS)
whatever the input holds, and every text from outside is cleaned before it is styled.
"""

from __future__ import annotations

import time
from typing import Any

from pisces.modes.tui.render import style, wrap
from pisces.modes.tui.sanitize import clean

GROUPED = ("read", "grep", "find", "ls")  # tools whose consecutive cards become one
GROUP_ROWS = 8
SUBAGENT_ROWS = 8
TODO_ROWS = 8
_TODO_MARK = {"pending": "○", "in_progress": "◐", "completed": "●", "abandoned": "⊘"}


def group_rows(items: list[dict[str, Any]], width: int) -> list[str]:
    """One card for consecutive read/grep/find/ls calls: a head counting them, then one row per call."""
    if len(items) == 1:
        it = items[0]
        return [style("● " + it["name"], 1, 32) + " " + style(it["summary"], 2), style(f"  {it['lines']} lines", 2)]
    counts: dict[str, int] = {}
    for it in items:
        counts[it["name"]] = counts.get(it["name"], 0) + 1
    head = ", ".join(f"{n} {name}" for name, n in counts.items())
    rows = [style("● explored", 1, 32) + " " + style(f"{len(items)} calls: {head}", 2)]
    shown = items if len(items) <= GROUP_ROWS else items[:GROUP_ROWS - 1]
    for it in shown:
        rows.append(style(f"  {it['name']} {it['summary']} ({it['lines']} lines)"[: max(1, width)], 2))
    if len(shown) < len(items):
        rows.append(style(f"  … {len(items) - len(shown)} more", 2))
    return rows


def subagent_rows(details: Any, width: int) -> list[str]:
    """The task tool's running subagents (its ``tool_execution_update`` details): one row per task."""
    progress = details.get("progress") if isinstance(details, dict) else None
    if not isinstance(progress, list):
        return []
    rows = []
    marks = {"pending": "○", "running": "◌", "completed": "✓", "failed": "✗", "aborted": "⊘"}
    for p in progress[:SUBAGENT_ROWS]:
        if not isinstance(p, dict):
            continue
        status = str(p.get("status", ""))
        parts = [f"{int(p.get('toolCount') or 0)} tools", f"{int(p.get('tokens') or 0)} tok",
                 f"{int(p.get('durationMs') or 0) // 1000}s"]
        if p.get("currentTool"):
            parts.append(f"{p['currentTool']} {p.get('currentToolArgs') or ''}".strip())
        what = clean(str(p.get("description") or p.get("task") or ""))[:60]
        line = f"  {marks.get(status, '·')} {clean(str(p.get('agent', '')))} {status}: {what} · " + " · ".join(
            clean(x) for x in parts)
        colour = 31 if status == "failed" else 32 if status == "completed" else 33 if status == "running" else 2
        rows.append(style(line[: max(1, width)], colour))
    if len(progress) > SUBAGENT_ROWS:
        rows.append(style(f"  … {len(progress) - SUBAGENT_ROWS} more", 2))
    return rows


def retry_row(retry: dict[str, Any], now: float | None = None) -> str:
    """``retrying in 7s (attempt 2/3): <error>``, counting down to the retry (``retrying (...)`` once it runs)."""
    left = max(0.0, retry["until"] - (time.monotonic() if now is None else now))
    secs = int(left + 0.999)
    when = f"retrying in {secs}s" if secs else "retrying"
    return style(f"{when} (attempt {retry.get('attempt')}/{retry.get('maxAttempts')}): {retry.get('error', '')}"[:500],
                 33)


def todo_rows(phases: Any, width: int) -> list[str]:
    """The todo panel: the phase in progress (or the first unfinished one) and its tasks, at most TODO_ROWS."""
    if not isinstance(phases, list) or not phases:
        return []
    tasks = [t for p in phases if isinstance(p, dict) for t in p.get("tasks") or [] if isinstance(t, dict)]
    if not tasks:
        return []
    done = sum(1 for t in tasks if t.get("status") in ("completed", "abandoned"))
    if done == len(tasks):
        return []  # a finished list leaves the live region
    current = next((p for p in phases if isinstance(p, dict) and any(
        isinstance(t, dict) and t.get("status") not in ("completed", "abandoned") for t in p.get("tasks") or [])),
        phases[0])
    rows = [style(f"≡ todo {done}/{len(tasks)} · {clean(str(current.get('name', '')))}", 1, 36)]
    ptasks = [t for t in current.get("tasks") or [] if isinstance(t, dict)]
    for t in ptasks[: TODO_ROWS - 1]:
        status = str(t.get("status", ""))
        text = f"  {_TODO_MARK.get(status, '·')} {clean(str(t.get('content', '')))}"[: max(1, width)]
        rows.append(style(text, 1 if status == "in_progress" else 2))
    if len(ptasks) > TODO_ROWS - 1:
        rows.append(style(f"  … {len(ptasks) - TODO_ROWS + 1} more", 2))
    return rows


def image_placeholder(block: dict[str, Any]) -> str:
    """``[image: image/png, 12.3 KB]`` for an image content block (its size from the base64 length)."""
    data = block.get("data")
    size = len(data) * 3 // 4 if isinstance(data, str) else 0
    human = f"{size / 1024:.1f} KB" if size >= 1024 else f"{size} B"
    return f"[image: {clean(str(block.get('mimeType') or 'image'))[:60]}, {human}]"


class McpStatus:
    """The MCP servers' state, from ``mcp_status`` and the ``mcp_server_status`` events, for the footer."""

    def __init__(self) -> None:
        self.servers: dict[str, dict[str, Any]] = {}

    def load(self, data: Any) -> None:
        for s in (data or {}).get("servers") or []:
            if isinstance(s, dict) and s.get("name"):
                self.servers[str(s["name"])] = {"status": str(s.get("status", "")), "error": s.get("error"),
                                                "tools": len(s.get("tools") or [])}

    def on_event(self, ev: dict[str, Any]) -> None:
        name = str(ev.get("server", ""))
        if name:
            entry = self.servers.setdefault(name, {"tools": 0})
            entry["status"], entry["error"] = str(ev.get("status", "")), ev.get("error")

    def summary(self) -> str:
        """``mcp 2/3`` (connected of configured, ``!`` when one failed); empty without servers."""
        if not self.servers:
            return ""
        up = sum(1 for s in self.servers.values() if s.get("status") == "connected")
        failed = any(s.get("status") == "failed" for s in self.servers.values())
        return f"mcp {up}/{len(self.servers)}" + (" !" if failed else "")

    def rows(self, width: int) -> list[str]:
        if not self.servers:
            return ["no MCP server is configured (docs/mcp.md)"]
        out = []
        for name, s in sorted(self.servers.items()):
            line = f"{clean(name)}: {s.get('status')}" + (f", {s.get('tools')} tools" if s.get("tools") else "")
            if s.get("error"):
                line += f" ({clean(str(s['error']))})"
            out.extend(wrap(line, width))
        return out
