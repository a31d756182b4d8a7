"""Session files: pi's JSONL tree format (v3), entries, context building, listing.

The one class most callers need is :class:`SessionManager`; :func:`build_session_context` and
:func:`convert_to_llm` turn a session into what the LLM sees, :func:`list_sessions` lists files.
"""

from .context import LAST, ModelRef, SessionContext, build_session_context, latest_compaction, path_to
from .entries import (
    CURRENT_SESSION_VERSION,
    BranchSummaryEntry,
    CompactionEntry,
    CustomEntry,
    CustomMessageEntry,
    LabelEntry,
    MessageEntry,
    ModelChangeEntry,
    RawEntry,
    SessionEntry,
    SessionHeader,
    SessionInfoEntry,
    ThinkingLevelChangeEntry,
    decode_entry,
    encode_line,
    entry_type,
)
from .ids import iso_from_ms, iso_now, iso_to_ms, new_entry_id, uuid7
from .listing import SessionInfo, find_most_recent_session, find_sessions_by_id, list_sessions, read_session_info
from .load import LoadedSession, load_session_file, parse_session_bytes
from .messages import (
    AgentMessage,
    BashExecutionMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    CustomMessage,
    bash_execution_to_text,
    convert_to_llm,
    decode_message,
    message_role,
)
from .paths import agent_dir, default_session_dir, encode_cwd, resolve_session_dir, session_file_name, sessions_root
from .session_file import EntryNotFoundError, SessionManager
from .target import SessionFileError, load_target
from .tree import SessionTreeNode, build_tree

__all__ = [
    "LAST", "ModelRef", "SessionContext", "build_session_context", "latest_compaction", "path_to",
    "CURRENT_SESSION_VERSION", "BranchSummaryEntry", "CompactionEntry", "CustomEntry", "CustomMessageEntry",
    "LabelEntry", "MessageEntry", "ModelChangeEntry", "RawEntry", "SessionEntry", "SessionHeader",
    "SessionInfoEntry", "ThinkingLevelChangeEntry", "decode_entry", "encode_line", "entry_type",
    "iso_from_ms", "iso_now", "iso_to_ms", "new_entry_id", "uuid7",
    "SessionInfo", "find_most_recent_session", "find_sessions_by_id", "list_sessions", "read_session_info",
    "LoadedSession", "load_session_file", "parse_session_bytes",
    "AgentMessage", "BashExecutionMessage", "BranchSummaryMessage", "CompactionSummaryMessage", "CustomMessage",
    "bash_execution_to_text", "convert_to_llm", "decode_message", "message_role",
    "agent_dir", "default_session_dir", "encode_cwd", "resolve_session_dir", "session_file_name", "sessions_root",
    "EntryNotFoundError", "SessionManager", "SessionTreeNode", "build_tree", "SessionFileError", "load_target",
]
