"""Reading a session file: header check, corrupt-line skipping, v1/v2 -> v3 migration.

Loading never stops at a bad line: a torn last line (a crash mid-write) or garbage in the middle is
skipped with a warning on stderr. A file whose first JSON line is not a session header is treated as
empty. Files of format v1 and v2 are migrated in memory; the caller rewrites them (see ``migrated``).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from typing import Any

import msgspec

from pisces.ai.gc_pause import gc_paused
from pisces.core.safe_open import SESSION_MAX_BYTES, UnsafeFileError, private_dir, read_bytes, write_atomic

from .entries import (
    BAD_JSON,
    CURRENT_SESSION_VERSION,
    KNOWN_TYPES,
    RawEntry,
    SessionEntry,
    SessionHeader,
    decode_entry,
    encode_line,
    entry_from_dict,
)
from .ids import new_entry_id

__all__ = ["LoadedSession", "load_session_file", "parse_session_bytes", "migrate_entries", "header_from_dict",
           "write_file_atomically", "warn"]

_MAX_WARNINGS = 5


def warn(message: str) -> None:
    try:
        sys.stderr.write(f"pisces: {message}\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


@dataclass
class LoadedSession:
    header: SessionHeader | None  # None: empty file or no valid header
    entries: list[SessionEntry] = field(default_factory=list)
    # id -> (entry, its line as read, without newline): lets copies keep fields this version does not model
    raw_lines: dict[str, tuple[Any, bytes]] = field(default_factory=dict)
    raw_header: bytes | None = None
    migrated: bool = False
    skipped_lines: int = 0
    ends_with_newline: bool = True
    size: int = 0  # bytes read
    has_content: bool = False  # anything but whitespace: with no header, the file is not a session


def header_from_dict(data: dict[str, Any]) -> SessionHeader | None:
    if data.get("type") != "session" or not isinstance(data.get("id"), str):
        return None
    try:
        return msgspec.convert(data, SessionHeader)
    except (msgspec.ValidationError, RecursionError):
        return SessionHeader(
            id=data["id"],
            version=data["version"] if isinstance(data.get("version"), int) else msgspec.UNSET,
            timestamp=data["timestamp"] if isinstance(data.get("timestamp"), str) else "",
            cwd=data["cwd"] if isinstance(data.get("cwd"), str) else "",
            parentSession=data["parentSession"] if isinstance(data.get("parentSession"), str) else msgspec.UNSET,
        )


def migrate_entries(header: dict[str, Any], entries: list[dict[str, Any]]) -> bool:
    """Bring parsed objects (header + entries, in file order) to the current version, in place.

    v1 -> v2: every entry gets an 8-hex ``id`` and ``parentId`` = the previous entry's id (a single chain);
    a compaction's ``firstKeptEntryIndex`` (an index into the file's lines, header = 0) becomes
    ``firstKeptEntryId``. v2 -> v3: the message role ``hookMessage`` becomes ``custom``.
    Returns whether anything was migrated.
    """
    version = header.get("version")
    if not isinstance(version, int):
        version = 1
    if version >= CURRENT_SESSION_VERSION:
        return False
    if version < 2:
        taken: set[str] = set()
        prev: str | None = None
        for entry in entries:
            entry["id"] = new_entry_id(taken)
            taken.add(entry["id"])
            entry["parentId"] = prev
            prev = entry["id"]
        file_entries = [header, *entries]
        for entry in entries:
            if entry.get("type") == "compaction" and "firstKeptEntryIndex" in entry:
                index = entry.pop("firstKeptEntryIndex")
                if isinstance(index, int) and not isinstance(index, bool) and 0 < index < len(file_entries):
                    entry["firstKeptEntryId"] = file_entries[index]["id"]
    for entry in entries:
        if entry.get("type") == "message":
            message = entry.get("message")
            if isinstance(message, dict) and message.get("role") == "hookMessage":
                message["role"] = "custom"
    header["version"] = CURRENT_SESSION_VERSION
    return True


class _Skips:
    def __init__(self, where: str) -> None:
        self.where = where
        self.count = 0

    def skip(self, line_no: int, last: bool, reason: str) -> None:
        self.count += 1
        if self.count <= _MAX_WARNINGS:
            what = "an incomplete last line" if last else f"a malformed line {line_no}"
            warn(f"{self.where}: skipped {what} ({reason})")

    def done(self) -> None:
        if self.count > _MAX_WARNINGS:
            warn(f"{self.where}: skipped {self.count} malformed lines in all")


def parse_session_bytes(data: bytes, where: str = "session file") -> LoadedSession:
    """Parse a whole session file's bytes. See the module docstring for the rules."""
    with gc_paused():  # all of its objects stay alive: no cycle search meanwhile
        loaded = _parse_session_bytes(data, where)
    loaded.size = len(data)
    loaded.has_content = bool(data) and not data.isspace()
    return loaded


def _parse_session_bytes(data: bytes, where: str) -> LoadedSession:
    ends_with_newline = not data or data.endswith(b"\n")
    lines = data.split(b"\n")
    last_index = len(lines) - 1
    while last_index >= 0 and (not lines[last_index] or lines[last_index].isspace()):
        last_index -= 1
    skips = _Skips(where)

    # The header: the first line that parses as JSON. Lines skipped before it are reported only if it is
    # found: a file with no header at all (a README) is simply not a session.
    header_dict: dict[str, Any] | None = None
    header_line = b""
    early: list[tuple[int, bool, str]] = []
    i = 0
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            parsed = msgspec.json.decode(line)
        except BAD_JSON as exc:
            early.append((i + 1, i == last_index, _reason(exc)))
            continue
        if isinstance(parsed, dict):
            header_dict = parsed
            header_line = line
        break
    else:
        i = len(lines)
    header = header_from_dict(header_dict) if header_dict is not None else None
    if header is None or header_dict is None:
        return LoadedSession(header=None, skipped_lines=len(early), ends_with_newline=ends_with_newline)
    for skipped in early:
        skips.skip(*skipped)

    body = lines[i + 1 :]
    first_no = i + 2
    result = LoadedSession(header=header, raw_header=header_line.rstrip(b"\r"), ends_with_newline=ends_with_newline)
    version = header_dict.get("version")
    if isinstance(version, int) and version >= CURRENT_SESSION_VERSION:
        entries = result.entries
        raw = result.raw_lines
        for n, line in enumerate(body, first_no):
            if not line or line.isspace():
                continue
            try:
                entry = decode_entry(line)
            except BAD_JSON as exc:
                skips.skip(n, n - 1 == last_index, _reason(exc))
                continue
            if isinstance(entry, RawEntry):
                if entry.type == "session":
                    continue  # a second header (older pi could write one after a restart): not an entry
                if entry.type in KNOWN_TYPES:
                    warn(f"{where}: line {n}: a {entry.type} entry that does not match the format; kept as it is, "
                         "but left out of the context")
            entries.append(entry)
            raw[entry.id] = (entry, line[:-1] if line[-1:] == b"\r" else line)
    else:
        dicts: list[dict[str, Any]] = []
        for n, line in enumerate(body, first_no):
            if not line.strip():
                continue
            try:
                parsed = msgspec.json.decode(line)
            except BAD_JSON as exc:
                skips.skip(n, n - 1 == last_index, _reason(exc))
                continue
            if isinstance(parsed, dict):
                if parsed.get("type") != "session":
                    dicts.append(parsed)
            else:
                skips.skip(n, n - 1 == last_index, "not an object")
        result.migrated = migrate_entries(header_dict, dicts)
        result.header = header_from_dict(header_dict)
        result.raw_header = encode_line(header_dict)[:-1]
        for d in dicts:
            if not isinstance(d.get("id"), str):
                continue
            entry = entry_from_dict(d)
            if isinstance(entry, RawEntry) and entry.type in KNOWN_TYPES:
                warn(f"{where}: a {entry.type} entry that does not match the format; kept as it is, "
                     "but left out of the context")
            result.entries.append(entry)
            result.raw_lines[entry.id] = (entry, encode_line(d)[:-1])
    skips.done()
    result.skipped_lines = skips.count
    return result


def _reason(exc: BaseException) -> str:
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    if isinstance(exc, UnicodeDecodeError):
        return f"not UTF-8 at byte {exc.start}"
    return str(exc)


def load_session_file(path: str) -> LoadedSession | None:
    """Parse the file at ``path``; ``None`` when it does not exist or cannot be read. A path that must never
    be read (a FIFO, a device, a directory, a file over 1 GiB) raises ``safe_open.UnsafeFileError``."""
    try:
        data = read_bytes(path, SESSION_MAX_BYTES)  # never blocks on a FIFO, never reads /dev/zero
    except (FileNotFoundError, NotADirectoryError):
        return None
    except UnsafeFileError:
        raise  # a FIFO, a device, a file over 1 GiB: the caller says so (target.py words it for a session)
    except OSError as exc:
        warn(f"cannot read session file {path}: {exc.strerror or exc}")
        return None
    return parse_session_bytes(data, where=path)


def write_file_atomically(path: str, data: bytes) -> None:
    """Replace ``path`` with ``data``: write a temporary file beside it, fsync, rename over. The file is
    private to the user (0600) and a directory created for it is 0700."""
    private_dir(os.path.dirname(path) or ".")
    write_atomic(path, data, mode=0o600)
