"""Text replacement and the line-numbered diff of the ``edit`` tool.

The diff is a minimal line diff (Myers' greedy O(ND) search over lines, each line carrying its newline,
branching and pruning the way pi's diff library does so that the same hunks come out), rendered as pi
renders it: ``+12 new``, `` -3 old``, ``  7 context`` with 4 lines of context and ``...`` for gaps.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Any, Iterable

# ---------------------------------------------------------------------------------------------
# Line endings, BOM, fuzzy normalisation
# ---------------------------------------------------------------------------------------------


def detect_line_ending(content: str) -> str:
    """``\\r\\n`` when the first line break is CRLF, else ``\\n``."""
    lf = content.find("\n")
    if lf == -1:
        return "\n"
    crlf = content.find("\r\n")
    if crlf == -1:
        return "\n"
    return "\r\n" if crlf < lf else "\n"


def normalize_to_lf(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


def restore_line_endings(text: str, ending: str) -> str:
    return text.replace("\n", "\r\n") if ending == "\r\n" else text


def strip_bom(content: str) -> tuple[str, str]:
    """(bom, text without it)."""
    return ("\ufeff", content[1:]) if content.startswith("\ufeff") else ("", content)


_SINGLE_QUOTES = re.compile("[\u2018\u2019\u201a\u201b]")
_DOUBLE_QUOTES = re.compile("[\u201c\u201d\u201e\u201f]")
_DASHES = re.compile("[\u2010\u2011\u2012\u2013\u2014\u2015\u2212]")
_SPACES = re.compile("[\u00a0\u2002-\u200a\u202f\u205f\u3000]")
# JS trimEnd() whitespace: WhiteSpace + LineTerminator code points.
_JS_WS = "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a" \
         "\u2028\u2029\u202f\u205f\u3000\ufeff"


def normalize_for_fuzzy_match(text: str) -> str:
    """NFKC, trailing whitespace stripped per line, smart quotes, Unicode dashes and spaces made ASCII."""
    text = unicodedata.normalize("NFKC", text)
    text = "\n".join(line.rstrip(_JS_WS) for line in text.split("\n"))
    text = _SINGLE_QUOTES.sub("'", text)
    text = _DOUBLE_QUOTES.sub('"', text)
    text = _DASHES.sub("-", text)
    return _SPACES.sub(" ", text)


@dataclass(slots=True)
class FuzzyMatch:
    found: bool
    index: int
    match_length: int
    used_fuzzy: bool
    content_for_replacement: str


def fuzzy_find_text(content: str, old_text: str) -> FuzzyMatch:
    """Exact ``str.find`` first; failing that, find in the fuzzy-normalised content."""
    idx = content.find(old_text)
    if idx != -1:
        return FuzzyMatch(True, idx, len(old_text), False, content)
    fuzzy_content = normalize_for_fuzzy_match(content)
    fuzzy_old = normalize_for_fuzzy_match(old_text)
    idx = fuzzy_content.find(fuzzy_old)
    if idx == -1:
        return FuzzyMatch(False, -1, 0, False, content)
    return FuzzyMatch(True, idx, len(fuzzy_old), True, fuzzy_content)


def _count_occurrences(content: str, old_text: str) -> int:
    fuzzy_content = normalize_for_fuzzy_match(content)
    fuzzy_old = normalize_for_fuzzy_match(old_text)
    if not fuzzy_old:  # JS "abc".split("") has one piece per UTF-16 unit
        return len(fuzzy_content.encode("utf-16-le")) // 2 - 1
    return fuzzy_content.count(fuzzy_old)


class EditError(Exception):
    """An edit that cannot be applied; the message is pi's, for the model."""


def apply_edits(normalized_content: str, edits: Iterable[dict[str, Any]], path: str) -> tuple[str, str]:
    """Apply replacements, all matched against the same (LF-normalised) original. Returns
    (base content, new content); the base is the fuzzy-normalised content when any edit needed it."""
    pairs = [(normalize_to_lf(e["oldText"]), normalize_to_lf(e["newText"])) for e in edits]
    total = len(pairs)
    for i, (old, _new) in enumerate(pairs):
        if not old:
            raise EditError(f"oldText must not be empty in {path}." if total == 1
                            else f"edits[{i}].oldText must not be empty in {path}.")
    initial = [fuzzy_find_text(normalized_content, old) for old, _ in pairs]
    base = normalize_for_fuzzy_match(normalized_content) if any(m.used_fuzzy for m in initial) \
        else normalized_content
    matched: list[tuple[int, int, int, str]] = []  # (match index, length, edit index, new text)
    for i, (old, new) in enumerate(pairs):
        m = fuzzy_find_text(base, old)
        if not m.found:
            raise EditError(
                f"Could not find the exact text in {path}. The old text must match exactly including all "
                "whitespace and newlines." if total == 1 else
                f"Could not find edits[{i}] in {path}. The oldText must match exactly including all whitespace "
                "and newlines.")
        n = _count_occurrences(base, old)
        if n > 1:
            raise EditError(
                f"Found {n} occurrences of the text in {path}. The text must be unique. Please provide more "
                "context to make it unique." if total == 1 else
                f"Found {n} occurrences of edits[{i}] in {path}. Each oldText must be unique. Please provide "
                "more context to make it unique.")
        matched.append((m.index, m.match_length, i, new))
    matched.sort(key=lambda t: t[0])
    for prev, cur in zip(matched, matched[1:], strict=False):
        if prev[0] + prev[1] > cur[0]:
            raise EditError(f"edits[{prev[2]}] and edits[{cur[2]}] overlap in {path}. Merge them into one edit "
                            "or target disjoint regions.")
    pieces: list[str] = []
    pos = 0
    for index, length, _i, new in matched:
        pieces.append(base[pos:index])
        pieces.append(new)
        pos = index + length
    pieces.append(base[pos:])
    new_content = "".join(pieces)
    if new_content == base:
        raise EditError(
            f"No changes made to {path}. The replacement produced identical content. This might indicate an "
            "issue with special characters or the text not existing as expected." if total == 1 else
            f"No changes made to {path}. The replacements produced identical content.")
    return base, new_content


# ---------------------------------------------------------------------------------------------
# Line diff
# ---------------------------------------------------------------------------------------------
_LINE_SPLIT = re.compile(r"(\n|\r\n)")


def tokenize_lines(text: str) -> list[str]:
    """Lines with their line break attached; a final line without one is its own token."""
    parts = _LINE_SPLIT.split(text)
    if parts and not parts[-1]:
        parts.pop()
    tokens: list[str] = []
    for i, part in enumerate(parts):
        if i % 2:
            tokens[-1] += part
        else:
            tokens.append(part)
    return [t for t in tokens if t]


# A path node: (previous node, kind, count). kind is " " (common), "+" or "-".
_Node = tuple[Any, str, int]


def _extend(node: _Node | None, kind: str) -> _Node:
    if node is not None and node[1] == kind:
        return (node[0], kind, node[2] + 1)
    return (node, kind, 1)


def diff_lines(old: str, new: str, max_edit_length: int | None = None) -> list[tuple[str, str]] | None:
    """Minimal line diff as ``[(kind, text), ...]`` with kind in `` ``, ``+``, ``-``; consecutive lines of a
    kind are joined. None when more than ``max_edit_length`` lines would have to change."""
    a = tokenize_lines(old)
    b = tokenize_lines(new)
    n, m = len(a), len(b)
    limit = n + m if max_edit_length is None else min(n + m, max_edit_length)
    if max_edit_length is not None and _min_edit_length(a, b) > limit:
        return None

    def snake(x: int, k: int, node: _Node | None) -> tuple[int, _Node | None]:
        y = x - k
        start = x
        while x < n and y < m and a[x] == b[y]:
            x += 1
            y += 1
        if x > start:
            node = (node, " ", x - start)
        return x, node

    # best[k] = (x, node): the furthest-reaching path on diagonal k = x - y
    x0, node0 = snake(0, 0, None)
    if x0 >= n and x0 >= m:
        return _values(node0, a, b)
    best: dict[int, tuple[int, _Node | None] | None] = {0: (x0, node0)}
    lo, hi = float("-inf"), float("inf")
    node: _Node | None
    d = 1
    while d <= limit:
        k = int(max(lo, -d))
        top = min(hi, d)
        while k <= top:
            rem = best.get(k - 1)
            add = best.get(k + 1)
            if rem is not None:
                best[k - 1] = None
            can_add = add is not None and 0 <= add[0] - k - 1 < m
            can_rem = rem is not None and rem[0] < n
            if not can_add and not can_rem:
                best[k] = None
                k += 2
                continue
            if add is not None and can_add and (rem is None or not can_rem or rem[0] < add[0]):
                x, node = add[0], _extend(add[1], "+")
            else:
                assert rem is not None  # can_rem holds here: one of can_add, can_rem does
                x, node = rem[0] + 1, _extend(rem[1], "-")
            x, node = snake(x, k, node)
            y = x - k
            if x >= n and y >= m:
                return _values(node, a, b)
            best[k] = (x, node)
            if x >= n:
                hi = min(hi, k - 1)
            if y >= m:
                lo = max(lo, k + 1)
            k += 2
        d += 1
    return None


def _min_edit_length(a: list[str], b: list[str]) -> int:
    """A lower bound of the edit distance: lines that occur more often on one side must be edited."""
    counts: dict[str, int] = {}
    for t in a:
        counts[t] = counts.get(t, 0) + 1
    for t in b:
        counts[t] = counts.get(t, 0) - 1
    return sum(abs(c) for c in counts.values())


def _values(node: _Node | None, a: list[str], b: list[str]) -> list[tuple[str, str]]:
    chain: list[tuple[str, int]] = []
    while node is not None:
        chain.append((node[1], node[2]))
        node = node[0]
    chain.reverse()
    out: list[tuple[str, str]] = []
    i = j = 0
    for kind, count in chain:
        if kind == "-":
            out.append((kind, "".join(a[i:i + count])))
            i += count
        else:
            out.append((kind, "".join(b[j:j + count])))
            j += count
            if kind == " ":
                i += count
    return out


def _fallback_parts(old: str, new: str) -> list[tuple[str, str]]:
    """For huge rewrites: common prefix and suffix lines, everything between removed then added."""
    a, b = tokenize_lines(old), tokenize_lines(new)
    p = 0
    while p < len(a) and p < len(b) and a[p] == b[p]:
        p += 1
    s = 0
    while s < len(a) - p and s < len(b) - p and a[-1 - s] == b[-1 - s]:
        s += 1
    parts = [(" ", "".join(a[:p])), ("-", "".join(a[p:len(a) - s])), ("+", "".join(b[p:len(b) - s])),
             (" ", "".join(a[len(a) - s:]))]
    return [pt for pt in parts if pt[1]]


# Beyond this many changed lines the exact search gets slow (it is quadratic in them); the fallback
# still shows every change, only possibly less tightly aligned.
MAX_EXACT_EDIT_LENGTH = 2000


def generate_diff_string(old: str, new: str, context_lines: int = 4) -> tuple[str, int | None]:
    """pi's numbered diff and the first changed line (in the new file)."""
    parts = diff_lines(old, new, MAX_EXACT_EDIT_LENGTH)
    if parts is None:
        parts = _fallback_parts(old, new)
    output: list[str] = []
    width = len(str(max(len(old.split("\n")), len(new.split("\n")))))
    blank = " " * width
    old_no = new_no = 1
    last_was_change = False
    first_changed: int | None = None

    def ctx(line: str) -> None:
        nonlocal old_no, new_no
        output.append(f" {str(old_no).rjust(width)} {line}")
        old_no += 1
        new_no += 1

    for i, (kind, value) in enumerate(parts):
        raw = value.split("\n")
        if raw[-1] == "":
            raw.pop()
        if kind != " ":
            if first_changed is None:
                first_changed = new_no
            for line in raw:
                if kind == "+":
                    output.append(f"+{str(new_no).rjust(width)} {line}")
                    new_no += 1
                else:
                    output.append(f"-{str(old_no).rjust(width)} {line}")
                    old_no += 1
            last_was_change = True
            continue
        next_is_change = i < len(parts) - 1 and parts[i + 1][0] != " "
        if last_was_change and next_is_change:
            if len(raw) <= context_lines * 2:
                for line in raw:
                    ctx(line)
            else:
                skipped = len(raw) - 2 * context_lines
                for line in raw[:context_lines]:
                    ctx(line)
                output.append(f" {blank} ...")
                old_no += skipped
                new_no += skipped
                for line in raw[len(raw) - context_lines:]:
                    ctx(line)
        elif last_was_change:
            for line in raw[:context_lines]:
                ctx(line)
            skipped = len(raw) - min(len(raw), context_lines)
            if skipped > 0:
                output.append(f" {blank} ...")
                old_no += skipped
                new_no += skipped
        elif next_is_change:
            skipped = max(0, len(raw) - context_lines)
            if skipped > 0:
                output.append(f" {blank} ...")
                old_no += skipped
                new_no += skipped
            for line in raw[skipped:]:
                ctx(line)
        else:
            old_no += len(raw)
            new_no += len(raw)
        last_was_change = False
    return "\n".join(output), first_changed


__all__ = [
    "detect_line_ending", "normalize_to_lf", "restore_line_endings", "strip_bom", "normalize_for_fuzzy_match",
    "fuzzy_find_text", "apply_edits", "EditError", "tokenize_lines", "diff_lines", "generate_diff_string",
]
