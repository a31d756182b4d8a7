"""Listing session files cheaply (pi's ``SessionManager.list`` / ``listAll``).

Only the header and the ``message`` / ``session_info`` lines are decoded, and those into small structs
that name just the fields a listing needs; msgspec skips the rest (tool output, images, usage) unparsed.
"""

from __future__ import annotations

import os
from typing import Any

import msgspec
from msgspec import UNSET, Struct, UnsetType

from pisces.core.safe_open import SESSION_MAX_BYTES, open_regular, read_fd

from .entries import BAD_JSON
from .ids import iso_from_ms, iso_to_ms
from .load import header_from_dict, warn
from .paths import sessions_root

__all__ = ["SessionInfo", "read_session_info", "list_sessions", "find_most_recent_session", "find_sessions_by_id",
           "read_header"]


class SessionInfo(Struct, kw_only=True):
    """One listed session, in the RPC shape (``created``/``modified`` are ISO strings)."""

    path: str
    id: str
    cwd: str
    name: str | UnsetType = UNSET
    parentSessionPath: str | UnsetType = UNSET
    created: str
    modified: str
    messageCount: int
    firstMessage: str
    allMessagesText: str


class _Block(Struct):
    type: Any = None
    text: Any = None


class _Message(Struct):
    role: Any = None
    content: str | list[_Block] | None = None
    timestamp: Any = None


class _Line(Struct):
    type: Any = None
    timestamp: Any = None
    message: _Message | None = None
    name: Any = None


_line_decoder = msgspec.json.Decoder(_Line)
_MESSAGE_TAG = b'"message"'
_INFO_TAG = b'"session_info"'


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return " ".join(b.text if isinstance(b.text, str) else "" for b in content if b.type == "text")


def _lenient_line(line: bytes) -> _Line | None:
    try:
        return _line_decoder.decode(line)
    except msgspec.ValidationError:
        pass
    except BAD_JSON:
        return None
    try:
        data = msgspec.json.decode(line)
    except BAD_JSON:
        return None
    if not isinstance(data, dict):
        return None
    message = data.get("message")
    lite_message = None
    if isinstance(message, dict):
        content = message.get("content")
        if isinstance(content, list):
            content = [_Block(type=b.get("type"), text=b.get("text")) for b in content if isinstance(b, dict)]
        elif not isinstance(content, str):
            content = None
        lite_message = _Message(role=message.get("role"), content=content, timestamp=message.get("timestamp"))
    return _Line(type=data.get("type"), timestamp=data.get("timestamp"), message=lite_message, name=data.get("name"))


def read_header(path: str, limit: int = 1 << 16) -> dict[str, Any] | None:
    """The first line of ``path`` as a session header object, or ``None``."""
    try:
        with os.fdopen(open_regular(path), "rb") as f:  # a FIFO named *.jsonl cannot block the listing
            first = f.readline(limit)
        data = msgspec.json.decode(first)
    except (OSError, *BAD_JSON):
        return None
    if isinstance(data, dict) and data.get("type") == "session" and isinstance(data.get("id"), str):
        return data
    return None


def read_session_info(path: str) -> SessionInfo | None:
    """A listing row for one file, or ``None`` when it is unreadable or has no session header."""
    try:
        fd = open_regular(path, max_bytes=SESSION_MAX_BYTES)
        try:
            mtime_ms = int(os.fstat(fd).st_mtime * 1000)
            data = read_fd(fd, path, SESSION_MAX_BYTES)
        finally:
            os.close(fd)
    except OSError:
        return None
    lines = data.split(b"\n")
    header_dict = None
    start = 0
    for index, line in enumerate(lines):
        start = index  # the header's line: the entries follow it
        if not line.strip():
            continue
        try:
            header_dict = msgspec.json.decode(line)
        except BAD_JSON:
            continue
        break
    if not isinstance(header_dict, dict):
        return None
    header = header_from_dict(header_dict)
    if header is None:
        return None

    message_count = 0
    first_message = ""
    texts: list[str] = []
    name: str | None = None
    last_activity = 0
    for line in lines[start + 1 :]:
        if _MESSAGE_TAG not in line and _INFO_TAG not in line:
            continue
        entry = _lenient_line(line)
        if entry is None:
            continue
        if entry.type == "session_info":
            if isinstance(entry.name, str) and entry.name:
                name = entry.name.strip()
            continue
        if entry.type != "message":
            continue
        message_count += 1
        message = entry.message
        if message is None or message.role not in ("user", "assistant") or message.content is None:
            continue
        ts = message.timestamp
        if isinstance(ts, (int, float)) and not isinstance(ts, bool):
            last_activity = max(last_activity, int(ts))
        elif isinstance(entry.timestamp, str):
            last_activity = max(last_activity, iso_to_ms(entry.timestamp))
        text = _text_of(message.content)
        if not text:
            continue
        texts.append(text)
        if not first_message and message.role == "user":
            first_message = text

    created_ms = iso_to_ms(header.timestamp) if header.timestamp else 0
    modified_ms = last_activity if last_activity > 0 else (created_ms or mtime_ms)
    return SessionInfo(
        path=path,
        id=header.id,
        cwd=header.cwd,
        name=name if name is not None else UNSET,
        parentSessionPath=header.parentSession,
        created=iso_from_ms(created_ms or mtime_ms),
        modified=iso_from_ms(modified_ms),
        messageCount=message_count,
        firstMessage=first_message or "(no messages)",
        allMessagesText=" ".join(texts),
    )


def _listed(path: str) -> SessionInfo | None:
    """One file's row; a file that breaks the reader is reported and skipped, never the whole listing."""
    try:
        return read_session_info(path)
    except Exception as exc:  # noqa: BLE001 - one malformed file must not fail every other one
        warn(f"{path}: left out of the session list ({type(exc).__name__}: {exc})")
        return None


def _jsonl_files(directory: str) -> list[str]:
    try:
        with os.scandir(directory) as it:
            return [e.path for e in it if e.name.endswith(".jsonl") and e.is_file()]
    except OSError:
        return []


def list_sessions(session_dir: str | None = None) -> list[SessionInfo]:
    """Sessions in ``session_dir``, or in every directory under ``<agentDir>/sessions`` when it is ``None``;
    newest activity first."""
    if session_dir is not None:
        files = _jsonl_files(session_dir)
    else:
        root = sessions_root()
        files = []
        try:
            with os.scandir(root) as it:
                dirs = sorted(e.path for e in it if e.is_dir())
        except OSError:
            dirs = []
        for d in dirs:
            files.extend(_jsonl_files(d))
    infos = [info for info in map(_listed, files) if info is not None]
    infos.sort(key=lambda s: iso_to_ms(s.modified), reverse=True)
    return infos


def find_most_recent_session(session_dir: str) -> str | None:
    """The most recently modified file (by mtime) in ``session_dir`` that starts with a session header."""
    best: tuple[float, str] | None = None
    for path in _jsonl_files(session_dir):
        if read_header(path) is None:
            continue
        try:
            mtime = os.stat(path).st_mtime
        except OSError:
            continue
        if best is None or mtime > best[0]:
            best = (mtime, path)
    return best[1] if best else None


def find_sessions_by_id(prefix: str, session_dir: str | None = None) -> list[SessionInfo]:
    """Sessions whose id starts with ``prefix`` (``--session <id>``), newest first."""
    return [s for s in list_sessions(session_dir) if s.id.startswith(prefix)]
