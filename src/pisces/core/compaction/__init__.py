"""Compaction: keep a long session inside the model's context window by summarising its older part.

``Compactor`` is the session's collaborator (manual, threshold and overflow compaction, branch summaries);
``prepare_compaction`` / ``find_cut_point`` decide what is kept; ``run_compaction`` asks the model for the
summary; ``serialize_conversation`` is the transcript the model reads.
"""

from .compactor import OVERFLOW_RETRY_FAILED, Compactor, is_context_overflow
from .cut_point import CutPoint, Preparation, entry_message, find_cut_point, find_turn_start, prepare_compaction
from .serialize import FileOps, file_ops_from_message, format_file_lists, serialize_conversation
from .summarize import (
    CompactionCancelled,
    CompactionResult,
    Summarizer,
    SummaryError,
    collect_branch_entries,
    prepare_branch_entries,
    run_compaction,
    summarize_branch_entries,
)

__all__ = [
    "Compactor", "OVERFLOW_RETRY_FAILED", "is_context_overflow",
    "CutPoint", "Preparation", "entry_message", "find_cut_point", "find_turn_start", "prepare_compaction",
    "FileOps", "file_ops_from_message", "format_file_lists", "serialize_conversation",
    "CompactionCancelled", "CompactionResult", "Summarizer", "SummaryError", "collect_branch_entries",
    "prepare_branch_entries", "run_compaction", "summarize_branch_entries",
]
