"""SessionManager: one session as an append-only JSONL tree on disk (or in memory).

Each entry has an ``id`` and a ``parentId``; the *leaf* is the current position, and every append becomes a
child of the leaf and the new leaf. ``branch()`` moves the leaf back, so the next append starts a branch;
nothing is ever rewritten except by a format migration.

Writing follows pi exactly where it shows: nothing reaches the disk until the session has an assistant
message (an error or aborted one counts). Then the header and every buffered entry are written at once,
and from there on each entry is one ``os.write`` of one line on an ``O_APPEND`` descriptor, so a crash
loses at most the line being written. A file whose last line was torn gets a newline before the next
append, so the torn line stays a single skippable line.

Deliberate differences from pi: a path that is a directory, cannot be written, or holds something other
than a session is refused when it is opened (pi truncates a file that is not a session, and loses every
message written to a path it cannot write); a file deleted, truncated or replaced by another process while
open is noticed at the next append, which writes the whole session again (in place when the file held only
this session's lines, else in a new file beside it), so a header is never missing or written twice; and a
clone or fork keeps the whole path even where a ``label`` entry sat on it (pi leaves the next entry's
``parentId`` pointing at the dropped label, which cuts the start of the conversation off).
"""

from __future__ import annotations

import os
from typing import Any

import msgspec
from msgspec import UNSET

from pisces.ai.types import AssistantMessage, ToolResultMessage, UserMessage
from pisces.core.safe_open import open_regular, private_dir

from .context import SessionContext, build_session_context, path_to
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
    encode_line,
    entry_type,
)
from .ids import iso_now, new_entry_id, uuid7
from .listing import find_most_recent_session
from .load import LoadedSession, load_session_file, warn, write_file_atomically
from .messages import BashExecutionMessage, CustomMessage
from .paths import default_session_dir, session_file_name
from .target import load_target
from .tree import SessionTreeNode, build_tree

__all__ = ["SessionManager", "EntryNotFoundError"]

_APPENDABLE = (UserMessage, AssistantMessage, ToolResultMessage, BashExecutionMessage, CustomMessage)


class EntryNotFoundError(LookupError):
    """``Entry <id> not found`` (pi's wording)."""

    def __init__(self, entry_id: Any) -> None:
        super().__init__(f"Entry {entry_id} not found")
        self.entry_id = entry_id


def _is_assistant_entry(entry: SessionEntry) -> bool:
    if isinstance(entry, MessageEntry):
        return isinstance(entry.message, AssistantMessage)
    if isinstance(entry, RawEntry) and entry.type == "message":
        message = entry.data.get("message")
        return isinstance(message, dict) and message.get("role") == "assistant"
    return False


def _with_parent(entry: SessionEntry, parent_id: str | None) -> SessionEntry:
    """A copy of ``entry`` attached to ``parent_id`` (its raw line no longer applies)."""
    if isinstance(entry, RawEntry):
        return RawEntry({**entry.data, "parentId": parent_id})
    return msgspec.structs.replace(entry, parentId=parent_id)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


class SessionManager:
    """One session. Construct with :meth:`create`, :meth:`open`, :meth:`continue_recent`, :meth:`in_memory`
    or :meth:`fork_from`. Methods mirror pi's ``SessionManager`` in snake_case."""

    def __init__(self, cwd: str, session_dir: str, session_file: str | None = None, persist: bool = True) -> None:
        self._cwd = cwd
        self._session_dir = session_dir
        self._persist = persist
        self._session_id = ""
        self._session_file: str | None = None
        self._header = SessionHeader(id="")
        self._raw_header: bytes | None = None
        self._entries: list[SessionEntry] = []
        self._by_id: dict[str, SessionEntry] = {}
        self._labels: dict[str, str] = {}
        self._label_times: dict[str, str] = {}  # target -> when its label was set (kept by clone and fork)
        self._raw: dict[str, tuple[Any, bytes]] = {}
        self._leaf_id: str | None = None
        self._has_assistant = False
        self._session_name: str | None = None
        self._written = 0  # lines of [header, *entries] on disk; 0 = this session's file not written yet
        self._disk_size: int | None = None  # the file's size after our last write or read: less = truncated
        self._fd: int | None = None
        self.last_write_error: OSError | None = None
        if session_file:
            self.set_session_file(session_file)
        else:
            self.new_session()

    # ------------------------------------------------------------------------------------------
    # Construction
    # ------------------------------------------------------------------------------------------
    @classmethod
    def create(cls, cwd: str, session_dir: str | None = None) -> "SessionManager":
        """A new session in ``session_dir`` (default: the per-cwd directory)."""
        return cls(cwd, session_dir or default_session_dir(cwd), None, True)

    @classmethod
    def open(cls, path: str, session_dir: str | None = None) -> "SessionManager":
        """Open ``path`` (a missing path starts a fresh session bound to it). The cwd comes from the header.
        Raises :class:`SessionFileError` for a path that must not be the session file (see ``target``)."""
        path = os.path.abspath(path)
        loaded = load_target(path)
        cwd = loaded.header.cwd if loaded and loaded.header and loaded.header.cwd else os.getcwd()
        manager = cls(cwd, session_dir or os.path.dirname(os.path.abspath(path)), None, True)
        manager._switch(path, loaded)
        return manager

    @classmethod
    def continue_recent(cls, cwd: str, session_dir: str | None = None) -> "SessionManager":
        """The most recently modified session in the directory, or a new one."""
        directory = session_dir or default_session_dir(cwd)
        recent = find_most_recent_session(directory)
        return cls(cwd, directory, recent, True)

    @classmethod
    def in_memory(cls, cwd: str | None = None) -> "SessionManager":
        """A session that never touches the disk (``--no-session``)."""
        return cls(cwd or os.getcwd(), "", None, False)

    @classmethod
    def fork_from(cls, source_path: str, target_cwd: str, session_dir: str | None = None) -> "SessionManager":
        """Copy another project's session into a new file under ``target_cwd``'s session directory."""
        loaded = load_session_file(source_path)
        if loaded is None or loaded.header is None:
            raise ValueError(f"Cannot fork: source session file is empty or invalid: {source_path}")
        directory = session_dir or default_session_dir(target_cwd)
        session_id = uuid7()
        timestamp = iso_now()
        header = SessionHeader(version=CURRENT_SESSION_VERSION, id=session_id, timestamp=timestamp, cwd=target_cwd,
                               parentSession=source_path)
        lines = [encode_line(header)]
        for entry in loaded.entries:
            raw = loaded.raw_lines.get(entry.id)
            lines.append(raw[1] + b"\n" if raw and raw[0] is entry else encode_line(entry))
        path = os.path.join(directory, session_file_name(timestamp, session_id))
        write_file_atomically(path, b"".join(lines))
        return cls(target_cwd, directory, path, True)

    # ------------------------------------------------------------------------------------------
    # Switching
    # ------------------------------------------------------------------------------------------
    def set_session_file(self, path: str, loaded: Any = None) -> None:
        """Switch to ``path``: load it, or start a fresh session bound to it when it does not exist or is
        empty. Files of an older format version are migrated and rewritten. ``loaded``: what
        :meth:`load_target` returned for it, when the caller checked it already. Raises
        :class:`SessionFileError` (nothing changed) for a path that must not be the session file."""
        path = os.path.abspath(path)
        self._switch(path, loaded if loaded is not None else load_target(path))

    load_target = staticmethod(load_target)

    def _switch(self, path: str, loaded: LoadedSession | None) -> None:
        path = os.path.abspath(path)
        if loaded is None or loaded.header is None:
            self.new_session()
            self._session_file = path
            return
        self._close_fd()
        self._header = loaded.header
        self._raw_header = loaded.raw_header
        self._session_id = loaded.header.id
        self._session_file = path
        self._entries = loaded.entries
        self._raw = loaded.raw_lines
        self._build_index()
        self._written = 1 + len(self._entries)
        self._disk_size = loaded.size
        if loaded.migrated:
            self._rewrite_file()

    def new_session(self, id: str | None = None, parent_session: str | None = None) -> str | None:
        """Start an empty session (nothing on disk yet). Returns the file it will be written to."""
        self._close_fd()
        self._session_id = id or uuid7()
        timestamp = iso_now()
        self._header = SessionHeader(version=CURRENT_SESSION_VERSION, id=self._session_id, timestamp=timestamp,
                                     cwd=self._cwd, parentSession=parent_session if parent_session else UNSET)
        self._raw_header = None
        self._entries = []
        self._raw = {}
        self._build_index()
        self._written = 0
        self._disk_size = None
        if self._persist:
            self._session_file = os.path.join(self._session_dir, session_file_name(timestamp, self._session_id))
        return self._session_file

    def _build_index(self) -> None:
        self._by_id = {}
        self._compaction_of: dict[str, str | None] = {}  # entry id -> the last compaction on its path
        self._labels = {}
        self._label_times = {}
        self._leaf_id = None
        self._has_assistant = False
        self._session_name = None
        for entry in self._entries:
            self._index(entry)

    def _index(self, entry: SessionEntry) -> None:
        self._by_id[entry.id] = entry
        parent = entry.parentId
        self._compaction_of[entry.id] = (entry.id if isinstance(entry, CompactionEntry)
                                         else self._compaction_of.get(parent) if parent else None)
        self._leaf_id = entry.id
        if not self._has_assistant and _is_assistant_entry(entry):
            self._has_assistant = True
        if isinstance(entry, LabelEntry):
            if entry.label:
                self._labels[entry.targetId] = entry.label
                self._label_times[entry.targetId] = entry.timestamp
            else:
                self._labels.pop(entry.targetId, None)
                self._label_times.pop(entry.targetId, None)
        elif isinstance(entry, SessionInfoEntry) and entry.name:
            self._session_name = entry.name

    # ------------------------------------------------------------------------------------------
    # Writing
    # ------------------------------------------------------------------------------------------
    def _line(self, entry: Any) -> bytes:
        raw = self._raw.get(entry.id) if not isinstance(entry, SessionHeader) else None
        if raw is not None and raw[0] is entry:
            return raw[1] + b"\n"
        if entry is self._header and self._raw_header is not None:
            return self._raw_header + b"\n"
        return encode_line(entry)

    def _all_lines(self) -> bytes:
        return b"".join([self._line(self._header), *map(self._line, self._entries)])

    def _rewrite_file(self) -> None:
        if not self._persist or not self._session_file:
            return
        self._close_fd()
        data = self._all_lines()
        write_file_atomically(self._session_file, data)
        self._written = 1 + len(self._entries)
        self._disk_size = len(data)

    def _open_fd(self) -> int:
        """The session file, opened for appending (created when missing)."""
        assert self._session_file
        directory = os.path.dirname(self._session_file)
        if directory:
            private_dir(directory)
        # a FIFO or a device put there meanwhile is refused (an OSError), never written into
        return open_regular(self._session_file, os.O_RDWR | os.O_APPEND | os.O_CREAT, mode=0o600)

    def _close_fd(self) -> None:
        if self._fd is not None:
            try:
                os.close(self._fd)
            except OSError:
                pass
            self._fd = None

    def _flush(self) -> None:
        """Write whatever is pending, if the session is ready to be on disk."""
        if not self._persist or not self._session_file or not self._has_assistant:
            return
        total = 1 + len(self._entries)
        if self._written >= total:
            return
        try:
            fresh = self._fd is None
            if fresh:
                self._fd = self._open_fd()
            if self._written and not self._still_ours(fresh):
                self._written = 0
            if self._written == 0:
                self._write_whole()
            else:
                fd = self._fd
                assert fd is not None  # opened above (a reopen replaces it, never clears it)
                data = b"".join(map(self._line, self._entries[self._written - 1 :]))
                size = os.fstat(fd).st_size
                if self._disk_size is not None and size > self._disk_size:
                    # the rest of a write of ours that was cut short (a full disk, a file-size limit): the
                    # lines it began are in ``data`` again, so the torn piece goes
                    os.ftruncate(fd, self._disk_size)
                    size = self._disk_size
                if size and os.pread(fd, 1, size - 1) != b"\n":
                    data = b"\n" + data  # close a torn last line so our next line stays whole
                _write_all(fd, data)
            self._written = total
            assert self._fd is not None
            self._disk_size = os.fstat(self._fd).st_size
            self.last_write_error = None
        except OSError as exc:
            # Keep the entries in memory and retry at the next append. What the failed write left is cut off
            # now where possible (truncating needs no space), else before the next write.
            if self._fd is not None and self._disk_size is not None:
                try:
                    os.ftruncate(self._fd, self._disk_size)
                except OSError:
                    pass
            self._close_fd()
            self.last_write_error = exc
            warn(f"cannot write session file {self._session_file}: {exc.strerror or exc}")

    def _still_ours(self, fresh: bool) -> bool:
        """Whether the file still holds what this session wrote: not deleted, replaced or truncated by another
        process since. When not, say so; the caller then writes the whole session again."""
        assert self._fd is not None and self._session_file
        info = os.fstat(self._fd)
        what = None
        if info.st_nlink == 0:
            self._close_fd()
            self._fd = self._open_fd()
            what = "was deleted or replaced by another process"
        elif self._disk_size is not None and info.st_size < self._disk_size:
            what = f"was truncated by another process (from {self._disk_size} to {info.st_size} bytes)"
        elif fresh:
            header = self._line(self._header)[:-1]
            first = os.pread(self._fd, len(header) + 2, 0).split(b"\n", 1)[0]
            if first.rstrip(b"\r") != header:
                what = "no longer starts with this session's header"
        if what is None:
            return True
        warn(f"session file {self._session_file} {what}; writing the whole session ({len(self._entries)} entries) "
             "again")
        return False

    def _write_whole(self) -> None:
        """Header and every entry, into a file that is empty (or blank) or holds only a beginning of these same
        lines (a write cut short, a truncation). Anything else there belongs to someone else: it is left alone
        and the session moves to a new file beside it."""
        assert self._fd is not None and self._session_file
        data = self._all_lines()
        size = os.fstat(self._fd).st_size
        there = os.pread(self._fd, size, 0) if 0 < size <= len(data) else b""
        if size and (size > len(data) or (there != data[:size] and not there.isspace())):
            old = self._session_file
            self._close_fd()
            base = os.path.join(os.path.dirname(old), session_file_name(iso_now(), self._session_id))[:-len(".jsonl")]
            n = 0
            while os.path.lexists(self._session_file):  # the same millisecond gives the same name
                n += 1
                self._session_file = f"{base}-{n}.jsonl" if n > 1 else f"{base}.jsonl"
            self._fd = self._open_fd()
            warn(f"{old} holds content that is not this session's; the session continues in {self._session_file}")
        elif size:
            os.ftruncate(self._fd, 0)
        _write_all(self._fd, data)

    def _append(self, entry: SessionEntry) -> str:
        self._entries.append(entry)
        self._index(entry)
        self._flush()
        return entry.id

    def _new_id(self) -> str:
        return new_entry_id(self._by_id)

    def close(self) -> None:
        """Release the file descriptor (the session stays usable; the next write reopens the file)."""
        self._close_fd()

    def __enter__(self) -> "SessionManager":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self._close_fd()
        except Exception:  # noqa: BLE001 - a finalizer must not raise (the interpreter may be shutting down)
            pass

    # ------------------------------------------------------------------------------------------
    # Appending (each returns the new entry's id; the entry becomes the leaf)
    # ------------------------------------------------------------------------------------------
    def append_message(self, message: Any) -> str:
        """A user, assistant, toolResult, bashExecution or custom message. Summaries are not messages here:
        use :meth:`append_compaction` and :meth:`branch_with_summary`."""
        if not isinstance(message, _APPENDABLE):
            raise TypeError(f"cannot append a {type(message).__name__} as a message entry")
        return self._append(MessageEntry(id=self._new_id(), parentId=self._leaf_id, timestamp=iso_now(),
                                         message=message))

    def append_thinking_level_change(self, thinking_level: str) -> str:
        return self._append(ThinkingLevelChangeEntry(id=self._new_id(), parentId=self._leaf_id,
                                                     timestamp=iso_now(), thinkingLevel=thinking_level))

    def append_model_change(self, provider: str, model_id: str) -> str:
        return self._append(ModelChangeEntry(id=self._new_id(), parentId=self._leaf_id, timestamp=iso_now(),
                                             provider=provider, modelId=model_id))

    def append_compaction(self, summary: str, first_kept_entry_id: str, tokens_before: int | float,
                          details: Any = UNSET, from_hook: Any = UNSET) -> str:
        return self._append(CompactionEntry(id=self._new_id(), parentId=self._leaf_id, timestamp=iso_now(),
                                            summary=summary, firstKeptEntryId=first_kept_entry_id,
                                            tokensBefore=tokens_before, details=details,
                                            fromHook=UNSET if from_hook is None else from_hook))

    def append_custom_entry(self, custom_type: str, data: Any = UNSET) -> str:
        return self._append(CustomEntry(id=self._new_id(), parentId=self._leaf_id, timestamp=iso_now(),
                                        customType=custom_type, data=data))

    def append_custom_message_entry(self, custom_type: str, content: Any, display: bool,
                                    details: Any = UNSET) -> str:
        return self._append(CustomMessageEntry(id=self._new_id(), parentId=self._leaf_id, timestamp=iso_now(),
                                               customType=custom_type, content=content, display=display,
                                               details=details))

    def append_session_info(self, name: str) -> str:
        """Name the session (trimmed). The latest named session_info entry wins."""
        return self._append(SessionInfoEntry(id=self._new_id(), parentId=self._leaf_id, timestamp=iso_now(),
                                             name=name.strip()))

    def append_label_change(self, target_id: str, label: str | None) -> str:
        """Set the label of ``target_id``; ``None`` or ``""`` clears it."""
        if target_id not in self._by_id:
            raise EntryNotFoundError(target_id)
        return self._append(LabelEntry(id=self._new_id(), parentId=self._leaf_id, timestamp=iso_now(),
                                       targetId=target_id, label=label if label else UNSET))

    # ------------------------------------------------------------------------------------------
    # Reading
    # ------------------------------------------------------------------------------------------
    def is_persisted(self) -> bool:
        return self._persist

    def is_on_disk(self) -> bool:
        """Whether this session's file has been written (it is, from the first assistant message on)."""
        return self._persist and self._written > 0

    def get_cwd(self) -> str:
        return self._cwd

    def get_session_dir(self) -> str:
        return self._session_dir

    def get_session_id(self) -> str:
        return self._session_id

    def get_session_file(self) -> str | None:
        return self._session_file

    def get_header(self) -> SessionHeader:
        return self._header

    def get_entries(self) -> list[SessionEntry]:
        """Every entry, in file order (a copy)."""
        return list(self._entries)

    def get_entry(self, entry_id: str) -> SessionEntry | None:
        return self._by_id.get(entry_id)

    def get_leaf_id(self) -> str | None:
        return self._leaf_id

    def get_leaf_entry(self) -> SessionEntry | None:
        return self._by_id.get(self._leaf_id) if self._leaf_id else None

    def get_children(self, parent_id: str) -> list[SessionEntry]:
        return [e for e in self._by_id.values() if e.parentId == parent_id]

    def get_label(self, entry_id: str) -> str | None:
        return self._labels.get(entry_id)

    def get_labels(self) -> dict[str, str]:
        return dict(self._labels)

    def get_session_name(self) -> str | None:
        return self._session_name

    def get_branch(self, from_id: str | None = None) -> list[SessionEntry]:
        """Root -> ``from_id`` (default: the leaf), every entry type included. Empty for an unknown id."""
        start = from_id if from_id is not None else self._leaf_id
        return path_to(self._by_id.get(start) if start else None, self._by_id)

    def latest_compaction(self) -> CompactionEntry | None:
        """The last compaction on the path root -> leaf (``latest_compaction(get_branch())``), without the walk."""
        found = self._compaction_of.get(self._leaf_id) if self._leaf_id else None
        entry = self._by_id.get(found) if found else None
        return entry if isinstance(entry, CompactionEntry) else None

    def walk_back(self) -> Any:
        """The entries from the leaf up to the root, one at a time (``reversed(get_branch())``, lazily)."""
        seen: set[str] = set()
        current = self._by_id.get(self._leaf_id) if self._leaf_id else None
        while current is not None and current.id not in seen:
            seen.add(current.id)
            yield current
            current = self._by_id.get(current.parentId) if current.parentId else None

    def build_session_context(self) -> SessionContext:
        """What the LLM sees from the current leaf (see :func:`build_session_context`)."""
        return build_session_context(self._entries, self._leaf_id, self._by_id)

    def get_tree(self) -> list[SessionTreeNode]:
        return build_tree(self._entries, self._labels)

    # ------------------------------------------------------------------------------------------
    # Branching
    # ------------------------------------------------------------------------------------------
    def branch(self, entry_id: str) -> None:
        """Move the leaf to ``entry_id``; the next append starts a branch there."""
        if entry_id not in self._by_id:
            raise EntryNotFoundError(entry_id)
        self._leaf_id = entry_id

    def reset_leaf(self) -> None:
        """Move the leaf before the first entry; the next append is a new root."""
        self._leaf_id = None

    def branch_with_summary(self, branch_from_id: str | None, summary: str, details: Any = UNSET,
                            from_hook: Any = UNSET) -> str:
        """Branch from ``branch_from_id`` (``None``: the root) and append a branch_summary entry there."""
        if branch_from_id is not None and branch_from_id not in self._by_id:
            raise EntryNotFoundError(branch_from_id)
        self._leaf_id = branch_from_id
        return self._append(BranchSummaryEntry(id=self._new_id(), parentId=branch_from_id, timestamp=iso_now(),
                                               fromId=branch_from_id or "root", summary=summary, details=details,
                                               fromHook=UNSET if from_hook is None else from_hook))

    def create_branched_session(self, leaf_id: str) -> str | None:
        """Make this manager a new session holding only root -> ``leaf_id`` (ids kept, labels re-applied as
        label entries at the end with the time they were set, as pi does). An entry whose parent was a
        dropped label entry is attached to the entry before it, so the copy keeps the whole path. The
        header's ``parentSession`` is the old file. The file is written now if the path has an assistant
        message, else lazily. Returns the new file (``None`` in memory)."""
        previous_file = self._session_file
        path = self.get_branch(leaf_id)
        if not path:
            raise EntryNotFoundError(leaf_id)
        kept: list[SessionEntry] = []
        for e in path:
            if entry_type(e) == "label":
                continue
            parent_id = kept[-1].id if kept else None
            kept.append(e if e.parentId == parent_id else _with_parent(e, parent_id))
        kept_ids = {e.id for e in kept}
        taken = set(kept_ids)
        parent = kept[-1].id if kept else None
        labels: list[SessionEntry] = []
        for target_id, label in self._labels.items():
            if target_id in kept_ids:
                entry = LabelEntry(id=new_entry_id(taken), parentId=parent,
                                   timestamp=self._label_times.get(target_id) or iso_now(), targetId=target_id,
                                   label=label)
                taken.add(entry.id)
                labels.append(entry)
                parent = entry.id

        self._close_fd()
        self._session_id = uuid7()
        timestamp = iso_now()
        self._header = SessionHeader(
            version=CURRENT_SESSION_VERSION, id=self._session_id, timestamp=timestamp, cwd=self._cwd,
            parentSession=previous_file if self._persist and previous_file else UNSET,
        )
        self._raw_header = None
        self._entries = kept + labels
        self._raw = {k: v for k, v in self._raw.items() if k in kept_ids}
        self._build_index()
        self._written = 0
        if not self._persist:
            return None
        self._session_file = os.path.join(self._session_dir, session_file_name(timestamp, self._session_id))
        if self._has_assistant:
            self._rewrite_file()
        return self._session_file
