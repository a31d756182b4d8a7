"""The subagent lifecycle events of seed 000, as the plain dicts ``AgentSession.emit`` sends to every client.
Optional fields are left out when they have no value (as JavaScript's ``undefined`` is), never sent as null."""

from __future__ import annotations

from typing import Any


def subagent_start(task_id: str, agent: str, isolated: bool) -> dict[str, Any]:
    return {"type": "subagent_start", "id": task_id, "agent": agent, "isolated": isolated}


def subagent_end(task_id: str, agent: str, exit_code: int, verification: dict[str, Any] | None = None
                 ) -> dict[str, Any]:
    event: dict[str, Any] = {"type": "subagent_end", "id": task_id, "agent": agent, "exitCode": exit_code}
    if verification is not None:
        event["verification"] = verification
    return event


def verification_start(task_id: str, attempt: int, profile: str | None) -> dict[str, Any]:
    event: dict[str, Any] = {"type": "subagent_verification_start", "id": task_id, "attempt": attempt}
    if profile is not None:
        event["profile"] = profile
    return event


def verification_command_start(task_id: str, attempt: int, name: str) -> dict[str, Any]:
    return {"type": "subagent_verification_command_start", "id": task_id, "attempt": attempt, "commandName": name}


def verification_command_end(task_id: str, attempt: int, name: str, exit_code: int, duration_ms: int,
                             artifact: str | None) -> dict[str, Any]:
    event: dict[str, Any] = {"type": "subagent_verification_command_end", "id": task_id, "attempt": attempt,
                             "commandName": name, "exitCode": exit_code, "durationMs": duration_ms}
    if artifact is not None:
        event["artifactId"] = artifact
    return event


def verification_end(task_id: str, attempt: int, status: str) -> dict[str, Any]:
    return {"type": "subagent_verification_end", "id": task_id, "attempt": attempt, "status": status}


SUBAGENT_EVENT_TYPES = ("subagent_start", "subagent_end", "subagent_verification_start",
                        "subagent_verification_command_start", "subagent_verification_command_end",
                        "subagent_verification_end")
