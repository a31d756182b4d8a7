"""The task tool's JSON schema: ``isolated`` and ``verify`` exist only when ``task.isolation.mode`` is not
``none`` (as in pisces), so a model is never offered what the settings would refuse."""

from __future__ import annotations

from typing import Any

_TASK_ITEM = {
    "type": "object",
    "required": ["id", "description", "assignment"],
    "properties": {
        "id": {"type": "string", "maxLength": 48, "description": "CamelCase identifier, max 48 chars"},
        "description": {"type": "string",
                        "description": "Short one-liner for UI display only — not seen by the subagent"},
        "assignment": {"type": "string", "description": (
            "Complete per-task instructions the subagent executes. Must follow the Target/Change/Edge Cases/"
            "Acceptance structure. Only include per-task deltas — shared background belongs in `context`.")},
    },
}

_COMMAND = {
    "type": "object",
    "required": ["name", "command"],
    "properties": {
        "name": {"type": "string", "description": "Short label for the verification command"},
        "command": {"type": "string", "description": "Shell command to run inside the isolated workspace"},
        "timeoutMs": {"type": "number", "minimum": 1, "description": "Optional timeout override in milliseconds"},
        "optional": {"type": "boolean", "description": "If true, non-zero exit does not fail verification"},
    },
}

VERIFY_SCHEMA = {"anyOf": [
    {"type": "boolean", "description": "Enable or disable verification for this isolated task batch"},
    {"type": "string", "description": "Named verification profile to run for this isolated task batch"},
    {"type": "object", "description": "Inline verification override merged with default/profile verification settings",
     "properties": {
         "profile": {"type": "string", "description": "Named verification profile to resolve from settings"},
         "mode": {"enum": ["none", "command", "lsp", "profile"]},
         "commands": {"type": "array", "items": _COMMAND,
                      "description": "Commands to run inside the isolated workspace after the subagent finishes"},
         "lspDiagnostics": {"type": "boolean",
                            "description": "Also require LSP diagnostics to be clean (planned; not yet implemented)"},
         "maxRetries": {"type": "number", "minimum": 0, "description": "Maximum bounded repair retries"},
         "onFailure": {"enum": ["return_failure", "retry_once", "discard_patch"]},
     }},
]}


def task_schema(isolation_enabled: bool) -> dict[str, Any]:
    properties: dict[str, Any] = {
        "agent": {"type": "string", "description": "Agent type for all tasks in this batch"},
        "context": {"type": "string", "description": (
            "Shared background prepended to every task's assignment. Put goal, non-goals, constraints, "
            "conventions, reference paths, API contracts, and global acceptance commands here once — instead of "
            "duplicating across assignments.")},
        "schema": {"type": "object", "additionalProperties": {}, "description": (
            "JTD schema defining expected response structure. Use typed properties. Output format belongs here — "
            "never in context or assignment.")},
        "tasks": {"type": "array", "items": _TASK_ITEM, "description": (
            "Tasks to execute in parallel. Each must be small-scoped (3-5 files max) and self-contained given "
            "context + assignment.")},
    }
    if isolation_enabled:
        properties["isolated"] = {"type": "boolean", "description": (
            "Run in isolated environment; returns patches. Use when tasks edit overlapping files.")}
        properties["verify"] = VERIFY_SCHEMA
    return {"type": "object", "required": ["agent", "tasks"], "properties": properties}
