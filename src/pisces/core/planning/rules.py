"""Stream rules (TTSR): rule files, their scopes, and matching a streamed reply against them.

A rule is a markdown file with a frontmatter, found in the user's ``<agent dir>/rules/*.md`` and, when the
project is trusted, the project's ``.pisces/rules/*.md`` (a project rule of the same name wins). Keys:

* ``ttsrTrigger`` (oh-my-pi), or ``condition`` (newer oh-my-pi): the regex that fires the rule;
* ``scope``: where it looks, a list or comma-separated: ``text`` (the assistant's text), ``thinking``,
  ``tool`` (any tool call's arguments), ``tool:edit`` (that tool's), ``tool:edit(*.py)`` (that tool's, when
  its ``path`` argument matches the glob). Default: ``text`` and every ``tool``;
* ``globs``: path globs applied to every ``tool`` scope without its own;
* ``name`` (default: the file name without ``.md``), ``description``;
* the body: what the model is told when the rule fires.

Matching is RE2 (linear time in the input, as the tools' regexes) over a bounded window: the last
``WINDOW`` characters of each stream (a match must fit in it). A rule whose regex RE2 refuses is reported in
``errors`` and never fires; a file that cannot be read is skipped with an error, never a crash.
"""

from __future__ import annotations

import fnmatch
import json
import os
from typing import Any

from pisces.core.resources.skills import parse_frontmatter
from pisces.core.safe_open import read_text

WINDOW = 8192  # characters of each stream the regexes see (a bound on the work per delta)
MAX_RULE_BYTES = 256 << 10
MAX_RULES = 200


class Scope:
    """One place a rule looks: ``kind`` is ``text``, ``thinking`` or ``tool``; ``tool`` a tool name or None
    (any tool); ``glob`` a path glob or None."""

    __slots__ = ("kind", "tool", "glob")

    def __init__(self, kind: str, tool: str | None = None, glob: str | None = None) -> None:
        self.kind, self.tool, self.glob = kind, tool, glob

    def __repr__(self) -> str:
        if self.kind != "tool":
            return self.kind
        out = "tool" + (f":{self.tool}" if self.tool else "")
        return out + (f"({self.glob})" if self.glob else "")


def parse_scope(value: Any, globs: list[str]) -> list[Scope]:
    if value in (None, ""):
        items = ["text", "tool"]
    elif isinstance(value, list):
        items = [str(v) for v in value]
    else:
        text = str(value).strip()
        if text.startswith("[") and text.endswith("]"):
            text = text[1:-1]
        items = [s.strip().strip("'\"") for s in _split_top(text)]
    out: list[Scope] = []
    for item in items:
        if not item:
            continue
        if item in ("text", "thinking"):
            out.append(Scope(item))
            continue
        if not item.startswith("tool"):
            raise ValueError(f"unknown scope {item!r}: use text, thinking, tool, tool:NAME or tool:NAME(GLOB)")
        rest = item[4:]
        glob = None
        if rest.endswith(")") and "(" in rest:
            rest, _, glob = rest[:-1].partition("(")
        tool = rest[1:] if rest.startswith(":") else (None if not rest else "")
        if tool == "" or (tool is not None and tool in ("*", "")):
            tool = None
        if glob is None and globs:
            out.extend(Scope("tool", tool, g) for g in globs)
        else:
            out.append(Scope("tool", tool, glob or None))
    return out


def _split_top(text: str) -> list[str]:
    """Split on commas outside parentheses (``tool:edit(*.{ts,js})`` stays one item)."""
    parts: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in text:
        if ch in "({":
            depth += 1
        elif ch in ")}" and depth:
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return parts


def compile_regex(pattern: str) -> Any:
    import re2  # noqa: PLC0415 - google-re2: imported when the first rule is loaded, not at start-up

    options = re2.Options()
    options.never_capture = True
    options.log_errors = False
    try:
        return re2.compile(pattern, options)
    except re2.error as exc:
        raise ValueError(f"RE2 cannot compile {pattern!r}: {exc}") from None


class Rule:
    def __init__(self, name: str, trigger: str, scopes: list[Scope], body: str, path: str,
                 description: str = "") -> None:
        self.name, self.trigger, self.scopes, self.body, self.path = name, trigger, scopes, body, path
        self.description = description
        self.regex = compile_regex(trigger)

    def info(self) -> dict[str, Any]:
        return {"name": self.name, "path": self.path, "trigger": self.trigger,
                "scope": [repr(s) for s in self.scopes]}

    def applies(self, kind: str, tool: str | None = None, path: str | None = None) -> bool:
        for s in self.scopes:
            if s.kind != kind:
                continue
            if kind != "tool":
                return True
            if s.tool is not None and s.tool != tool:
                continue
            if s.glob is not None and (path is None or not _glob_match(path, s.glob)):
                continue
            return True
        return False

    def matches(self, text: str) -> bool:
        return self.regex.search(text[-WINDOW:]) is not None


def _glob_match(path: str, glob: str) -> bool:
    if "/" not in glob:
        path = path.replace("\\", "/").rsplit("/", 1)[-1]
    return fnmatch.fnmatchcase(path, glob)


def load_rule(path: str) -> Rule | None:
    """The rule of one file, or None when it has no trigger (a plain rule for the system prompt, not TTSR).
    Raises ValueError (with the file named) when the file is malformed."""
    text = read_text(path, MAX_RULE_BYTES, errors="replace")
    meta, body = parse_frontmatter(text)
    trigger = meta.get("ttsrTrigger") or meta.get("condition")
    if not trigger:
        return None
    if not isinstance(trigger, str):
        raise ValueError(f"{path}: ttsrTrigger must be a regex string")
    globs_raw = meta.get("globs")
    globs = [g.strip().strip("'\"") for g in _split_top(str(globs_raw).strip("[]"))] if globs_raw else []
    try:
        scopes = parse_scope(meta.get("scope"), [g for g in globs if g])
        name = str(meta.get("name") or os.path.basename(path)[:-3])
        return Rule(name, trigger, scopes, body.strip(), path, str(meta.get("description") or ""))
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None


def rule_dirs(agent_dir: str, cwd: str, project_trusted: bool) -> list[str]:
    dirs = [os.path.join(agent_dir, "rules")]
    if project_trusted:
        dirs.append(os.path.join(cwd, ".pisces", "rules"))
    return dirs


def load_rules(dirs: list[str]) -> tuple[list[Rule], list[str]]:
    """The rules of ``dirs`` in order (a later directory's rule of the same name replaces an earlier one),
    and the errors of the files that could not be used."""
    by_name: dict[str, Rule] = {}
    errors: list[str] = []
    for directory in dirs:
        try:
            names = sorted(n for n in os.listdir(directory) if n.endswith(".md"))
        except OSError:
            continue
        for name in names:
            if len(by_name) >= MAX_RULES:
                errors.append(f"{directory}: more than {MAX_RULES} rules; the rest are ignored")
                break
            try:
                rule = load_rule(os.path.join(directory, name))
            except (OSError, ValueError) as exc:
                errors.append(str(exc))
                continue
            if rule is not None:
                by_name[rule.name] = rule
    return list(by_name.values()), errors


def tool_path(arguments_json: str) -> str | None:
    """The ``path`` (or ``file_path``) argument of a streamed tool call, once the JSON so far names it."""
    try:
        args = json.loads(arguments_json)
    except ValueError:
        from pisces.ai.providers._shared import parse_partial_json  # noqa: PLC0415 - only while a rule watches a tool

        try:
            args = parse_partial_json(arguments_json)
        except Exception:  # noqa: BLE001 - a half-streamed argument that does not parse yet: no path yet
            return None
    if isinstance(args, dict):
        for key in ("path", "file_path", "filePath"):
            if isinstance(args.get(key), str):
                return args[key]
    return None
