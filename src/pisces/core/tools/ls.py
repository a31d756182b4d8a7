"""The ``ls`` tool: a directory's entries, dotfiles included, directories marked with ``/``.

pi sorts with ``a.toLowerCase().localeCompare(b.toLowerCase())`` (ICU root collation). ``collation_key``
approximates it: characters compare by class (spaces, then punctuation and symbols in ICU's order, then
digits, then letters), letters by their base letter first and accents second.
"""

from __future__ import annotations

import os
import stat
import unicodedata
from typing import Any

from pisces.agent.types import AgentTool, AgentToolResult, ToolError, ToolUpdate
from pisces.ai.abort import AbortSignal

from ._common import number_param, run_abortable, text_result
from .paths import node_error_message, resolve_to_cwd
from .schemas import LS_SCHEMA
from .truncate import DEFAULT_MAX_BYTES, listing_result

DEFAULT_LIMIT = 500

LS_DESCRIPTION = (
    "List directory contents. Returns entries sorted alphabetically, with '/' suffix for directories. Includes "
    f"dotfiles. Output is truncated to {DEFAULT_LIMIT} entries or {DEFAULT_MAX_BYTES // 1024}KB (whichever is hit "
    "first)."
)

# ICU root collation order of common ASCII/Latin-1 punctuation and symbols (all before digits and letters).
_PUNCT_ORDER = " _-,;:!?.'\"()[]{}@*/\\&#%`^°©+±÷×<=>|~$£¥€"
_PUNCT_RANK = {ch: i for i, ch in enumerate(_PUNCT_ORDER)}
_EXPANSIONS = {"ß": "ss", "æ": "ae", "œ": "oe", "ø": "o", "đ": "d", "ł": "l", "þ": "th", "ð": "d", "ı": "i"}


def _primary(ch: str) -> tuple[int, int]:
    if ch in _PUNCT_RANK:
        return (1, _PUNCT_RANK[ch])
    if ch.isspace():
        return (0, ord(ch))
    if ch.isdigit():
        return (3, unicodedata.digit(ch, 0))
    if ch.isalpha():
        return (4, ord(ch))
    cat = unicodedata.category(ch)
    if cat[0] in "PS":
        return (2, ord(ch))  # other punctuation and symbols: after the known ones, before digits
    return (5, ord(ch))


def collation_key(name: str) -> tuple[Any, ...]:
    """Sort key approximating ``localeCompare`` on lower-cased names."""
    lowered = name.lower()
    primary: list[tuple[int, int]] = []
    secondary: list[int] = []
    for ch in lowered:
        if ch in _EXPANSIONS:
            for base in _EXPANSIONS[ch]:
                primary.append(_primary(base))
            secondary.append(1)
            continue
        decomposed = unicodedata.normalize("NFD", ch)
        base = decomposed[0]
        marks = decomposed[1:]
        primary.append(_primary(base))
        secondary.append(sum(ord(m) for m in marks) if marks else 0)
    return (primary, secondary, lowered)


def _list(dir_path: str, limit: int) -> tuple[str, dict[str, Any] | None]:
    if not os.path.exists(dir_path):
        raise ToolError(f"Path not found: {dir_path}")
    try:
        is_dir = stat.S_ISDIR(os.stat(dir_path).st_mode)
    except OSError as exc:
        raise ToolError(node_error_message(exc, "stat", dir_path)) from None
    if not is_dir:
        raise ToolError(f"Not a directory: {dir_path}")
    try:
        names = os.listdir(dir_path)
    except OSError as exc:
        raise ToolError(f"Cannot read directory: {node_error_message(exc, 'scandir', dir_path)}") from None
    names.sort(key=collation_key)
    results: list[str] = []
    limit_reached = False
    for name in names:
        if len(results) >= limit:
            limit_reached = True
            break
        try:
            mode = os.stat(os.path.join(dir_path, name)).st_mode  # follows symlinks, as pi's statSync
        except OSError:
            continue
        results.append(name + "/" if stat.S_ISDIR(mode) else name)
    if not results:
        return "(empty directory)", None
    notice = (f"{limit} entries limit reached. Use limit={limit * 2} for more", "entryLimitReached",
              limit) if limit_reached else None
    return listing_result("\n".join(results), notice)


class LsTool(AgentTool):
    name = "ls"
    label = "ls"
    description = LS_DESCRIPTION
    parameters = LS_SCHEMA

    def __init__(self, cwd: str) -> None:
        self.cwd = cwd

    async def execute(self, tool_call_id: str, params: dict[str, Any], signal: AbortSignal,
                      on_update: ToolUpdate) -> AgentToolResult:
        dir_path = resolve_to_cwd(params.get("path") or ".", self.cwd)
        limit = number_param(params, "limit", DEFAULT_LIMIT)
        text, details = await run_abortable(signal, _list, dir_path, limit)
        return text_result(text, details)


__all__ = ["LsTool", "LS_SCHEMA", "LS_DESCRIPTION", "collation_key"]
