"""Tool approval requests (typed frames, docs/approval.md) as a TUI dialog: the tool, what it would do (the
command, the path, the edit as a coloured diff), why it asks, and the answers offered (once / session /
always / deny / deny with a message)."""

from __future__ import annotations

from typing import Any

from pisces.modes.tui.render import style, wrap
from pisces.modes.tui.sanitize import clean

_SCOPE_LABELS = {"once": "Allow once", "session": "Allow for this session", "always": "Always allow (saves a rule)"}
DENY, DENY_WITH = "Deny", "Deny with a message…"


def approval_dialog(ev: dict[str, Any], width: int) -> dict[str, Any]:
    identity = ev.get("identity") or {}
    body: list[str] = []
    kind = identity.get("kind")
    if kind == "shell":
        for r in wrap("$ " + clean(str(identity.get("command", ""))), width - 2)[:8]:
            body.append("│ " + style(r, 1))
    elif kind == "plan":  # plan mode's exit_plan_mode: the plan itself (docs/planning.md)
        body.append("│ " + style("plan: " + clean(str(identity.get("title", ""))), 1))
        lines = clean(str(identity.get("content", ""))).split("\n")
        body.extend("│ " + line for line in lines[:20])
        if len(lines) > 20:
            body.append("│ " + style(f"… {len(lines) - 20} more lines in {clean(str(identity.get('path', '')))}", 2))
    elif kind in ("write", "edit", "read", "path"):
        body.append("│ " + style(clean(str(identity.get("path", ""))), 1))
        if kind == "edit":
            for e in (identity.get("edits") or [])[:3]:
                for line in clean(str(e.get("oldText", ""))).split("\n")[:6]:
                    body.append("│ " + style("- " + line, 31))
                for line in clean(str(e.get("newText", ""))).split("\n")[:6]:
                    body.append("│ " + style("+ " + line, 32))
        elif kind == "write":
            lines = clean(str(identity.get("content", ""))).split("\n")
            body.extend("│ " + style("+ " + line, 32) for line in lines[:6])
            if len(lines) > 6:
                body.append("│ " + style(f"… {len(lines) - 6} more lines", 2))
    reason = (ev.get("detail") or {}).get("reason")
    if reason:
        body.append("│ " + style("why: " + clean(str(reason)), 2))
    scopes = [s for s in ev.get("scopes") or ["once"] if s in _SCOPE_LABELS]
    options = [_SCOPE_LABELS[s] for s in scopes] + [DENY, DENY_WITH]
    return {"id": ev.get("id"), "toolCallId": ev.get("toolCallId"), "method": "approval",
            "title": f"{clean(str(ev.get('toolName', 'tool')))} wants to run ({ev.get('tier', '?')})",
            "message": "", "body": body, "options": options, "scopes": scopes, "index": 0}


def approval_answer(d: dict[str, Any], fields: dict[str, Any]) -> dict[str, Any] | None:
    """The ``tool_approval_response`` for the dialog's answer; None when a denial message must be asked."""
    base = {"type": "tool_approval_response", "id": d["id"], "toolCallId": d["toolCallId"]}
    if fields.get("cancelled"):
        return {**base, "cancelled": True}
    value = fields.get("value")
    if value == DENY_WITH:
        return None
    if value == "deny":
        return {**base, "approved": False, **({"message": fields["message"]} if fields.get("message") else {})}
    if value == DENY:
        return {**base, "approved": False}
    for scope, label in _SCOPE_LABELS.items():
        if value == label:
            return {**base, "approved": True, "scope": scope}
    return {**base, "approved": False}
