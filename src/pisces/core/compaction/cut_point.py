"""Where to cut a session for compaction, and what goes into the summaries (pi's ``prepareCompaction``).

The path root -> leaf is a list of entries. Compaction keeps the newest ``keepRecentTokens`` worth of
messages and summarises what lies before them. A cut may only land where the kept part still makes sense on
its own: on a user, assistant, bashExecution, custom or summary message (never on a tool result, which
needs the tool call before it). When the cut lands inside a turn (not on the user message that opened it),
the turn is *split*: its beginning is summarised separately from the older history.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pisces.core.compaction.tokens import estimate_context_tokens, estimate_tokens
from pisces.core.store import RawEntry, build_session_context, entry_type, message_role
from pisces.core.store.messages import (
    create_branch_summary_message,
    create_compaction_summary_message,
    create_custom_message,
)

from .serialize import FileOps, file_ops_from_message

__all__ = [
    "CutPoint",
    "Preparation",
    "entry_message",
    "valid_cut_points",
    "find_turn_start",
    "find_cut_point",
    "prepare_compaction",
]

# Message roles a kept part may start with.
_CUT_ROLES = frozenset({"user", "assistant", "bashExecution", "custom", "branchSummary", "compactionSummary"})
# Roles (and entry types) that open a turn.
_TURN_ROLES = frozenset({"user", "bashExecution"})
_USER_LIKE_ENTRIES = frozenset({"custom_message", "branch_summary"})


def _message(entry: Any) -> Any:
    """The message of a ``message`` entry (None for an entry this version could not read)."""
    return getattr(entry, "message", None) if entry_type(entry) == "message" else None


def entry_message(entry: Any, *, with_compaction: bool = True) -> Any:
    """The AgentMessage an entry contributes to a conversation, or None (settings changes, labels, ...)."""
    etype = entry_type(entry)
    if etype == "message":
        return _message(entry)
    if isinstance(entry, RawEntry):  # an entry this version could not read contributes nothing
        return None
    if etype == "custom_message":
        return create_custom_message(entry.customType, entry.content, entry.display, entry.details, entry.timestamp)
    if etype == "branch_summary":
        return create_branch_summary_message(entry.summary, entry.fromId, entry.timestamp)
    if etype == "compaction" and with_compaction:
        return create_compaction_summary_message(entry.summary, entry.tokensBefore, entry.timestamp)
    return None


def valid_cut_points(entries: list[Any], start: int, end: int) -> list[int]:
    """Indices in ``[start, end)`` where the kept part may begin."""
    points = []
    for i in range(start, end):
        entry = entries[i]
        etype = entry_type(entry)
        if etype in _USER_LIKE_ENTRIES:
            points.append(i)
        elif etype == "message":
            msg = _message(entry)
            if msg is not None and message_role(msg) in _CUT_ROLES:
                points.append(i)
    return points


def find_turn_start(entries: list[Any], index: int, start: int) -> int:
    """Index of the entry that opened the turn containing ``index`` (-1 when there is none after ``start``)."""
    for i in range(index, start - 1, -1):
        entry = entries[i]
        etype = entry_type(entry)
        if etype in _USER_LIKE_ENTRIES:
            return i
        if etype == "message":
            msg = _message(entry)
            if msg is not None and message_role(msg) in _TURN_ROLES:
                return i
    return -1


@dataclass
class CutPoint:
    first_kept_index: int
    turn_start_index: int  # -1 unless the cut splits a turn
    is_split_turn: bool


def find_cut_point(entries: list[Any], start: int, end: int, keep_recent_tokens: int) -> CutPoint:
    """Keep roughly the newest ``keep_recent_tokens`` of ``entries[start:end]``.

    Walk back from the newest message entry adding up estimated sizes; once the sum reaches the budget, cut
    at the first valid cut point at or after that entry (default: the oldest valid one, i.e. keep all).
    Settings-like entries just before the cut are kept with it.
    """
    points = valid_cut_points(entries, start, end)
    if not points:
        return CutPoint(start, -1, False)
    cut = points[0]
    total = 0
    for i in range(end - 1, start - 1, -1):
        if entry_type(entries[i]) != "message":
            continue
        msg = _message(entries[i])
        total += estimate_tokens(msg) if msg is not None else 0
        if total >= keep_recent_tokens:
            cut = next((p for p in points if p >= i), cut)
            break
    while cut > start:
        previous = entry_type(entries[cut - 1])
        if previous in ("compaction", "message"):
            break
        cut -= 1
    cut_msg = _message(entries[cut])
    if cut_msg is not None and message_role(cut_msg) == "user":
        return CutPoint(cut, -1, False)
    turn_start = find_turn_start(entries, cut, start)
    return CutPoint(cut, turn_start, turn_start != -1)


@dataclass
class Preparation:
    """Everything a compaction needs, computed before any LLM call."""

    first_kept_entry_id: str
    messages_to_summarize: list[Any]
    turn_prefix_messages: list[Any]
    is_split_turn: bool
    tokens_before: int
    previous_summary: str | None
    file_ops: FileOps = field(default_factory=FileOps)


def _latest_compaction_index(path: list[Any]) -> int:
    for i in range(len(path) - 1, -1, -1):
        if entry_type(path[i]) == "compaction" and not isinstance(path[i], RawEntry):
            return i
    return -1


def prepare_compaction(path: list[Any], keep_recent_tokens: int) -> Preparation | None:
    """Plan a compaction of ``path`` (root -> leaf). None when the leaf already is a compaction or the path
    has nothing to anchor the kept part on."""
    if path and entry_type(path[-1]) == "compaction":
        return None
    prev_index = _latest_compaction_index(path)
    previous = path[prev_index] if prev_index >= 0 else None
    start = 0
    if previous is not None:
        # Everything the previous compaction kept is still in the context, so it may be summarised now.
        kept = next((i for i, e in enumerate(path) if e.id == previous.firstKeptEntryId), -1)
        start = kept if kept >= 0 else prev_index + 1
    end = len(path)
    context = build_session_context(path, path[-1].id) if path else None
    tokens_before = estimate_context_tokens(context.messages)["tokens"] if context else 0

    cut = find_cut_point(path, start, end, keep_recent_tokens)
    if cut.first_kept_index >= len(path):
        return None
    first_kept = path[cut.first_kept_index]
    if not getattr(first_kept, "id", None):
        return None
    history_end = cut.turn_start_index if cut.is_split_turn else cut.first_kept_index

    def messages(lo: int, hi: int) -> list[Any]:
        out = []
        for entry in path[lo:hi]:
            msg = entry_message(entry, with_compaction=False)
            if msg is not None:
                out.append(msg)
        return out

    to_summarize = messages(start, history_end)
    prefix = messages(cut.turn_start_index, cut.first_kept_index) if cut.is_split_turn else []

    ops = FileOps()
    if previous is not None and previous.fromHook is not True:
        ops.add_details(previous.details)
    for msg in to_summarize + prefix:
        file_ops_from_message(msg, ops)
    return Preparation(
        first_kept_entry_id=first_kept.id,
        messages_to_summarize=to_summarize,
        turn_prefix_messages=prefix,
        is_split_turn=cut.is_split_turn,
        tokens_before=tokens_before,
        previous_summary=previous.summary if previous is not None else None,
        file_ops=ops,
    )
