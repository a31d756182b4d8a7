"""From a session tree to what the LLM sees: pi's ``buildSessionContext``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, NamedTuple

from pisces.ai.types import AssistantMessage

from .entries import (
    BranchSummaryEntry,
    CompactionEntry,
    CustomMessageEntry,
    MessageEntry,
    ModelChangeEntry,
    SessionEntry,
    ThinkingLevelChangeEntry,
)
from .messages import (
    create_branch_summary_message,
    create_compaction_summary_message,
    create_custom_message,
)

__all__ = ["ModelRef", "SessionContext", "build_session_context", "path_to", "latest_compaction", "LAST"]


class ModelRef(NamedTuple):
    provider: str
    model_id: str


@dataclass
class SessionContext:
    messages: list[Any] = field(default_factory=list)  # AgentMessages
    thinking_level: str = "off"
    model: ModelRef | None = None


class _Last:
    def __repr__(self) -> str:
        return "LAST"


LAST: Any = _Last()
"""``leaf_id`` default of :func:`build_session_context`: the last entry (pi's ``undefined``)."""


def path_to(leaf: SessionEntry | None, by_id: Mapping[str, SessionEntry]) -> list[SessionEntry]:
    """Root -> ``leaf`` by parent links. Stops at a missing parent or a cycle."""
    path: list[SessionEntry] = []
    seen: set[str] = set()
    current = leaf
    while current is not None and current.id not in seen:
        seen.add(current.id)
        path.append(current)
        parent = current.parentId
        current = by_id.get(parent) if parent else None
    path.reverse()
    return path


def latest_compaction(entries: Iterable[SessionEntry]) -> CompactionEntry | None:
    found = None
    for entry in entries:
        if isinstance(entry, CompactionEntry):
            found = entry
    return found


def _append_message(messages: list[Any], entry: SessionEntry) -> None:
    if isinstance(entry, MessageEntry):
        messages.append(entry.message)
    elif isinstance(entry, CustomMessageEntry):
        messages.append(
            create_custom_message(entry.customType, entry.content, entry.display, entry.details, entry.timestamp)
        )
    elif isinstance(entry, BranchSummaryEntry) and entry.summary:
        messages.append(create_branch_summary_message(entry.summary, entry.fromId, entry.timestamp))


def build_session_context(
    entries: list[SessionEntry],
    leaf_id: str | None = LAST,
    by_id: Mapping[str, SessionEntry] | None = None,
) -> SessionContext:
    """Messages, thinking level and model along the path root -> ``leaf_id``.

    ``leaf_id=None`` means "before the first entry" (empty context). ``LAST`` (the default) or an unknown id
    means the last entry. The last ``thinking_level_change`` gives the thinking level; the last
    ``model_change`` or assistant message gives the model. With a compaction on the path the messages are
    the compaction summary, the entries from ``firstKeptEntryId`` up to the compaction, then the entries
    after it. ``custom_message`` and non-empty ``branch_summary`` entries become messages.
    """
    if leaf_id is None:
        return SessionContext()
    if by_id is None:
        by_id = {e.id: e for e in entries}
    leaf = by_id.get(leaf_id) if isinstance(leaf_id, str) else None
    if leaf is None:
        leaf = entries[-1] if entries else None
    if leaf is None:
        return SessionContext()

    path = path_to(leaf, by_id)
    thinking_level = "off"
    model: ModelRef | None = None
    compaction_idx = -1
    for i, entry in enumerate(path):
        if isinstance(entry, ThinkingLevelChangeEntry):
            thinking_level = entry.thinkingLevel
        elif isinstance(entry, ModelChangeEntry):
            model = ModelRef(entry.provider, entry.modelId)
        elif isinstance(entry, MessageEntry) and isinstance(entry.message, AssistantMessage):
            model = ModelRef(entry.message.provider, entry.message.model)
        elif isinstance(entry, CompactionEntry):
            compaction_idx = i

    messages: list[Any] = []
    if compaction_idx >= 0:
        compaction = path[compaction_idx]
        assert isinstance(compaction, CompactionEntry)
        messages.append(
            create_compaction_summary_message(compaction.summary, compaction.tokensBefore, compaction.timestamp)
        )
        found_first_kept = False
        for entry in path[:compaction_idx]:
            if entry.id == compaction.firstKeptEntryId:
                found_first_kept = True
            if found_first_kept:
                _append_message(messages, entry)
        for entry in path[compaction_idx + 1 :]:
            _append_message(messages, entry)
    else:
        for entry in path:
            _append_message(messages, entry)
    return SessionContext(messages=messages, thinking_level=thinking_level, model=model)
