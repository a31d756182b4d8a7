"""Helpers shared by the provider modules (no SDK imports here)."""

from __future__ import annotations

import json
from typing import Any

from pisces.ai.models import calculate_cost
from pisces.ai.types import AssistantMessage, Model, Usage, now_ms


def new_output(model: Model) -> AssistantMessage:
    """The empty assistant message a stream starts from (zero usage, stopReason ``stop``)."""
    return AssistantMessage(
        content=[], api=model.api, provider=model.provider, model=model.id, usage=Usage(), stopReason="stop",
        timestamp=now_ms(),
    )


def finish_usage(model: Model, usage: Usage) -> None:
    usage.totalTokens = usage.input + usage.output + usage.cacheRead + usage.cacheWrite
    calculate_cost(model, usage)


def parse_partial_json(text: str) -> dict[str, Any]:
    """Best-effort parse of streamed tool-call arguments; incomplete JSON is closed before parsing."""
    if not text:
        return {}
    try:
        value = json.loads(text)
        return value if isinstance(value, dict) else {}
    except ValueError:
        pass
    closed = _close_json(text)
    if closed is not None:
        try:
            value = json.loads(closed)
            return value if isinstance(value, dict) else {}
        except ValueError:
            pass
    return {}


def _close_json(text: str) -> str | None:
    stack: list[str] = []
    in_str = False
    esc = False
    for ch in text:
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
            continue
        if ch == '"':
            in_str = True
        elif ch in "{[":
            stack.append("}" if ch == "{" else "]")
        elif ch in "}]":
            if stack:
                stack.pop()
    out = text
    if esc:
        out = out[:-1]
    if in_str:
        out += '"'
    stripped = out.rstrip()
    if stripped.endswith((",", ":")):
        stripped = stripped[:-1]
        if stripped.endswith(":"):
            return None
    return stripped + "".join(reversed(stack))


def format_http_error(status: int | None, message: str | None) -> str:
    """``<status> <provider message>`` as the OpenAI JS SDK formats it (pi shows this text)."""
    msg = (message or "").strip()
    if status is None:
        return msg or "Request failed"
    return f"{status} {msg}".strip() if msg else f"{status} status code (no body)"
