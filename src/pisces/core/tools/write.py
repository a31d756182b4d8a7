"""The ``write`` tool: create or overwrite a file, creating parent directories."""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Any

from pisces.agent.types import AgentTool, AgentToolResult, ToolError, ToolUpdate
from pisces.ai.abort import AbortSignal
from pisces.ai.types import TextContent
from pisces.core.safe_open import NotRegularFileError, write_atomic

from ._common import await_abortable, check_aborted, run_abortable
from .descriptions import WRITE_DESCRIPTION
from .paths import file_mutation_queue, node_error_message, not_regular_message, resolve_to_cwd, write_error_message
from .schemas import WRITE_SCHEMA

if TYPE_CHECKING:
    from .backends import FileBackend



_LONE_SURROGATE = re.compile("[\ud800-\udfff]")  # written as U+FFFD, as Node does


def js_length(text: str) -> int:
    """``text.length`` in JavaScript: UTF-16 code units (pi reports this as the "bytes" written)."""
    if text.isascii():
        return len(text)
    return len(text) + sum(1 for ch in text if ord(ch) > 0xFFFF)


def _write(path: str, display_path: str, content: str) -> None:
    parent = os.path.dirname(path)
    try:
        os.makedirs(parent, exist_ok=True)
    except OSError as exc:
        raise ToolError(node_error_message(exc, "mkdir", parent)) from None
    data = _LONE_SURROGATE.sub("\ufffd", content).encode("utf-8")
    existed = os.path.exists(path)
    try:
        write_atomic(path, data)  # a full disk leaves the old file whole
    except NotRegularFileError as exc:
        raise ToolError(not_regular_message("write", display_path, exc, "open", path)) from None
    except OSError as exc:
        raise ToolError(write_error_message(exc, path, existed)) from None


class WriteTool(AgentTool):
    name = "write"
    label = "write"
    description = WRITE_DESCRIPTION
    parameters = WRITE_SCHEMA

    def __init__(self, cwd: str, *, files: FileBackend | None = None) -> None:
        self.cwd = cwd
        self.files = files

    async def execute(self, tool_call_id: str, params: dict[str, Any], signal: AbortSignal,
                      on_update: ToolUpdate) -> AgentToolResult:
        raw_path: str = params["path"]
        content: str = params["content"]
        path = resolve_to_cwd(raw_path, self.cwd)
        async with file_mutation_queue(path):
            check_aborted(signal)
            if self.files is None:
                await run_abortable(signal, _write, path, raw_path, content)
            else:
                await await_abortable(signal, self.files.write_text(path, _LONE_SURROGATE.sub("\ufffd", content)))
        text = f"Successfully wrote {js_length(content)} bytes to {raw_path}"
        return AgentToolResult(content=[TextContent(text=text)])


__all__ = ["WriteTool", "WRITE_SCHEMA", "WRITE_DESCRIPTION", "js_length"]
