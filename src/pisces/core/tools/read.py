"""The ``read`` tool: a text file (a window of lines, head-truncated) or an image (as an attachment).

Big files are streamed: only the lines that can appear in the output are decoded and kept, the rest of the
file is just counted, so a 10 MB file costs a few milliseconds and little memory. The numbers in the
result (total lines, bytes of the selection) are the same as if the whole file had been read.
"""

from __future__ import annotations

import base64
import codecs
import contextlib
import io
import os
import struct
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, BinaryIO

from pisces.agent.types import AgentTool, AgentToolResult, ToolError, ToolUpdate
from pisces.ai.abort import AbortSignal
from pisces.ai.types import ImageContent, TextContent
from pisces.core.safe_open import NotRegularFileError, open_regular

from ._common import OPERATION_ABORTED, await_abortable, run_abortable, text_result
from .descriptions import READ_DESCRIPTION
from .paths import node_error_message, not_regular_message, resolve_read_path
from .schemas import READ_SCHEMA
from .truncate import (
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_LINES,
    TruncationResult,
    format_size,
    head_from_lines,
    js_number,
    utf8_len,
)

if TYPE_CHECKING:
    from .backends import FileBackend



# An image whose base64 is this big is omitted (pi first tries to shrink it; see _image_content).
IMAGE_MAX_BASE64_BYTES = int(4.5 * 1024 * 1024)
_CHUNK = 1 << 20
# Once the output is decided (truncated, or a first line over the limit), the scan stops counting after this
# many bytes of the file and reports lower bounds: a 2 GB single-line file costs 2 s to count, and buys nothing.
SCAN_PAST_OUTPUT = 32 * 1024 * 1024


# ---------------------------------------------------------------------------------------------
# Images
# ---------------------------------------------------------------------------------------------
def detect_image_mime(head: bytes) -> str | None:
    """png / jpeg / gif / webp from the first bytes of a file, else None."""
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return None if _is_apng(head) else "image/png"
    if head.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if head.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if len(head) >= 12 and head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    return None


def _is_apng(head: bytes) -> bool:
    # An animated PNG has an acTL chunk before the first IDAT; file-type reports it as image/apng,
    # which pi does not treat as an image.
    pos = 8
    while pos + 8 <= len(head):
        length, kind = struct.unpack(">I4s", head[pos:pos + 8])
        if kind == b"acTL":
            return True
        if kind == b"IDAT":
            return False
        pos += 12 + length
    return False


def _image_content(data: bytes, mime: str, too_big: bool = False) -> list[TextContent | ImageContent]:
    """pi sends an image unchanged when it is within 2000x2000 and 4.5 MB of base64, and otherwise
    resizes it. pisces has no image library, so a larger image is sent unchanged while its base64 fits
    the byte budget, and omitted (with pi's note) when it does not."""
    encoded = "" if too_big else base64.b64encode(data).decode("ascii")
    if too_big or len(encoded) >= IMAGE_MAX_BASE64_BYTES:
        return [TextContent(text=f"Read image file [{mime}]\n[Image omitted: could not be resized below the "
                                 "inline image size limit.]")]
    return [TextContent(text=f"Read image file [{mime}]"), ImageContent(data=encoded, mimeType=mime)]


# ---------------------------------------------------------------------------------------------
# Text
# ---------------------------------------------------------------------------------------------
@dataclass(slots=True)
class _Window:
    total_file_lines: int
    kept: list[str]          # the first selected lines: enough to decide the head truncation
    selected_lines: int
    selected_bytes: int      # UTF-8 bytes of the selected lines joined with "\n"
    first_line_bytes: int    # UTF-8 bytes of the first selected line (whole line, even if huge)
    complete: bool = True    # False: the scan stopped early (SCAN_PAST_OUTPUT): the counts are lower bounds


def _scan(source: str | BinaryIO, start: int, end: int | None, max_lines: int, max_bytes: int,
          cancel: threading.Event | None = None) -> _Window:
    """Stream ``source`` (a path, a binary file open at its start, or the bytes of a file a backend served);
    select lines [start, end) (0-based, ``end`` None = to EOF). Memory stays bounded whatever the file's
    size; ``cancel`` stops the scan between two chunks (OperationAborted)."""
    total_nl = 0
    line = 0                   # index of the line that starts at ``pos``
    kept: list[str] = []
    kept_bytes = 0
    collecting = True
    parts: list[str] = []      # pieces of the line being collected
    part_bytes = 0
    sel_bytes = 0
    first_line_bytes = -1
    ended_by_newline = False   # the selection ended at a newline (which is not part of it)
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    sentinel = "x" * (max_bytes + 1)
    read_total = 0
    complete = True

    with (open(source, "rb") if isinstance(source, str) else contextlib.nullcontext(source)) as f:
        while True:
            if cancel is not None and cancel.is_set():
                raise ToolError(OPERATION_ABORTED)
            chunk = f.read(_CHUNK)
            if not chunk:
                break
            read_total += len(chunk)
            if read_total > SCAN_PAST_OUTPUT and line >= start and (not collecting or part_bytes > max_bytes):
                # the output is decided (truncated, or a first line over the limit): the rest would only be
                # counted, and a 2 GB single-line file is not read whole for a count
                complete = False
                break
            total_nl += chunk.count(b"\n")
            pos = 0
            n = len(chunk)
            while pos < n:
                if line < start:  # before the selection: only count
                    here = chunk.count(b"\n", pos)
                    if line + here < start:
                        line += here
                        pos = n
                        break
                    while line < start:
                        pos = chunk.index(b"\n", pos) + 1
                        line += 1
                    continue
                if end is not None and line >= end:  # after the selection
                    pos = n
                    break
                if collecting:
                    nl = chunk.find(b"\n", pos)
                    stop = n if nl == -1 else nl + 1
                    text = decoder.decode(chunk[pos:stop])
                    if nl != -1:
                        text = text[:-1]
                    size = utf8_len(text)
                    part_bytes += size
                    sel_bytes += size
                    if part_bytes <= max_bytes:
                        parts.append(text)
                    pos = stop
                    if nl == -1:
                        break
                    # a whole line
                    if first_line_bytes < 0:
                        first_line_bytes = part_bytes
                    kept.append("".join(parts) if part_bytes <= max_bytes else sentinel)
                    kept_bytes += part_bytes + (1 if len(kept) > 1 else 0)
                    parts, part_bytes = [], 0
                    line += 1
                    if end is not None and line >= end:
                        ended_by_newline = True
                    else:
                        sel_bytes += 1
                    if len(kept) > max_lines or kept_bytes > max_bytes:
                        collecting = False
                    continue
                # inside the selection, enough kept: count lines and bytes in bulk
                here = chunk.count(b"\n", pos)
                if end is None or line + here < end:
                    sel_bytes += utf8_len(decoder.decode(chunk[pos:]))
                    line += here
                    pos = n
                    break
                stop = pos
                while line < end:
                    stop = chunk.index(b"\n", stop) + 1
                    line += 1
                sel_bytes += utf8_len(decoder.decode(chunk[pos:stop])) - 1
                ended_by_newline = True
                pos = stop
    if not complete:
        if collecting:  # inside an over-long line: it is at least this long
            if first_line_bytes < 0:
                first_line_bytes = part_bytes
            kept.append(sentinel)
        total_lines = total_nl + 1
        selected = max(0, (total_lines if end is None else min(end, total_lines)) - start)
        return _Window(total_lines, kept, max(selected, len(kept)), max(sel_bytes, max_bytes + 1),
                       max(first_line_bytes, 0), complete=False)
    if collecting and (parts or part_bytes or (line >= start and not ended_by_newline)):
        # the last line of the file had no newline (or the file ended inside a line)
        tail = decoder.decode(b"", final=True)
        part_bytes += utf8_len(tail)
        sel_bytes += utf8_len(tail)
        if part_bytes <= max_bytes:
            parts.append(tail)
        if line >= start and (end is None or line < end):
            if first_line_bytes < 0:
                first_line_bytes = part_bytes
            kept.append("".join(parts) if part_bytes <= max_bytes else sentinel)
    elif not collecting and not ended_by_newline:
        sel_bytes += utf8_len(decoder.decode(b"", final=True))
    total_lines = total_nl + 1
    sel_end = total_lines if end is None else min(end, total_lines)
    selected = max(0, sel_end - start)
    return _Window(total_lines, kept, selected, sel_bytes if selected else 0, max(first_line_bytes, 0))


def _read_text(source: str | BinaryIO, display_path: str, offset: Any, limit: Any,
               cancel: threading.Event | None = None) -> tuple[str, Any]:
    start = max(0, int(offset) - 1) if offset else 0
    start_display = start + 1
    user_limit = None if limit is None else int(limit)
    end = None if user_limit is None else start + max(user_limit, 0)
    window = _scan(source, start, end, DEFAULT_MAX_LINES, DEFAULT_MAX_BYTES, cancel)
    if start >= window.total_file_lines:
        raise ToolError(f"Offset {js_number(offset)} is beyond end of file ({window.total_file_lines} lines total)")
    if window.selected_lines <= DEFAULT_MAX_LINES and window.selected_bytes <= DEFAULT_MAX_BYTES:
        content = "\n".join(window.kept)
        trunc = TruncationResult(content, False, None, window.selected_lines, window.selected_bytes,
                                 window.selected_lines, window.selected_bytes, False, False,
                                 DEFAULT_MAX_LINES, DEFAULT_MAX_BYTES)
    else:
        trunc = head_from_lines(window.kept, window.selected_lines, window.selected_bytes, DEFAULT_MAX_LINES,
                                DEFAULT_MAX_BYTES)
    limit_text = format_size(DEFAULT_MAX_BYTES)
    more = "" if window.complete else "more than "  # a scan stopped early: what it counted is a lower bound
    if trunc.firstLineExceedsLimit:
        size = more + format_size(window.first_line_bytes)
        text = (f"[Line {start_display} is {size}, exceeds {limit_text} limit. Use bash: sed -n "
                f"'{start_display}p' {display_path} | head -c {DEFAULT_MAX_BYTES}]")
        return text, {"truncation": trunc.to_dict()}
    if trunc.truncated:
        end_display = start_display + trunc.outputLines - 1
        nxt = end_display + 1
        of = f"{more}{window.total_file_lines}"
        if trunc.truncatedBy == "lines":
            notice = f"[Showing lines {start_display}-{end_display} of {of}. Use offset={nxt} to continue.]"
        else:
            notice = (f"[Showing lines {start_display}-{end_display} of {of} ({limit_text} "
                      f"limit). Use offset={nxt} to continue.]")
        return f"{trunc.content}\n\n{notice}", {"truncation": trunc.to_dict()}
    if not window.complete:
        return trunc.content, {"truncation": trunc.to_dict()}
    if user_limit is not None and start + window.selected_lines < window.total_file_lines:
        remaining = window.total_file_lines - (start + window.selected_lines)
        nxt = start + window.selected_lines + 1
        return f"{trunc.content}\n\n[{remaining} more lines in file. Use offset={nxt} to continue.]", None
    return trunc.content, None


def _read(path: str, display_path: str, offset: Any, limit: Any, cancel: threading.Event | None = None
          ) -> AgentToolResult:
    try:
        if not os.access(path, os.R_OK):
            os.stat(path)  # raises the precise error (ENOENT, ELOOP, ...)
            raise PermissionError(13, "Permission denied")
    except OSError as exc:
        raise ToolError(node_error_message(exc, "access", path)) from None
    try:
        fd = open_regular(path)  # never a FIFO, a device (/dev/zero, /dev/stdin) or a socket
    except NotRegularFileError as exc:
        raise ToolError(not_regular_message("read", display_path, exc, "read")) from None
    except OSError as exc:
        raise ToolError(node_error_message(exc, "open", path)) from None
    with os.fdopen(fd, "rb") as f:
        try:
            head = f.read(4100)
            mime = detect_image_mime(head)
            f.seek(0)
            if mime:
                size = os.fstat(fd).st_size
                if (size + 2) // 3 * 4 >= IMAGE_MAX_BASE64_BYTES:  # too big: don't even load it
                    return AgentToolResult(content=_image_content(b"", mime, too_big=True))
                data = f.read(IMAGE_MAX_BASE64_BYTES // 4 * 3 + 1)
                return AgentToolResult(content=_image_content(data, mime))
            text, details = _read_text(f, display_path, offset, limit, cancel)
        except OSError as exc:
            raise ToolError(node_error_message(exc, "read")) from None
    return text_result(text, details)


def _local_image(path: str) -> AgentToolResult | None:
    """The image at ``path`` when it is a local image file, else None (with a file backend, only text goes
    through the backend)."""
    try:
        with os.fdopen(open_regular(path), "rb") as f:  # never a FIFO or a device
            mime = detect_image_mime(f.read(4100))
    except OSError:
        return None
    return _read(path, path, None, None) if mime else None


def _text_from_backend(text: str, display_path: str, offset: Any, limit: Any) -> AgentToolResult:
    try:
        content, details = _read_text(io.BytesIO(text.encode("utf-8", "replace")), display_path, offset, limit)
    except OSError as exc:
        raise ToolError(node_error_message(exc, "read")) from None
    return text_result(content, details)


class ReadTool(AgentTool):
    name = "read"
    label = "read"
    description = READ_DESCRIPTION
    parameters = READ_SCHEMA

    def __init__(self, cwd: str, *, files: FileBackend | None = None) -> None:
        self.cwd = cwd
        self.files = files

    async def execute(self, tool_call_id: str, params: dict[str, Any], signal: AbortSignal,
                      on_update: ToolUpdate) -> AgentToolResult:
        raw_path = params["path"]
        path = resolve_read_path(raw_path, self.cwd)
        offset, limit = params.get("offset"), params.get("limit")
        if self.files is None:
            cancel = threading.Event()
            return await run_abortable(signal, _read, path, raw_path, offset, limit, cancel, cancel=cancel)
        image = await run_abortable(signal, _local_image, path)
        if image is not None:
            return image
        text = await await_abortable(signal, self.files.read_text(path))
        return await run_abortable(signal, _text_from_backend, text, raw_path, offset, limit)


__all__ = ["ReadTool", "READ_SCHEMA", "READ_DESCRIPTION", "detect_image_mime"]
