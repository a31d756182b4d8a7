"""A conversation as plain text for a summariser, and the files a conversation touched.

The summariser sees the conversation as a transcript, not as chat turns, so it does not try to carry the
conversation on. The labels and the tool-result cut are pi's, so summaries read the same in both agents.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from pisces.ai.types import AssistantMessage, TextContent, ThinkingContent, ToolCall, ToolResultMessage, UserMessage

__all__ = [
    "TOOL_RESULT_MAX_CHARS",
    "js_json",
    "serialize_conversation",
    "FileOps",
    "file_ops_from_message",
    "format_file_lists",
]

TOOL_RESULT_MAX_CHARS = 2000


def _js_value(value: Any) -> Any:
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            return None  # JSON.stringify(NaN) is null
        if value.is_integer() and abs(value) < 1e21:
            return int(value)
        return value
    if isinstance(value, dict):
        return {str(k): _js_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_js_value(v) for v in value]
    return value


def js_json(value: Any) -> str:
    """``JSON.stringify(value)``: compact, non-ASCII kept, integral floats without ``.0``."""
    return json.dumps(_js_value(value), ensure_ascii=False, separators=(",", ":"))


def _clip(text: str, limit: int = TOOL_RESULT_MAX_CHARS) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n\n[... {len(text) - limit} more characters truncated]"


def _texts(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(b.text for b in content or [] if isinstance(b, TextContent))


def serialize_conversation(messages: list[Any]) -> str:
    """LLM messages (after ``convert_to_llm``) as ``[User]: ...`` / ``[Assistant]: ...`` paragraphs."""
    parts: list[str] = []
    for msg in messages:
        if isinstance(msg, UserMessage):
            text = _texts(msg.content)
            if text:
                parts.append(f"[User]: {text}")
        elif isinstance(msg, AssistantMessage):
            said: list[str] = []
            thought: list[str] = []
            calls: list[str] = []
            for block in msg.content:
                if isinstance(block, TextContent):
                    said.append(block.text)
                elif isinstance(block, ThinkingContent):
                    thought.append(block.thinking)
                elif isinstance(block, ToolCall):
                    args = ", ".join(f"{k}={js_json(v)}" for k, v in (block.arguments or {}).items())
                    calls.append(f"{block.name}({args})")
            if thought:
                parts.append("[Assistant thinking]: " + "\n".join(thought))
            if said:
                parts.append("[Assistant]: " + "\n".join(said))
            if calls:
                parts.append("[Assistant tool calls]: " + "; ".join(calls))
        elif isinstance(msg, ToolResultMessage):
            text = _texts(msg.content)
            if text:
                parts.append(f"[Tool result]: {_clip(text)}")
    return "\n\n".join(parts)


@dataclass
class FileOps:
    """Paths seen in read / write / edit tool calls (insertion-ordered sets)."""

    read: dict[str, None] = field(default_factory=dict)
    written: dict[str, None] = field(default_factory=dict)
    edited: dict[str, None] = field(default_factory=dict)

    def add_details(self, details: Any) -> None:
        """Carry over ``{readFiles, modifiedFiles}`` from an earlier compaction or branch summary."""
        if not isinstance(details, dict):
            return
        for key, target in (("readFiles", self.read), ("modifiedFiles", self.edited)):
            files = details.get(key)
            if isinstance(files, list):
                for f in files:
                    if isinstance(f, str):
                        target[f] = None

    def lists(self) -> tuple[list[str], list[str]]:
        """(files only read, files modified), each sorted."""
        modified = set(self.edited) | set(self.written)
        read_only = sorted(f for f in self.read if f not in modified)
        return read_only, sorted(modified)


_FILE_TOOLS = {"read": "read", "write": "written", "edit": "edited"}


def file_ops_from_message(message: Any, ops: FileOps) -> None:
    """Record the ``path`` argument of the read/write/edit tool calls in an assistant message."""
    if not isinstance(message, AssistantMessage):
        return
    for block in message.content:
        if not isinstance(block, ToolCall) or block.name not in _FILE_TOOLS:
            continue
        path = (block.arguments or {}).get("path")
        if isinstance(path, str) and path:
            getattr(ops, _FILE_TOOLS[block.name])[path] = None


def format_file_lists(read_files: list[str], modified_files: list[str]) -> str:
    """The ``<read-files>`` / ``<modified-files>`` blocks appended to a summary ("" when both are empty)."""
    sections = []
    if read_files:
        sections.append("<read-files>\n" + "\n".join(read_files) + "\n</read-files>")
    if modified_files:
        sections.append("<modified-files>\n" + "\n".join(modified_files) + "\n</modified-files>")
    return "\n\n" + "\n\n".join(sections) if sections else ""
