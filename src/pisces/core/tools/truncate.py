"""Truncation of tool output, with pi's limits, result shape and size formatting.

Two independent limits apply, whichever is hit first: a line count (2000) and a byte count (50 KiB of
UTF-8). Lines are what ``str.split("\\n")`` yields, so a trailing newline adds an empty last line, as in pi.
``truncate_head`` keeps the beginning and never returns a partial line; ``truncate_tail`` keeps the end and
returns a partial line only when the last line alone is over the byte limit.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Literal

DEFAULT_MAX_LINES = 2000
DEFAULT_MAX_BYTES = 50 * 1024
GREP_MAX_LINE_LENGTH = 500
MAX_SAFE_INTEGER = 9007199254740991  # JS Number.MAX_SAFE_INTEGER: pi's "no line limit"

TruncatedBy = Literal["lines", "bytes"] | None


@dataclass(slots=True)
class TruncationResult:
    content: str
    truncated: bool
    truncatedBy: TruncatedBy
    totalLines: int
    totalBytes: int
    outputLines: int
    outputBytes: int
    lastLinePartial: bool
    firstLineExceedsLimit: bool
    maxLines: int
    maxBytes: int

    def to_dict(self) -> dict[str, Any]:
        """The object pi puts in ``details.truncation`` (same keys, same order)."""
        return {
            "content": self.content,
            "truncated": self.truncated,
            "truncatedBy": self.truncatedBy,
            "totalLines": self.totalLines,
            "totalBytes": self.totalBytes,
            "outputLines": self.outputLines,
            "outputBytes": self.outputBytes,
            "lastLinePartial": self.lastLinePartial,
            "firstLineExceedsLimit": self.firstLineExceedsLimit,
            "maxLines": self.maxLines,
            "maxBytes": self.maxBytes,
        }


def utf8_len(text: str) -> int:
    """Byte length of ``text`` in UTF-8 (lone surrogates count as the 3 bytes of U+FFFD, as in JS)."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-8", "replace")) if _has_surrogate(text) else len(text.encode("utf-8"))


def _has_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
        return False
    except UnicodeEncodeError:
        return True


def format_size(num_bytes: int | float) -> str:
    """pi's formatSize: ``512B``, ``50.0KB``, ``1.5MB``."""
    if num_bytes < 1024:
        return f"{js_number(num_bytes)}B"
    if num_bytes < 1024 * 1024:
        return f"{_to_fixed1(num_bytes / 1024)}KB"
    return f"{_to_fixed1(num_bytes / (1024 * 1024))}MB"


def _to_fixed1(value: float) -> str:
    # JS toFixed rounds the exact binary value half away from zero; Python's format rounds half to even
    # on the exact binary value. They differ only on exact ties, which a /1024 quotient hits when the
    # remainder is a multiple of 51.2 bytes, i.e. never for an integral byte count below 2^53.
    return f"{value:.1f}"


def js_number(value: int | float) -> str:
    """A number as JavaScript prints it in a template string (``2.0`` -> ``2``, ``1e-7`` -> ``1e-7``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "0"
    sign, digit_tuple, exponent = Decimal(repr(value)).as_tuple()
    assert isinstance(exponent, int)  # value is finite (NaN and the infinities returned above)
    digits = "".join(map(str, digit_tuple)).rstrip("0")
    exponent += len(digit_tuple) - len(digits)
    k = len(digits)
    n = exponent + k  # value = 0.<digits> * 10^n
    prefix = "-" if sign else ""
    if k <= n <= 21:
        return prefix + digits + "0" * (n - k)
    if 0 < n <= 21:
        return prefix + digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return prefix + "0." + "0" * (-n) + digits
    e = n - 1
    mantissa = digits if k == 1 else digits[0] + "." + digits[1:]
    return f"{prefix}{mantissa}e{'+' if e >= 0 else '-'}{abs(e)}"


def truncate_head(content: str, max_lines: int = DEFAULT_MAX_LINES,
                  max_bytes: int = DEFAULT_MAX_BYTES) -> TruncationResult:
    """Keep the first lines that fit both limits. If the first line alone is over ``max_bytes`` the
    content is empty and ``firstLineExceedsLimit`` is set."""
    total_bytes = utf8_len(content)
    total_lines = content.count("\n") + 1
    if total_lines <= max_lines and total_bytes <= max_bytes:
        return TruncationResult(content, False, None, total_lines, total_bytes, total_lines, total_bytes,
                                False, False, max_lines, max_bytes)
    # only the head can be kept: split no further than ``max_lines`` lines and ``max_bytes + 1`` characters
    # (at least that many bytes), not the whole content (a 2 MB listing cut to 50 KB)
    head = content[:max_bytes + 1] if max_lines >= 1 else content
    lines = head.split("\n", max_lines) if max_lines >= 1 else content.split("\n")
    return head_from_lines(lines, total_lines, total_bytes, max_lines, max_bytes)


def head_from_lines(lines: list[str], total_lines: int, total_bytes: int, max_lines: int,
                    max_bytes: int) -> TruncationResult:
    """``truncate_head`` on content already split into lines, when the content is known to be over a
    limit. ``lines`` may be only a prefix of the content's lines, as long as it holds at least
    ``max_lines`` lines or enough lines to exceed ``max_bytes`` (the read tool streams big files)."""
    if not lines or utf8_len(lines[0]) > max_bytes:
        return TruncationResult("", True, "bytes", total_lines, total_bytes, 0, 0, False, True,
                                max_lines, max_bytes)
    kept = 0
    used = 0
    by: TruncatedBy = "lines"
    for i, line in enumerate(lines):
        if i >= max_lines:
            break
        size = utf8_len(line) + (1 if i > 0 else 0)
        if used + size > max_bytes:
            by = "bytes"
            break
        kept += 1
        used += size
    if kept >= max_lines and used <= max_bytes:
        by = "lines"
    out = "\n".join(lines[:kept])
    return TruncationResult(out, True, by, total_lines, total_bytes, kept, utf8_len(out), False, False,
                            max_lines, max_bytes)


def truncate_tail(content: str, max_lines: int = DEFAULT_MAX_LINES,
                  max_bytes: int = DEFAULT_MAX_BYTES) -> TruncationResult:
    """Keep the last lines that fit both limits. When the last line alone is over ``max_bytes`` its end
    is kept (``lastLinePartial``), cut on a character boundary."""
    total_bytes = utf8_len(content)
    lines = content.split("\n")
    total_lines = len(lines)
    if total_lines <= max_lines and total_bytes <= max_bytes:
        return TruncationResult(content, False, None, total_lines, total_bytes, total_lines, total_bytes,
                                False, False, max_lines, max_bytes)
    kept: list[str] = []
    used = 0
    by: TruncatedBy = "lines"
    partial = False
    for line in reversed(lines):
        if len(kept) >= max_lines:
            break
        size = utf8_len(line) + (1 if kept else 0)
        if used + size > max_bytes:
            by = "bytes"
            if not kept:
                tail = tail_bytes(line, max_bytes)
                kept.append(tail)
                used = utf8_len(tail)
                partial = True
            break
        kept.append(line)
        used += size
    if len(kept) >= max_lines and used <= max_bytes:
        by = "lines"
    kept.reverse()
    out = "\n".join(kept)
    return TruncationResult(out, True, by, total_lines, total_bytes, len(kept), utf8_len(out), partial, False,
                            max_lines, max_bytes)


def tail_bytes(text: str, max_bytes: int) -> str:
    """The longest suffix of ``text`` that is at most ``max_bytes`` of UTF-8, starting on a character."""
    data = text.encode("utf-8", "replace") if _has_surrogate(text) else text.encode("utf-8")
    if len(data) <= max_bytes:
        return text
    start = len(data) - max_bytes
    while start < len(data) and (data[start] & 0xC0) == 0x80:
        start += 1
    return data[start:].decode("utf-8")


def truncate_line(line: str, max_chars: int = GREP_MAX_LINE_LENGTH) -> tuple[str, bool]:
    """One grep line cut to ``max_chars`` (UTF-16 units in pi; characters here) plus a marker."""
    if len(line) <= max_chars:
        return line, False
    return f"{line[:max_chars]}... [truncated]", True


__all__ = [
    "DEFAULT_MAX_LINES", "DEFAULT_MAX_BYTES", "GREP_MAX_LINE_LENGTH", "MAX_SAFE_INTEGER", "TruncationResult",
    "format_size", "js_number", "truncate_head", "truncate_tail", "truncate_line", "utf8_len", "tail_bytes",
    "head_from_lines",
]


Notice = tuple[str, str, Any]  # (text shown to the model, details key, details value)


def listing_result(text: str, limit: Notice | None = None, extra: Notice | None = None, *,
                   truncation: TruncationResult | None = None) -> tuple[str, dict[str, Any] | None]:
    """The result of a listing tool (grep, find, ls): ``text`` cut to 50KB from the top, then the notices
    in pi's order (result limit, byte limit, ``extra``) in one bracket, with their details. ``truncation``,
    when given, is ``truncate_head(text, max_lines=MAX_SAFE_INTEGER)`` computed by the caller (find cuts a
    listing it never joins whole)."""
    trunc = truncation if truncation is not None else truncate_head(text, max_lines=MAX_SAFE_INTEGER)
    notices: list[str] = []
    details: dict[str, Any] = {}
    if limit is not None:
        notices.append(limit[0])
        details[limit[1]] = limit[2]
    if trunc.truncated:
        notices.append(f"{format_size(DEFAULT_MAX_BYTES)} limit reached")
        details["truncation"] = trunc.to_dict()
    if extra is not None:
        notices.append(extra[0])
        details[extra[1]] = extra[2]
    out = trunc.content + (f"\n\n[{'. '.join(notices)}]" if notices else "")
    return out, details or None
