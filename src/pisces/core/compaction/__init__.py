"""Compaction: keep a long session inside the model's context window by summarising its older part.

The session's collaborator that decides when to compact is ``pisces.core.session.compactor``;
``prepare_compaction`` / ``find_cut_point`` decide what is kept; ``run_compaction`` asks the model for the
summary; ``serialize_conversation`` is the transcript the model reads.

The face is lazy: ``tokens`` (the context-size estimate the session shows at every ``get_state``) is imported at
start-up without pulling in the summariser.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "CutPoint": "cut_point",
    "Preparation": "cut_point",
    "entry_message": "cut_point",
    "find_cut_point": "cut_point",
    "find_turn_start": "cut_point",
    "prepare_compaction": "cut_point",
    "FileOps": "serialize",
    "file_ops_from_message": "serialize",
    "format_file_lists": "serialize",
    "serialize_conversation": "serialize",
    "CompactionCancelled": "summarize",
    "CompactionResult": "summarize",
    "Summarizer": "summarize",
    "SummaryError": "summarize",
    "collect_branch_entries": "summarize",
    "prepare_branch_entries": "summarize",
    "run_compaction": "summarize",
    "summarize_branch_entries": "summarize",
}
__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
