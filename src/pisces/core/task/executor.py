"""One subagent, in process: an ``AgentSession`` with an in-memory store and its own tools, run to its
``submit_result`` (with up to three reminders when it stops without one), turned into a task result.

Its events are not forwarded to the clients (they would drown the parent's stream); they feed its
``AgentProgress`` instead, and every reply's usage goes to the ``on_usage`` hook.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
import traceback
from dataclasses import dataclass
from typing import Any, Callable

import msgspec

from pisces.agent.types import (
    AgentEndEvent,
    MessageEndEvent,
    MessageStartEvent,
    MessageUpdateEvent,
    ToolExecutionEndEvent,
    ToolExecutionStartEvent,
    TurnEndEvent,
)
from pisces.ai.abort import AbortSignal
from pisces.ai.models import clamp_thinking_level
from pisces.ai.types import AssistantMessage, TextContent, TextDeltaEvent
from pisces.core.config.models_registry import parse_model_pattern
from pisces.core.config.settings import Settings
from pisces.core.errors import SessionError
from pisces.core.resources.system_prompt import build_system_prompt
from pisces.core.store import SessionManager
from pisces.core.task import LazyTaskTool, prompts
from pisces.core.task.agents import AgentDefinition
from pisces.core.task.hooks import UsageReport
from pisces.core.task.progress import new_progress
from pisces.core.task.submit import SubmitResultTool
from pisces.core.task.task_host import TaskHost
from pisces.core.tools import ALL_TOOL_NAMES, create_tools
from pisces.core.tools.truncate import truncate_tail

MAX_OUTPUT_BYTES = 500_000
MAX_OUTPUT_LINES = 5000
RECENT_OUTPUT_TAIL = 8 * 1024


@dataclass
class SubagentRun:
    index: int
    task_id: str  # the allocated id ("0-AddTests"; a repair: "0-AddTests-repair")
    raw_id: str  # the id as the caller wrote it
    agent: AgentDefinition
    task: str  # the full first message
    assignment: str
    description: str
    cwd: str
    worktree: str | None
    output_schema: Any
    model_override: list[str] | None
    max_recursion_depth: int
    artifacts_dir: str


def zero_usage() -> dict[str, Any]:
    return {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0,
            "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}}


def add_usage(total: dict[str, Any], usage: dict[str, Any]) -> None:
    for key in ("input", "output", "cacheRead", "cacheWrite", "totalTokens"):
        total[key] += usage.get(key) or 0
    for key in ("input", "output", "cacheRead", "cacheWrite", "total"):
        total["cost"][key] += (usage.get("cost") or {}).get(key) or 0


def _args_preview(args: Any) -> str:
    if isinstance(args, dict):
        for key in ("command", "file_path", "path", "pattern", "query", "url", "task", "prompt"):
            value = args.get(key)
            if isinstance(value, str) and value:
                return value if len(value) <= 60 else value[:59] + "…"
    return ""


def resolve_model(host: TaskHost, patterns: list[str] | None) -> tuple[Any, str | None, str | None]:
    """(model, thinking level named by the pattern, the pattern that matched): the first pattern that names an
    available model, else the parent's current model."""
    if patterns:
        available = host.registry.get_available()
        for pattern in patterns:
            model, level, _warning = parse_model_pattern(pattern, available, strict=False)
            if model is not None:
                return model, level, pattern
    return host.get_model(), None, None


def base_result(run: SubagentRun, **fields: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"index": run.index, "id": run.task_id, "agent": run.agent.name,
                           "agentSource": run.agent.source, "task": run.task, "assignment": run.assignment,
                           "description": run.description}
    out.update(fields)
    return out


async def run_subagent(run: SubagentRun, host: TaskHost, signal: AbortSignal,
                       on_progress: Callable[[dict[str, Any], bool], None]) -> dict[str, Any]:
    started = time.time()
    if signal.aborted:
        return base_result(run, exitCode=1, output="", stderr="Cancelled before start", truncated=False,
                           durationMs=0, tokens=0, error="Cancelled before start", aborted=True,
                           abortReason="Cancelled before start")
    progress = new_progress(run.index, run.task_id, run.agent, run.task, run.assignment, run.description,
                            status="running")
    if run.model_override:
        progress["modelOverride"] = run.model_override
    state = _RunState()
    child = None
    error: str | None = None
    outside: list[dict[str, str]] = []
    try:
        child = await _build_child(run, host, outside)
        child.subscribe(lambda ev: _on_child_event(ev, child, run, host, state, progress, started, on_progress))
        remove = signal.add_listener(lambda: asyncio.ensure_future(child.abort()))
        try:
            on_progress(progress, True)
            await child.prompt(run.task)
            reminders = 0
            while state.submitted is None and reminders < prompts.MAX_SUBMIT_REMINDERS and not signal.aborted:
                last = child.last_assistant_message()
                if last is not None and last.stopReason == "error":
                    break
                reminders += 1
                await child.prompt(prompts.submit_reminder(reminders))
        finally:
            remove()
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # noqa: BLE001 - a crashed subagent is a failed task, never a crashed batch

        error = str(exc) if isinstance(exc, SessionError) else "".join(
            traceback.format_exception_only(type(exc), exc)).strip()
    finally:
        if child is not None and child.is_busy:
            await child.abort()
    result = _finalize(run, child, state, signal, error)
    if outside:  # approved writes out of its workspace: no patch carries them, so the result names them
        result["writesOutsideWorkspace"] = outside
    result["durationMs"] = int((time.time() - started) * 1000)
    progress["durationMs"] = result["durationMs"]
    progress["status"] = "aborted" if result.get("aborted") else "completed" if result["exitCode"] == 0 else "failed"
    on_progress(progress, True)
    await asyncio.to_thread(_write_output, run, result)
    return result


class _RunState:
    def __init__(self) -> None:
        self.submitted: dict[str, Any] | None = None
        self.output_chunks: list[str] = []
        self.final_chunks: list[str] | None = None
        self.tail = ""
        self.usage = zero_usage()
        self.has_usage = False
        self.last_intent: str | None = None


async def _build_child(run: SubagentRun, host: TaskHost, outside: list[dict[str, str]] | None = None) -> Any:
    settings = await asyncio.to_thread(Settings, host.agent_dir, host.project_cwd)
    model, pattern_level, _ = resolve_model(host, run.model_override or run.agent.model)
    level = pattern_level or run.agent.thinking_level or host.get_thinking_level()
    level = clamp_thinking_level(model, level) if model is not None and getattr(model, "provider", "") != "unknown" \
        else "off"
    backends = host.backends if run.worktree is None else None  # a worktree is local, whoever serves the session
    # a subagent's commands are confined to its own workspace (its worktree, else the parent's cwd) by default
    sandbox = host.sandbox.child(run.worktree) if host.sandbox is not None and backends is None else None
    base_tools = create_tools(run.cwd, shell_path=settings.shell_path, command_prefix=settings.shell_command_prefix,
                              backends=backends, sandbox=sandbox)
    names = list(run.agent.tools) if run.agent.tools is not None else list(ALL_TOOL_NAMES)
    depth = host.depth + 1
    may_delegate = run.agent.spawns is not None and not (0 <= run.max_recursion_depth <= depth)
    if may_delegate and "task" not in names:
        names.append("task")
    tools: dict[str, Any] = {n: base_tools[n] for n in names if n in base_tools}
    holder: list[Any] = []
    if may_delegate:
        child_host = host.child(cwd=run.cwd, settings=settings, get_model=lambda: holder[0].model,
                                get_thinking_level=lambda: holder[0].agent.thinking_level,
                                spawns=run.agent.spawns or [], task_id=run.task_id, artifacts_dir=run.artifacts_dir,
                                backends=backends)
        tools["task"] = LazyTaskTool(lambda: child_host)
    tools["submit_result"] = SubmitResultTool(run.output_schema)

    def system_prompt(active: list[Any]) -> str:
        base = build_system_prompt(run.cwd, tools=[(t.name, t.description.split("\n", 1)[0]) for t in active],
                                   agent_dir=host.agent_dir)
        return prompts.subagent_system_prompt(base, run.agent.system_prompt, worktree=run.worktree,
                                              output_schema=tools["submit_result"].output_schema)

    if host.new_session is None:
        raise RuntimeError("this task host cannot build a subagent's session (TaskHost.new_session is not set)")
    child = host.new_session(cwd=run.cwd, settings=settings, registry=host.registry,
                         store=SessionManager.in_memory(run.cwd), model=model, thinking_level=level, tools=tools,
                         active_tools=list(tools), system_prompt_builder=system_prompt)
    holder.append(child)
    if host.approval is not None:  # deny/prompt rules and known-dangerous commands hold inside subagents too
        host.approval.gate_subagent(child.agent, workspace=run.cwd, outside=outside)
    requester = tuple(dict.fromkeys([run.task_id, run.raw_id, run.agent.name]))
    options = child.agent.stream_options

    def with_requester(m: Any) -> Any:
        opts = options(m)
        opts.requester = requester
        return opts

    child.agent.stream_options = with_requester
    return child


def _on_child_event(ev: Any, child: Any, run: SubagentRun, host: TaskHost, state: _RunState,
                    progress: dict[str, Any], started: float, on_progress: Callable[[dict[str, Any], bool], None]
                    ) -> None:
    flush = False
    progress["durationMs"] = int((time.time() - started) * 1000)
    if isinstance(ev, ToolExecutionStartEvent):
        host.hooks.report_tool_call(ev.toolName)  # it counts toward the parent's maxToolCalls
        progress["toolCount"] += 1
        progress["currentTool"] = ev.toolName
        progress["currentToolArgs"] = _args_preview(ev.args)
        progress["currentToolStartMs"] = int(time.time() * 1000)
        flush = True
    elif isinstance(ev, ToolExecutionEndEvent):
        if progress.get("currentTool"):
            progress["recentTools"].insert(0, {"tool": progress["currentTool"],
                                               "args": progress.get("currentToolArgs", ""),
                                               "endMs": int(time.time() * 1000)})
            del progress["recentTools"][5:]
        for key in ("currentTool", "currentToolArgs", "currentToolStartMs"):
            progress.pop(key, None)
        if ev.toolName == "submit_result" and not ev.isError:
            details = getattr(ev.result, "details", None)
            if isinstance(details, dict) and details.get("status") in ("success", "aborted"):
                state.submitted = details
        flush = True
    elif isinstance(ev, TurnEndEvent):
        if state.submitted is not None:
            child.agent.abort()  # the result is in: no further request
    elif isinstance(ev, MessageStartEvent) and isinstance(ev.message, AssistantMessage):
        state.tail = ""
        progress["recentOutput"] = []
    elif isinstance(ev, MessageUpdateEvent):
        delta = getattr(ev.assistantMessageEvent, "delta", None)
        if isinstance(ev.assistantMessageEvent, TextDeltaEvent) and isinstance(delta, str):  # the tag is no attribute
            state.tail = (state.tail + delta)[-RECENT_OUTPUT_TAIL:]
            progress["recentOutput"] = [ln for ln in state.tail.split("\n") if ln.strip()][-8:][::-1]
    elif isinstance(ev, MessageEndEvent) and isinstance(ev.message, AssistantMessage):
        msg = ev.message
        state.output_chunks += [b.text for b in msg.content if isinstance(b, TextContent) and b.text]
        usage = msgspec.to_builtins(msg.usage)
        add_usage(state.usage, usage)
        state.has_usage = True
        progress["tokens"] += usage.get("totalTokens") or 0
        host.hooks.report_usage(UsageReport(id=run.task_id, agent=run.agent.name, usage=usage,
                                            total=json.loads(json.dumps(state.usage)), depth=host.depth + 1))
    elif isinstance(ev, AgentEndEvent):
        texts = [b.text for m in ev.messages if isinstance(m, AssistantMessage)
                 for b in m.content if isinstance(b, TextContent) and b.text]
        if texts:
            state.final_chunks = texts
        flush = True
    else:
        return
    on_progress(progress, flush)


def _finalize(run: SubagentRun, child: Any, state: _RunState, signal: AbortSignal, error: str | None
              ) -> dict[str, Any]:
    raw = "".join(state.final_chunks if state.final_chunks is not None else state.output_chunks)
    exit_code, stderr, aborted, abort_reason = 1, "", False, None
    submitted = state.submitted
    if submitted is not None and submitted.get("status") == "aborted":
        exit_code, aborted = 0, True
        stderr = abort_reason = submitted.get("error") or "Subagent aborted task"
        raw = json.dumps({"aborted": True, "error": submitted.get("error")}, indent=2, ensure_ascii=False)
    elif submitted is not None:
        data = submitted.get("data")
        if data is None:
            raw = f"{prompts.NULL_SUBMIT_WARNING}\n\n{raw}" if raw else prompts.NULL_SUBMIT_WARNING
        else:
            raw = json.dumps(data, indent=2, ensure_ascii=False)
        exit_code = 0
    elif signal.aborted:
        aborted, abort_reason = True, signal.reason or "Cancelled by caller"
        stderr = abort_reason
    elif error is not None:
        stderr = error
    else:
        last = child.last_assistant_message() if child is not None else None
        if last is not None and last.stopReason == "error":
            stderr = last.errorMessage or "Subagent failed"
        else:
            stderr = prompts.MISSING_SUBMIT_WARNING
    cut = truncate_tail(raw, max_lines=MAX_OUTPUT_LINES, max_bytes=MAX_OUTPUT_BYTES)
    result = base_result(run, lastIntent=state.last_intent, exitCode=exit_code, output=cut.content, stderr=stderr,
                         truncated=bool(cut.truncated), durationMs=0,
                         tokens=state.usage["totalTokens"], modelOverride=run.model_override,
                         error=stderr if exit_code != 0 and stderr else None, aborted=aborted,
                         abortReason=abort_reason, usage=state.usage if state.has_usage else None)
    result["_full_output"] = raw
    return result


def _write_output(run: SubagentRun, result: dict[str, Any]) -> None:
    """The whole output to ``<artifacts>/<id>.md`` (the result carries at most its tail)."""
    raw = result.pop("_full_output", "")
    path = os.path.join(run.artifacts_dir, f"{run.task_id}.md")
    try:
        os.makedirs(run.artifacts_dir, exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(raw)
    except OSError:
        return
    result["outputPath"] = path
    result["outputMeta"] = {"lineCount": raw.count("\n") + 1, "charCount": len(raw)}
