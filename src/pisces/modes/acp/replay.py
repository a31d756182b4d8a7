"""A stored conversation -> the ``session/update`` notifications ``session/load`` sends before its response.

The current branch is replayed from its first entry (compaction does not hide earlier turns from the user):
user messages, the assistant's thinking and text, and every tool call with its result, shown as the live turn
showed it (the same kinds, titles, locations, diffs and output). A tool call whose result was never recorded
(the process died while it ran) is closed as failed with a sentence saying so, rather than left spinning.
Commands the user ran with ``!`` appear as finished ``execute`` calls.
"""

from __future__ import annotations

from typing import Any, Iterator

from acp import (
    image_block,
    start_tool_call,
    text_block,
    tool_content,
    update_agent_message_text,
    update_agent_thought_text,
    update_tool_call,
    update_user_message,
)

from pisces.ai.types import (
    AssistantMessage,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from pisces.core.store import BashExecutionMessage, CustomMessage, entry_type

from . import toolview
from .translate import finished_call

NO_RESULT = "No result was recorded for this call: the session ended while it ran."


def _user_blocks(content: Any) -> Iterator[Any]:
    if isinstance(content, str):
        yield update_user_message(text_block(content))
        return
    for block in content:
        if isinstance(block, TextContent):
            yield update_user_message(text_block(block.text))
        elif isinstance(block, ImageContent):
            yield update_user_message(image_block(block.data, block.mimeType))


def history_updates(entries: list[Any], cwd: str) -> Iterator[Any]:
    open_calls: dict[str, tuple[str, Any]] = {}
    for entry in entries:
        if entry_type(entry) != "message":
            continue
        message = entry.message
        if isinstance(message, UserMessage):
            yield from _user_blocks(message.content)
        elif isinstance(message, CustomMessage) and message.display:
            yield from _user_blocks(message.content)
        elif isinstance(message, AssistantMessage):
            for block in message.content:
                if isinstance(block, ThinkingContent) and block.thinking:
                    yield update_agent_thought_text(block.thinking)
                elif isinstance(block, TextContent) and block.text:
                    yield update_agent_message_text(block.text)
                elif isinstance(block, ToolCall):
                    open_calls[block.id] = (block.name, block.arguments)
                    view = toolview.describe(block.name, block.arguments, cwd)
                    yield start_tool_call(block.id, view.title, kind=view.kind, status="in_progress",
                                          content=view.content or None, locations=view.locations or None,
                                          raw_input=block.arguments)
        elif isinstance(message, ToolResultMessage):
            name, args = open_calls.pop(message.toolCallId, (message.toolName, {}))
            yield finished_call(message.toolCallId, name, args, message, message.isError, cwd)
        elif isinstance(message, BashExecutionMessage):
            yield from _user_command(message)
    for call_id in open_calls:
        yield update_tool_call(call_id, status="failed",
                               content=[tool_content(text_block(NO_RESULT))])


def _user_command(message: BashExecutionMessage) -> Iterator[Any]:
    call_id = f"user-bash-{message.timestamp}"
    failed = message.cancelled or (isinstance(message.exitCode, int) and message.exitCode != 0)
    yield start_tool_call(call_id, toolview.short_command(message.command) or "bash", kind="execute",
                          status="failed" if failed else "completed",
                          content=[tool_content(text_block(toolview.fenced(message.output)))] if message.output
                          else None, raw_input={"command": message.command})
