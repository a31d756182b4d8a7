"""Approval rules: ``{tool, match?, approval: allow|deny|prompt, reason?}``, ordered, first match wins.

``tool`` names the tool (``*`` matches any run of characters: ``"*"`` is every tool). ``match`` is a glob over
the call's primary argument, whitespace-normalized: the ``command`` of ``bash`` (and of any tool whose
argument is ``command``), else its ``path`` (``file_path``). ``*`` matches any run of characters, ``/``
included; ``\\*`` is a literal star and ``\\\\`` a literal backslash. A rule without ``match`` covers every call
of its tool; a rule with ``match`` never matches a tool that has neither argument.

Commands:
* ``allow`` must cover the whole command, and never matches a command with a shell control character or
  substitution (``; & | < > ` $ ( )``, a newline) or one that runs a quoted argument as code (``bash -c``,
  ``python -c``, ``eval``): see ``shell.py``;
* ``deny`` and ``prompt`` match the whole command or any simple command in it.

Paths are matched as given (``deny``/``prompt`` only) and normalized: relative to the working directory when
inside it, else absolute, ``..`` resolved, ``~`` expanded; symbolic links are not followed (no file system
access here).
"""

from __future__ import annotations

import os
from typing import Any

from pisces.core.approval import shell
from pisces.core.approval.types import APPROVALS

RULE_KEYS = ("tool", "match", "approval", "reason")
MAX_MATCH = 256 * 1024
MAX_REASON = 2048
_STRICTNESS = {"allow": 1, "prompt": 2, "deny": 3}


class RuleError(ValueError):
    """A rule that cannot be used; the text says which field and why."""


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {bool: "a boolean", int: "a number", float: "a number", str: "a string", list: "an array",
            dict: "an object"}.get(type(value), type(value).__name__)


def check_rule(rule: Any) -> dict[str, Any]:
    """The rule as stored (keys in their order, absent optional keys left out), or RuleError."""
    if not isinstance(rule, dict):
        raise RuleError(f"a rule must be an object {{tool, match?, approval, reason?}}, not {_kind(rule)}")
    unknown = [k for k in rule if k not in RULE_KEYS]
    if unknown:
        raise RuleError(f"unknown rule field(s) {', '.join(map(repr, unknown))}: use tool, match, approval, reason")
    tool = rule.get("tool")
    if not isinstance(tool, str) or not tool.strip():
        raise RuleError(f"'tool' must be a tool name (or a * pattern), not {_kind(tool)}")
    approval = rule.get("approval")
    if approval not in APPROVALS:
        raise RuleError(f"'approval' must be 'allow', 'deny' or 'prompt', not "
                        f"{repr(approval) if isinstance(approval, str) else _kind(approval)}")
    out: dict[str, Any] = {"tool": tool.strip()}
    match = rule.get("match")
    if match is not None:
        if not isinstance(match, str) or not match.strip():
            raise RuleError("'match' must be a non-empty pattern" +
                            ("" if isinstance(match, str) else f", not {_kind(match)}"))
        if len(match) > MAX_MATCH:
            raise RuleError(f"'match' is longer than {MAX_MATCH // 1024} KiB")
        out["match"] = match
    out["approval"] = approval
    reason = rule.get("reason")
    if reason is not None:
        if not isinstance(reason, str):
            raise RuleError(f"'reason' must be a string, not {_kind(reason)}")
        out["reason"] = reason[:MAX_REASON]
    return out


def escape(text: str) -> str:
    """A pattern that matches exactly ``text``."""
    return text.replace("\\", "\\\\").replace("*", "\\*")


def _pieces(pattern: str) -> list[str | None]:
    """Literal chunks, with None for each ``*``."""
    out: list[str | None] = []
    buf: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\" and i + 1 < n and pattern[i + 1] in "*\\":
            buf.append(pattern[i + 1])
            i += 2
            continue
        if c == "*":
            if buf:
                out.append("".join(buf))
                buf = []
            if not out or out[-1] is not None:
                out.append(None)
        else:
            buf.append(c)
        i += 1
    if buf:
        out.append("".join(buf))
    return out


def glob_match(pattern: str, text: str) -> bool:
    """Whether ``*``-glob ``pattern`` covers the whole of ``text``. Leftmost search per literal chunk: linear
    in the text for each chunk, with no backtracking."""
    pieces = _pieces(pattern)
    if not pieces:
        return text == ""
    pos = 0
    first, last = pieces[0], pieces[-1]
    if first is not None:
        if not text.startswith(first):
            return False
        pos = len(first)
        pieces = pieces[1:]
        if not pieces:
            return pos == len(text)
    tail = ""
    if last is not None:
        tail = last
        pieces = pieces[:-1]
        if len(text) - len(tail) < pos or not text.endswith(tail):
            return False
    end = len(text) - len(tail)
    for piece in pieces:
        if piece is None:
            continue
        found = text.find(piece, pos, end)
        if found < 0:
            return False
        pos = found + len(piece)
    return True


# ---------------------------------------------------------------------------------------------
# The call's primary argument
# ---------------------------------------------------------------------------------------------
def primary(tool_name: str, args: dict[str, Any]) -> tuple[str | None, str | None]:
    """(``"command"``, the command) or (``"path"``, the path) or (None, None)."""
    command = args.get("command")
    if isinstance(command, str) and (tool_name == "bash" or "path" not in args):
        return "command", command
    for key in ("path", "file_path"):
        value = args.get(key)
        if isinstance(value, str) and value:
            return "path", value
    return None, None


def path_forms(path: str, cwd: str) -> list[str]:
    """The normalized forms of a path: relative to ``cwd`` when inside it, and absolute."""
    text = path.strip()
    absolute = os.path.normpath(os.path.join(cwd, os.path.expanduser(text)))
    forms = []
    rel = os.path.relpath(absolute, cwd) if absolute == cwd or absolute.startswith(cwd.rstrip("/") + "/") else None
    if rel is not None:
        forms.append(rel)
    forms.append(absolute)
    return forms


class CallView:
    """What rules look at in one call, computed once."""

    def __init__(self, tool_name: str, args: dict[str, Any], cwd: str) -> None:
        self.tool_name = tool_name
        self.kind, raw = primary(tool_name, args)
        self.raw = raw
        self.text = shell.normalize(raw) if raw is not None else None
        self._segments: list[str] | None = None
        self._allowable: bool | None = None
        self.paths = path_forms(raw, cwd) if self.kind == "path" and raw is not None else []

    @property
    def segments(self) -> list[str]:
        if self._segments is None:
            self._segments = shell.segments(self.raw or "") if self.kind == "command" else []
        return self._segments

    @property
    def allowable(self) -> bool:
        """Whether an allow rule may match this call at all (no control characters, no code in quotes)."""
        if self._allowable is None:
            raw = self.raw or ""
            self._allowable = self.kind != "command" or not (shell.has_control(raw) or shell.reinterprets(raw))
        return self._allowable

    def grant_key(self) -> tuple[str, ...]:
        """What a session grant covers: the exact command, the path, or the whole tool."""
        if self.kind == "command":
            return (self.tool_name, "command", self.text or "")
        if self.kind == "path":
            return (self.tool_name, "path", self.paths[-1])
        return (self.tool_name,)


def rule_matches(rule: dict[str, Any], view: CallView) -> bool:
    if not glob_match(rule["tool"], view.tool_name):
        return False
    approval = rule["approval"]
    if approval == "allow" and not view.allowable:
        return False
    pattern = rule.get("match")
    if pattern is None:
        return True
    pattern = shell.normalize(pattern)
    if view.kind == "command":
        if glob_match(pattern, view.text or ""):
            return True
        return approval != "allow" and any(glob_match(pattern, s) for s in view.segments)
    if view.kind == "path":
        candidates = view.paths if approval == "allow" else [shell.normalize(view.raw or ""), *view.paths]
        return any(glob_match(pattern, c) for c in candidates)
    return False


def first_match(rules: list[dict[str, Any]], view: CallView) -> dict[str, Any] | None:
    for rule in rules:
        if rule_matches(rule, view):
            return rule
    return None


def stricter(a: dict[str, Any] | None, b: dict[str, Any] | None) -> dict[str, Any] | None:
    """The rule whose verdict is stricter (deny > prompt > allow > no rule); ``a`` on a tie."""
    if b is None:
        return a
    if a is None:
        return b
    return b if _STRICTNESS[b["approval"]] > _STRICTNESS[a["approval"]] else a


def describe(rule: dict[str, Any]) -> str:
    """``bash "rm *"`` or ``write``: how a message names a rule."""
    match = rule.get("match")
    return f'{rule["tool"]} "{match}"' if match is not None else str(rule["tool"])
