"""Markdown files with a YAML front matter block (agent definitions).

pisces has no YAML library, and agent files need only a small part of YAML: nested mappings by indentation,
block lists (``- item``), flow lists (``[a, b]``) and flow mappings (``{a: 1}``), plain, single- and
double-quoted scalars, numbers, booleans, null, and ``#`` comments. Anything else is a ``FrontmatterError``
naming the line, never a guess.
"""

from __future__ import annotations

import json
import re
from typing import Any


class FrontmatterError(ValueError):
    pass


def split_frontmatter(text: str) -> tuple[str | None, str]:
    """(front matter text or None, body). The block opens with ``---`` on the first line and closes with the
    next line that is exactly ``---``."""
    text = text.lstrip("\ufeff")
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].rstrip("\r\n") != "---":
        return None, text
    for i in range(1, len(lines)):
        if lines[i].rstrip("\r\n") == "---":
            body = "".join(lines[i + 1:])
            return "".join(lines[1:i]), body.lstrip("\r\n")
    raise FrontmatterError("front matter opened with '---' is never closed")


def parse_frontmatter(text: str) -> tuple[dict[str, Any], str]:
    """(front matter as a dict, body)."""
    raw, body = split_frontmatter(text)
    if raw is None:
        return {}, body
    data = parse_yaml_subset(raw)
    if data is None:
        return {}, body
    if not isinstance(data, dict):
        raise FrontmatterError("front matter must be a mapping of keys to values")
    return data, body


# ---------------------------------------------------------------------------------------------
# The YAML subset
# ---------------------------------------------------------------------------------------------
_KEY = re.compile(r"^(?P<key>[^\s'\"#\[\]{},:][^:#]*?|\"[^\"]*\"|'[^']*')\s*:(?:\s+|$)(?P<rest>.*)$")


def _strip_comment(line: str) -> str:
    """``line`` without a trailing ``# comment`` (a ``#`` inside quotes is kept)."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1] in " \t"):
            return line[:i].rstrip()
    return line.rstrip()


def parse_yaml_subset(text: str) -> Any:
    lines: list[tuple[int, int, str]] = []  # (line number, indent, content)
    for number, raw in enumerate(text.splitlines(), start=1):
        if "\t" in raw[: len(raw) - len(raw.lstrip())]:
            raise FrontmatterError(f"line {number}: indent with spaces, not tabs")
        content = _strip_comment(raw)
        if content.strip():
            lines.append((number, len(content) - len(content.lstrip(" ")), content.strip()))
    if not lines:
        return None
    value, pos = _block(lines, 0, lines[0][1])
    if pos != len(lines):
        raise FrontmatterError(f"line {lines[pos][0]}: unexpected indentation")
    return value


def _block(lines: list[tuple[int, int, str]], pos: int, indent: int) -> tuple[Any, int]:
    if lines[pos][2].startswith("- ") or lines[pos][2] == "-":
        return _sequence(lines, pos, indent)
    return _mapping(lines, pos, indent)


def _sequence(lines: list[tuple[int, int, str]], pos: int, indent: int) -> tuple[list[Any], int]:
    out: list[Any] = []
    while pos < len(lines) and lines[pos][1] == indent and (lines[pos][2].startswith("- ") or lines[pos][2] == "-"):
        number, _, content = lines[pos]
        item = content[1:].strip()
        pos += 1
        if not item:
            if pos < len(lines) and lines[pos][1] > indent:
                value, pos = _block(lines, pos, lines[pos][1])
                out.append(value)
            else:
                out.append(None)
        elif _KEY.match(item) and not item.startswith(("[", "{", "'", '"')):
            # "- key: value" starts a mapping whose further keys are indented past the dash
            sub = [(number, indent + 2, item)]
            while pos < len(lines) and lines[pos][1] > indent:
                sub.append(lines[pos])
                pos += 1
            value, used = _mapping(sub, 0, indent + 2)
            if used != len(sub):
                raise FrontmatterError(f"line {sub[used][0]}: unexpected indentation")
            out.append(value)
        else:
            out.append(_scalar(item, number))
    return out, pos


def _mapping(lines: list[tuple[int, int, str]], pos: int, indent: int) -> tuple[dict[str, Any], int]:
    out: dict[str, Any] = {}
    while pos < len(lines) and lines[pos][1] == indent:
        number, _, content = lines[pos]
        match = _KEY.match(content)
        if match is None:
            raise FrontmatterError(f"line {number}: expected 'key: value', got {content!r}")
        key = match.group("key").strip()
        if key[:1] in "'\"":
            key = key[1:-1]
        rest = match.group("rest").strip()
        pos += 1
        if rest in ("|", ">", "|-", ">-"):
            block: list[str] = []
            while pos < len(lines) and lines[pos][1] > indent:
                block.append(lines[pos][2])
                pos += 1
            out[key] = ("\n" if rest.startswith("|") else " ").join(block)
        elif rest:
            out[key] = _scalar(rest, number)
        elif pos < len(lines) and (lines[pos][1] > indent or (
                lines[pos][1] == indent and lines[pos][2].startswith("- "))):
            out[key], pos = _block(lines, pos, lines[pos][1])
        else:
            out[key] = None
    return out, pos


_NUMBER = re.compile(r"^[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?$")


def _scalar(text: str, number: int) -> Any:
    if text.startswith(("[", "{")):
        return _flow(text, number)
    if text.startswith('"'):
        try:
            value, end = json.JSONDecoder().raw_decode(text)
        except ValueError:
            raise FrontmatterError(f"line {number}: unterminated double-quoted string") from None
        if text[end:].strip():
            raise FrontmatterError(f"line {number}: text after a quoted string")
        return value
    if text.startswith("'"):
        if len(text) < 2 or not text.endswith("'"):
            raise FrontmatterError(f"line {number}: unterminated single-quoted string")
        return text[1:-1].replace("''", "'")
    lowered = text.lower()
    if lowered in ("true", "yes", "on"):
        return True
    if lowered in ("false", "no", "off"):
        return False
    if lowered in ("null", "~"):
        return None
    if _NUMBER.match(text):
        value = float(text)
        return int(value) if value.is_integer() and re.match(r"^[-+]?\d+$", text) else value
    return text


def _flow(text: str, number: int) -> Any:
    """A flow list or mapping: JSON, or YAML's unquoted form (``[a, b]``, ``{a: 1}``)."""
    try:
        return json.loads(text)
    except ValueError:
        pass
    value, end = _flow_value(text, 0, number)
    if text[end:].strip():
        raise FrontmatterError(f"line {number}: text after a closing bracket")
    return value


def _flow_value(text: str, i: int, number: int) -> tuple[Any, int]:
    while i < len(text) and text[i] == " ":
        i += 1
    if i >= len(text):
        raise FrontmatterError(f"line {number}: unclosed bracket")
    opener = text[i]
    if opener not in "[{":
        j = i
        quote = text[i] if text[i] in "'\"" else None
        if quote:
            j = text.find(quote, i + 1)
            if j < 0:
                raise FrontmatterError(f"line {number}: unterminated quoted string")
            return _scalar(text[i:j + 1], number), j + 1
        while j < len(text) and text[j] not in ",]}" and not (text[j] == ":" and opener != "[" and
                                                              j + 1 < len(text) and text[j + 1] == " "):
            j += 1
        return _scalar(text[i:j].strip(), number), j
    closer = "]" if opener == "[" else "}"
    i += 1
    items: list[Any] = []
    mapping: dict[str, Any] = {}
    while True:
        while i < len(text) and text[i] in " ,":
            i += 1
        if i >= len(text):
            raise FrontmatterError(f"line {number}: unclosed '{opener}'")
        if text[i] == closer:
            return (items if opener == "[" else mapping), i + 1
        if opener == "[":
            value, i = _flow_value(text, i, number)
            items.append(value)
        else:
            colon = text.find(":", i)
            if colon < 0:
                raise FrontmatterError(f"line {number}: expected 'key: value' inside '{{}}'")
            key = text[i:colon].strip().strip("'\"")
            value, i = _flow_value(text, colon + 1, number)
            mapping[key] = value
