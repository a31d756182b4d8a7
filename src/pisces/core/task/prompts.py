"""The texts of the task tool: what a subagent is told, the reminders and repair requests it gets, the tool's
description, and the ``<task-summary>`` its caller reads back."""

from __future__ import annotations

import json
from typing import Any, Iterable

MISSING_SUBMIT_WARNING = "SYSTEM WARNING: Subagent exited without calling submit_result tool after 3 reminders."
NULL_SUBMIT_WARNING = "SYSTEM WARNING: Subagent called submit_result with null data."
MAX_SUBMIT_REMINDERS = 3


def format_duration(ms: float) -> str:
    """``123ms``, ``1.5s``, ``2m5s``, ``1h30m``, ``2d3h``."""
    ms = int(ms)
    sec, minute, hour, day = 1000, 60_000, 3_600_000, 86_400_000
    if ms < sec:
        return f"{ms}ms"
    if ms < minute:
        return f"{ms / sec:.1f}s"
    if ms < hour:
        m, s = ms // minute, (ms % minute) // sec
        return f"{m}m{s}s" if s else f"{m}m"
    if ms < day:
        h, m = ms // hour, (ms % hour) // minute
        return f"{h}h{m}m" if m else f"{h}h"
    d, h = ms // day, (ms % day) // hour
    return f"{d}d{h}h" if h else f"{d}d"


def format_bytes(n: int) -> str:
    if n < 1024:
        return f"{n}B"
    if n < 1024 ** 2:
        return f"{n / 1024:.1f}KB"
    if n < 1024 ** 3:
        return f"{n / 1024 ** 2:.1f}MB"
    return f"{n / 1024 ** 3:.1f}GB"


# -- what the subagent reads -------------------------------------------------------------------------
def subagent_system_prompt(base: str, agent_prompt: str, *, worktree: str | None, output_schema: Any) -> str:
    parts = [base.rstrip(), "# Your role", agent_prompt.strip() or "(no role description)", "# Your job",
             "You are working on one delegated sub-task for another agent. It cannot see this conversation: it "
             "reads only the result you submit."]
    if worktree:
        parts.append(f"You work in an isolated copy of the repository at `{worktree}`. Change files only inside "
                     "that directory, never in the original checkout.")
    parts += ["# Finishing",
              "When the work is done, call `submit_result` exactly once with your result in `result.data`; that "
              "call ends your turn. Put the result there, not in a text reply. No progress reports, no to-do lists.",
              "If you are truly blocked, call `submit_result` once with `result.error` saying what you tried and "
              "what stops you. Being unsure, or missing facts you could find with your tools, is not being "
              "blocked."]
    if output_schema is not None:
        parts.append("`result.data` must match this JSON Type Definition (RFC 8927) schema:\n```json\n"
                     + json.dumps(output_schema, indent=2) + "\n```")
    return "\n\n".join(parts)


def subagent_task_text(context: str | None, assignment: str) -> str:
    """The first user message of a subagent: the shared context (if any), then its own assignment."""
    context = (context or "").strip()
    assignment = assignment.strip()
    if not context or not assignment:
        return assignment or context
    return (f"# Background\n<context>\n{context}\n</context>\n\n"
            f"# Task\nYour assignment follows; start now.\n<goal>\n{assignment}\n</goal>")


def submit_reminder(attempt: int) -> str:
    return ("<system-reminder>\n"
            f"You stopped without calling submit_result (reminder {attempt} of {MAX_SUBMIT_REMINDERS}).\n\n"
            "Call submit_result now, and nothing else: `result.data` with your result if the work is done, or "
            "`result.error` with what you tried and the exact blocker if it cannot be done. A reply without that "
            "call does not count.\n"
            "</system-reminder>")


def repair_prompt(task: str, failed: list[dict[str, Any]], context_lines: int) -> str:
    """The task of a verification-repair subagent: the original task and the checks that failed."""
    summary = "\n".join(f"- `{c['name']}`: exited non-zero" for c in failed)
    blocks = []
    for c in failed:
        output = c.get("outputPreview")
        output = "\n".join(output.split("\n")[-context_lines:]) if output else "(no output captured)"
        blocks.append(f"**`{c['name']}`** (`{c['command']}`):\n```\n{output}\n```")
    return ("Your earlier attempt at the task below finished, but automated verification of its changes failed. "
            "Fix what the checks report, then call `submit_result`.\n\n"
            f"# Original task\n{task}\n\n# Failed checks\n{summary}\n\n" + "\n\n".join(blocks) + "\n\n"
            "# Rules\n- Fix every failure listed above before calling `submit_result`.\n"
            "- Do not change the tests or the checks themselves, and do not silence them.\n"
            "- If a check cannot apply to your change, call `submit_result` with `result.error` explaining why.")


# -- what the caller reads -----------------------------------------------------------------------------
def tool_description(agents: Iterable[Any], max_concurrency: int, isolation_enabled: bool) -> str:
    lines = [
        "Launches subagents to work on tasks in parallel.",
        "",
        "Subagents do not see this conversation: everything they need (decisions, file paths, requirements) must "
        "be in `context` (shared by every task) or in each task's `assignment`.",
        "",
        "Parameters:",
        "- `agent`: the agent type for every task of the call.",
        "- `context`: background shared by all tasks, written once instead of in each assignment.",
        "- `schema`: a JTD schema the result of each task must match.",
        "- `tasks`: the tasks, run in parallel (up to "
        f"{max_concurrency} at a time). `id` is a short CamelCase name, `description` a one-line label for the "
        "user (the subagent never sees it), `assignment` complete instructions: target files, the change, edge "
        "cases, how to tell it is done.",
    ]
    if isolation_enabled:
        lines += [
            "- `isolated`: run each task in its own git worktree; its changes come back as a patch. Use it when "
            "tasks edit overlapping files.",
            "- `verify`: with `isolated`, commands run on each task's result before it is applied (`true` for the "
            "default profile, a profile name, or `{commands: [{name, command, timeoutMs?, optional?}], "
            "onFailure?}`).",
        ]
    lines += [
        "",
        "Keep each task small (a few files) and independent of the others' results; give tasks that depend on "
        "each other in separate calls, in order. Tasks must not run project-wide builds or test suites: they "
        "share the working tree (unless isolated); verify after they finish.",
        "",
        "Agents:",
    ]
    for agent in agents:
        tools = ", ".join(agent.tools) if agent.tools else "All"
        lines.append(f"- {agent.name} (tools: {tools}): {agent.description}")
    return "\n".join(lines)


def task_summary(results: list[dict[str, Any]], *, duration_ms: float, merge_summary: str,
                 batch_aborted: bool) -> str:
    """The ``<task-summary>`` text handed back to the calling model."""
    success = sum(1 for r in results if r.get("exitCode") == 0 and not r.get("error"))
    cancelled = sum(1 for r in results if r.get("aborted"))
    note = f" ({cancelled} cancelled)" if batch_aborted and cancelled else ""
    out = ["<task-summary>", f"<header>{success}/{len(results)} succeeded{note} [{format_duration(duration_ms)}]"
           "</header>", ""]
    for i, r in enumerate(results):
        if r.get("aborted"):
            status = "cancelled"
        elif r.get("exitCode") == 0 and r.get("error"):
            status = "merge failed"
        elif r.get("exitCode") == 0:
            status = "completed"
        else:
            status = f"failed (exit {r.get('exitCode')})"
        text = (r.get("output") or "").strip() or (r.get("stderr") or "").strip() or "(no output)"
        meta = r.get("outputMeta")
        out.append(f'<agent id="{r["id"]}" agent="{r["agent"]}">')
        out.append(f"<status>{status}</status>")
        for w in r.get("writesOutsideWorkspace") or ():  # approved, and in no patch: say where they went
            where = f'path="{w["path"]}"' if "path" in w else f'command="{w.get("command", "")}"'
            out.append(f'<write-outside-workspace tool="{w["tool"]}" {where} />')
        if meta:
            out.append(f'<meta lines="{meta["lineCount"]}" size="{format_bytes(meta["charCount"])}" />')
        if len(text) > 5000:
            cut = text[:5000]
            newline = cut.rfind("\n")
            full = r.get("outputPath") or f"agent://{r['id']}"  # the file holds all of it (read it with `read`)
            out += [f'<preview full-path="{full}">', cut[:newline] if newline >= 0 else cut, "</preview>"]
        else:
            out += ["<result>", text, "</result>"]
        out.append("</agent>")
        if i < len(results) - 1:
            out.append("---")
    if merge_summary.strip():
        out += ["", "<merge-summary>", merge_summary.strip(), "</merge-summary>"]
    out.append("</task-summary>")
    return "\n".join(out)
