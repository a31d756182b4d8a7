"""How a request reads as text: the title of pi's ``select`` fallback (oh-my-pi's form: ``Allow tool: <name>``
then what is being approved, then why)."""

from __future__ import annotations

import json
from typing import Any


def identity_lines(identity: dict[str, Any], input_: Any = None) -> list[str]:
    kind = identity.get("kind")
    if kind == "shell":
        return ["Command:", str(identity.get("command", ""))]
    if kind == "plan":  # plan mode's exit_plan_mode (docs/planning.md)
        return [f"Plan: {identity.get('title', '')}", f"File: {identity.get('path', '')}",
                str(identity.get("content", ""))]
    if kind == "write":
        return [f"Path: {identity.get('path', '')}", "Content:", str(identity.get("content", ""))]
    if kind == "edit":
        lines = [f"Path: {identity.get('path', '')}"]
        for i, edit in enumerate(identity.get("edits") or []):
            lines += [f"Edit {i + 1}, replace:", str(edit.get("oldText", "")), "with:", str(edit.get("newText", ""))]
        return lines
    if identity.get("path"):
        return [f"Path: {identity.get('path')}"]
    return ["Input:", json.dumps(input_ if input_ is not None else {}, ensure_ascii=False, sort_keys=True)]


def select_title(tool_name: str, identity: dict[str, Any], input_: Any = None, reason: str | None = None) -> str:
    lines = [f"Allow tool: {tool_name}", *identity_lines(identity, input_)]
    if reason:
        lines.append(f"Why: {reason}")
    return "\n".join(lines)


def request_title(request: Any) -> str:
    return select_title(request.tool_name, request.identity, request.input, request.detail)
