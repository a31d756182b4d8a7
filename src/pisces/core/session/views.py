"""Read-only views over a session's messages and entries: stats, context usage, fork points, the tree.

Pure functions, so AgentSession stays a coordinator and these are easy to test on their own.
"""

from __future__ import annotations

from typing import Any

from pisces.ai.types import (
    AssistantMessage,
    Model,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    num,
)
from pisces.core.compaction.tokens import (  # part of the session's views, re-exported
    estimate_context_tokens as estimate_context_tokens,
)
from pisces.core.compaction.tokens import estimate_tokens as estimate_tokens
from pisces.core.compaction.tokens import usage_tokens as usage_tokens
from pisces.core.session.views_pi import fork_messages as fork_messages  # the session's view, later pi's shape
from pisces.core.store import entry_type


def ends_with_compaction(branch: list[Any]) -> bool:
    """Whether the branch's last word is a compaction: no successful reply since, so the context size is
    unknown until the next one reports its usage."""
    for e in reversed(branch):
        t = entry_type(e)
        if t == "compaction":
            return True
        if t == "message" and isinstance(e.message, AssistantMessage) and e.message.stopReason != "error":
            return False
    return False


def context_usage(messages: list[Any], model: Model, *, unknown: bool = False) -> dict[str, Any] | None:
    """``{tokens, contextWindow, percent}`` (plus the breakdown) or None when the window is unknown.
    ``unknown`` (right after a compaction, before a new reply) gives null tokens and percent, as pi."""
    window = model.contextWindow
    if window <= 0:
        return None
    if unknown:
        return {"tokens": None, "contextWindow": window, "percent": None}
    est = estimate_context_tokens(messages)
    return {"tokens": est["tokens"], "contextWindow": window, "percent": num(est["tokens"] / window * 100),
            "usageTokens": est["usageTokens"], "trailingTokens": est["trailingTokens"],
            "lastUsageIndex": est["lastUsageIndex"]}


# ---------------------------------------------------------------------------------------------
# Stats
# ---------------------------------------------------------------------------------------------
def session_stats(messages: list[Any]) -> dict[str, Any]:
    users = assistants = calls = results = 0
    tin = tout = cr = cw = 0
    cost = 0.0
    for m in messages:
        if isinstance(m, UserMessage):
            users += 1
        elif isinstance(m, AssistantMessage):
            assistants += 1
            calls += sum(1 for b in m.content if isinstance(b, ToolCall))
            u = m.usage
            tin += u.input
            tout += u.output
            cr += u.cacheRead
            cw += u.cacheWrite
            cost += u.cost.total
        elif isinstance(m, ToolResultMessage):
            results += 1
    return {
        "userMessages": users, "assistantMessages": assistants, "toolCalls": calls, "toolResults": results,
        "totalMessages": len(messages),
        "tokens": {"input": tin, "output": tout, "cacheRead": cr, "cacheWrite": cw, "total": tin + tout + cr + cw},
        "cost": num(cost),
    }


# ---------------------------------------------------------------------------------------------
# Texts
# ---------------------------------------------------------------------------------------------
def user_text(message: UserMessage) -> str:
    if isinstance(message.content, str):
        return message.content
    return "".join(b.text for b in message.content if isinstance(b, TextContent))


def last_assistant_text(messages: list[Any]) -> str | None:
    for m in reversed(messages):
        if not isinstance(m, AssistantMessage):
            continue
        if m.stopReason == "aborted" and not m.content:
            continue
        return "".join(b.text for b in m.content if isinstance(b, TextContent)).strip()
    return None


# ---------------------------------------------------------------------------------------------
# The tree view (seed 002's RpcSessionTree)
# ---------------------------------------------------------------------------------------------
def _preview(entry: Any) -> str | None:
    etype = entry_type(entry)
    if etype == "message":
        m = entry.message
        if isinstance(m, UserMessage):
            text = user_text(m)
        elif isinstance(m, AssistantMessage):
            text = "".join(b.text for b in m.content if isinstance(b, TextContent))
            if not text:
                names = [b.name for b in m.content if isinstance(b, ToolCall)]
                text = f"[tool calls: {', '.join(names)}]" if names else ""
        elif isinstance(m, ToolResultMessage):
            text = f"[{m.toolName} result]"
        else:
            text = getattr(m, "command", None) or getattr(m, "summary", None) or ""
    elif etype in ("compaction", "branch_summary"):
        text = getattr(entry, "summary", "")
    elif etype == "session_info":
        text = getattr(entry, "name", "")
    elif etype == "model_change":
        text = f"{entry.provider}/{entry.modelId}"
    elif etype == "thinking_level_change":
        text = entry.thinkingLevel
    else:
        return None
    text = " ".join(str(text).split())
    return text[:120] if text else None


def tree_view(entries: list[Any], leaf_id: str | None, labels: dict[str, str]) -> dict[str, Any]:
    nodes: dict[str, dict[str, Any]] = {}
    roots: list[dict[str, Any]] = []
    for e in entries:
        info: dict[str, Any] = {"id": e.id, "parentId": e.parentId, "type": entry_type(e),
                                "timestamp": e.timestamp}
        if e.id in labels:
            info["label"] = labels[e.id]
        preview = _preview(e)
        if preview:
            info["preview"] = preview
        node = {"entry": info, "children": []}
        nodes[e.id] = node
        parent = nodes.get(e.parentId) if e.parentId else None
        (parent["children"] if parent is not None else roots).append(node)
    return {"leafId": leaf_id, "nodes": roots}


def session_rows(infos: list[Any]) -> list[dict[str, Any]]:
    """``list_sessions`` rows: the store's SessionInfo structs as plain objects."""
    import msgspec  # noqa: PLC0415 - not needed at start-up

    return [msgspec.to_builtins(info) for info in infos]


def trust_fields(settings: Any) -> dict[str, Any]:
    """get_state's project-trust fields: ``projectTrusted``, and ``ignoredProjectSettings`` when the
    project's settings asked for something its trust does not allow (see pisces.core.config.trust)."""
    fields: dict[str, Any] = {"projectTrusted": settings.project_trusted}
    if settings.ignored_project_settings:
        fields["ignoredProjectSettings"] = list(settings.ignored_project_settings)
    return fields
