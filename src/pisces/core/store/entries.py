"""Session file lines: the header and every entry type of format version 3, as msgspec Structs.

Field names are pi's. Optional fields default to ``UNSET`` and are absent from the JSON, never ``null``.
An entry whose ``type`` is unknown (or that does not fit its struct) is kept as a :class:`RawEntry`,
which writes back exactly the object it was read from.
"""

from __future__ import annotations

import re
from typing import Any, Union, get_args

import msgspec
from msgspec import UNSET, Struct, UnsetType

from pisces.ai.types import ImageContent, TextContent

from .messages import AgentMessage

__all__ = [
    "CURRENT_SESSION_VERSION",
    "SessionHeader",
    "MessageEntry",
    "ModelChangeEntry",
    "ThinkingLevelChangeEntry",
    "CompactionEntry",
    "BranchSummaryEntry",
    "CustomEntry",
    "CustomMessageEntry",
    "LabelEntry",
    "SessionInfoEntry",
    "RawEntry",
    "KnownEntry",
    "KNOWN_TYPES",
    "SessionEntry",
    "entry_type",
    "encode_line",
    "decode_entry",
    "entry_from_dict",
]

CURRENT_SESSION_VERSION = 3


class SessionHeader(Struct, kw_only=True, tag_field="type", tag="session"):
    """The first line of a session file. ``version`` is missing in v1 files."""

    version: int | UnsetType = UNSET
    id: str
    timestamp: str = ""
    cwd: str = ""
    parentSession: str | UnsetType = UNSET


class _Entry(Struct, kw_only=True, tag_field="type"):
    id: str
    parentId: str | None = None
    timestamp: str


class MessageEntry(_Entry, kw_only=True, tag="message"):
    message: AgentMessage


class ModelChangeEntry(_Entry, kw_only=True, tag="model_change"):
    provider: str
    modelId: str


class ThinkingLevelChangeEntry(_Entry, kw_only=True, tag="thinking_level_change"):
    thinkingLevel: str


class CompactionEntry(_Entry, kw_only=True, tag="compaction"):
    summary: str
    firstKeptEntryId: str
    tokensBefore: int | float
    details: Any = UNSET
    fromHook: bool | UnsetType = UNSET


class BranchSummaryEntry(_Entry, kw_only=True, tag="branch_summary"):
    fromId: str
    summary: str
    details: Any = UNSET
    fromHook: bool | UnsetType = UNSET


class CustomEntry(_Entry, kw_only=True, tag="custom"):
    """Extension state; never part of the LLM context."""

    customType: str
    data: Any = UNSET


class CustomMessageEntry(_Entry, kw_only=True, tag="custom_message"):
    """An extension message that is part of the LLM context (as a user message)."""

    customType: str
    content: str | list[Union[TextContent, ImageContent]]
    display: bool
    details: Any = UNSET


class LabelEntry(_Entry, kw_only=True, tag="label"):
    """Sets (or, without ``label``, clears) the label of ``targetId``."""

    targetId: str
    label: str | UnsetType = UNSET


class SessionInfoEntry(_Entry, kw_only=True, tag="session_info"):
    name: str | UnsetType = UNSET


class RawEntry:
    """An entry this version does not model. ``data`` is the parsed JSON object, written back unchanged."""

    __slots__ = ("data",)

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data

    @property
    def type(self) -> str:
        t = self.data.get("type")
        return t if isinstance(t, str) else ""

    @property
    def id(self) -> Any:
        """The ``id`` as the file has it: a string in every entry pisces or pi writes, else anything or None."""
        return self.data.get("id")

    @property
    def parentId(self) -> str | None:
        p = self.data.get("parentId")
        return p if isinstance(p, str) else None

    @property
    def timestamp(self) -> str:
        t = self.data.get("timestamp")
        return t if isinstance(t, str) else ""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RawEntry) and other.data == self.data

    def __repr__(self) -> str:
        return f"RawEntry({self.data!r})"


KnownEntry = Union[
    MessageEntry,
    ModelChangeEntry,
    ThinkingLevelChangeEntry,
    CompactionEntry,
    BranchSummaryEntry,
    CustomEntry,
    CustomMessageEntry,
    LabelEntry,
    SessionInfoEntry,
]
SessionEntry = Union[KnownEntry, RawEntry]

KNOWN_TYPES = frozenset(t.__struct_config__.tag for t in get_args(KnownEntry))
_entry_decoder = msgspec.json.Decoder(KnownEntry)


def _enc_hook(obj: Any) -> Any:
    if isinstance(obj, RawEntry):
        return obj.data
    raise NotImplementedError(f"cannot encode {type(obj).__name__}")


_encoder = msgspec.json.Encoder(enc_hook=_enc_hook)


def entry_type(entry: Any) -> str:
    """The ``type`` tag of a header, an entry struct or a RawEntry."""
    if isinstance(entry, RawEntry):
        return entry.type
    return entry.__struct_config__.tag


# What decoding untrusted bytes as JSON can raise: msgspec.DecodeError and UnicodeDecodeError (both
# ValueErrors) and RecursionError (a line nested deeper than the decoder goes). A session file is read by
# catching all of them, line by line, so one bad line never costs more than itself.
BAD_JSON = (ValueError, RecursionError)


def encode_line(entry: Any) -> bytes:
    """One JSONL line (with its newline): compact, UTF-8, pi's field names."""
    try:
        return _encoder.encode(entry) + b"\n"
    except UnicodeEncodeError:
        # A lone UTF-16 surrogate (a "\\ud800" escape in a command, a cwd that is not UTF-8) cannot be UTF-8:
        # it is written as U+FFFD, so the line stays one valid line that pisces and pi both read.
        return _encoder.encode(_no_surrogates(msgspec.to_builtins(entry, enc_hook=_enc_hook))) + b"\n"


def no_surrogates(obj: Any) -> Any:
    """A copy of a JSON-like value with every lone surrogate (a non-UTF-8 path, a ``\\ud800`` escape)
    made U+FFFD, so that it can be written as UTF-8."""
    return _no_surrogates(obj)


def _no_surrogates(obj: Any) -> Any:
    if isinstance(obj, str):
        return _SURROGATE.sub("\ufffd", obj)
    if isinstance(obj, list):
        return [_no_surrogates(v) for v in obj]
    if isinstance(obj, dict):
        return {_no_surrogates(k): _no_surrogates(v) for k, v in obj.items()}
    return obj


_SURROGATE = re.compile("[\ud800-\udfff]")


def _strip_nulls(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _strip_nulls(v) for k, v in obj.items() if v is not None}
    if isinstance(obj, list):
        return [_strip_nulls(v) for v in obj]
    return obj


def entry_from_dict(data: dict[str, Any]) -> SessionEntry:
    """A typed entry from a parsed object. Falls back to a lenient reading (``null`` taken as absent inside
    the payload) and finally to :class:`RawEntry`, so no entry is ever lost."""
    try:
        return msgspec.convert(data, KnownEntry)
    except msgspec.ValidationError:
        pass
    lenient = {k: (_strip_nulls(v) if k not in ("id", "parentId", "timestamp", "type") else v) for k, v in data.items()}
    try:
        return msgspec.convert(lenient, KnownEntry)
    except msgspec.ValidationError:
        return RawEntry(data)


def decode_entry(line: bytes) -> SessionEntry:
    """One line -> an entry. Raises one of :data:`BAD_JSON` when the line is not JSON (or too deep), and
    ``ValueError`` when it is JSON but not an object with a string ``id``."""
    try:
        return _entry_decoder.decode(line)
    except msgspec.ValidationError:
        pass
    data = msgspec.json.decode(line)
    if not isinstance(data, dict) or not isinstance(data.get("id"), str):
        raise ValueError("not a session entry")
    return entry_from_dict(data)
