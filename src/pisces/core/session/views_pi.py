"""Read-only views in the shapes later pi versions gave their commands (``get_tree``, ``get_entries``,
``get_fork_messages`` with timestamps, ``get_available_thinking_levels``). Seed 002's shapes for its own
names (``get_session_tree`` …) stay in session_views.py.

``pi_tree`` is later pi's lightweight tree: one node per entry, ``{id, parentId, timestamp, type, …,
label?, children}``, where metadata entries (``label``, ``session_info``, ``custom``) are left out and their
children hang from the nearest kept ancestor (so ``parentId`` may name a grandparent in the file).
"""

from __future__ import annotations

from typing import Any

from pisces.ai.types import AssistantMessage, TextContent, ToolCall, ToolResultMessage, UserMessage
from pisces.core.store import entry_type, iso_from_ms

PREVIEW_CHARS = 100
_METADATA = ("label", "session_info", "custom")


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(b.text for b in content or () if isinstance(b, TextContent))


def _preview(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= PREVIEW_CHARS else flat[:PREVIEW_CHARS - 1] + "…"


def _message_fields(m: Any, tool_args: dict[str, Any], include_content: bool) -> dict[str, Any]:
    if isinstance(m, ToolResultMessage):
        text = _text(m.content)
        out: dict[str, Any] = {"type": "tool_result", "toolName": m.toolName}
        if m.toolCallId in tool_args:
            out["toolArgs"] = tool_args[m.toolCallId]
        out["preview"] = _preview(text)
        if include_content:
            out["content"] = text
        return out
    role = getattr(m, "__struct_config__", None)
    role = role.tag if role is not None else "custom"
    if isinstance(m, UserMessage):
        text = _text(m.content)
    elif isinstance(m, AssistantMessage):
        text = _text(m.content)
        if not text:
            names = [b.name for b in m.content if isinstance(b, ToolCall)]
            text = f"[tool calls: {', '.join(names)}]" if names else ""
    elif role == "bashExecution":
        text = f"$ {m.command}\n{m.output}"
    elif role in ("branchSummary", "compactionSummary"):
        text = m.summary
    else:
        text = _text(getattr(m, "content", ""))
    out = {"type": "message", "role": role, "preview": _preview(text)}
    if include_content:
        out["content"] = text
    if isinstance(m, AssistantMessage):
        if m.stopReason in ("error", "aborted"):
            out["stopReason"] = m.stopReason
        if isinstance(m.errorMessage, str):
            out["errorMessage"] = m.errorMessage
    return out


def _entry_fields(e: Any, tool_args: dict[str, Any], include_content: bool) -> dict[str, Any]:
    etype = entry_type(e)
    if etype == "message":
        return _message_fields(e.message, tool_args, include_content)
    if etype == "compaction":
        return {"type": "compaction", "tokensBefore": e.tokensBefore}
    if etype == "model_change":
        return {"type": "model_change", "provider": e.provider, "modelId": e.modelId}
    if etype == "thinking_level_change":
        return {"type": "thinking_level_change", "thinkingLevel": e.thinkingLevel}
    if etype == "branch_summary":
        return {"type": "branch_summary", "summary": e.summary}
    if etype == "custom_message":
        text = _text(e.content)
        out = {"type": "custom_message", "customType": e.customType, "preview": _preview(text)}
        if include_content:
            out["content"] = text
        return out
    return {"type": etype}


def pi_tree(entries: list[Any], leaf_id: str | None, labels: dict[str, str], *,
            include_content: bool = False, flat: bool = False) -> dict[str, Any]:
    """``{tree: [node…], leafId}`` (later pi's ``get_tree``); iterative, so deep sessions are fine.
    ``flat``: ``{nodes: [node…], leafId}``, the same nodes in file order without ``children`` (a client's
    JSON decoder need not nest one level per entry: Python's stops near 1000)."""
    kept: dict[str, dict[str, Any]] = {}
    stand_in: dict[str, str | None] = {}  # a metadata entry's id -> its nearest kept ancestor
    tool_args: dict[str, Any] = {}
    roots: list[dict[str, Any]] = []
    for e in entries:
        parent = e.parentId
        while parent is not None and parent in stand_in:
            parent = stand_in[parent]
        if entry_type(e) in _METADATA:
            stand_in[e.id] = parent
            continue
        m = getattr(e, "message", None)
        if isinstance(m, AssistantMessage):
            for block in m.content:
                if isinstance(block, ToolCall):
                    tool_args[block.id] = block.arguments
        node: dict[str, Any] = {"id": e.id, "parentId": parent, "timestamp": e.timestamp}
        node.update(_entry_fields(e, tool_args, include_content))
        if e.id in labels:
            node["label"] = labels[e.id]
        kept[e.id] = node
        if flat:
            roots.append(node)
            continue
        node["children"] = []
        owner = kept.get(parent) if parent is not None else None
        (owner["children"] if owner is not None else roots).append(node)
    leaf = leaf_id
    while leaf is not None and leaf in stand_in:
        leaf = stand_in[leaf]
    return {"nodes" if flat else "tree": roots, "leafId": leaf}


def entries_since(entries: list[Any], since: str | None) -> list[Any]:
    """Every entry after the one whose id is ``since`` (all of them without it), in append order.
    Raises KeyError when no entry has that id."""
    if since is None:
        return list(entries)
    for i, e in enumerate(entries):
        if e.id == since:
            return entries[i + 1:]
    raise KeyError(since)


def fork_messages(entries: list[Any]) -> list[dict[str, str]]:
    """User messages of the whole file, in file order: ``{entryId, text, timestamp}`` (the timestamp is
    the message's own, as ISO 8601; later pi added it)."""
    out = []
    for e in entries:
        if entry_type(e) != "message" or not isinstance(e.message, UserMessage):
            continue
        text = _text(e.message.content)
        if text:
            ts = e.message.timestamp
            out.append({"entryId": e.id, "text": text,
                        "timestamp": iso_from_ms(ts) if isinstance(ts, (int, float)) else e.timestamp})
    return out
