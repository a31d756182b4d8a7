"""The values the approval policy and the approvers pass around (TEAM.md interface 7).

* ``Decision``: what the policy says about one tool call: ``allow``, ``deny`` (``message`` says why) or ``ask``
  (``why`` says why a person must confirm; ``dangerous`` when a known-dangerous command forces the question).
* ``ApprovalRequest``: what an approver shows a person: the tool call's ids, its tier, the *identity* (the
  command, path or content being approved, redacted but never truncated), the redacted and bounded input, and
  the reason. ``scopes`` says which answers the person may give beyond ``once``.
* ``ApprovalAnswer``: how the question ended, exactly once: approved or not, the scope (``once``, ``session``,
  ``always``) when approved, and ``reason``, which tells a person's no from everything else: ``user`` (the
  person chose), ``timeout``, ``cancelled`` (the turn was aborted or the client dismissed the request),
  ``unavailable`` (no one can be asked: print mode, a client that cannot ask, a client that went away) and
  ``invalid`` (a malformed answer, refused: fail closed).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

TIERS = ("read", "write", "exec")
MODES = ("yolo", "write", "always-ask")
APPROVALS = ("allow", "deny", "prompt")
SCOPES = ("once", "session", "always")
REASONS = ("user", "timeout", "cancelled", "unavailable", "invalid")

# Which tiers each mode lets through without asking.
MODE_PASSES = {"yolo": frozenset(TIERS), "write": frozenset({"read", "write"}), "always-ask": frozenset({"read"})}
MODE_STRICTNESS = {"yolo": 0, "write": 1, "always-ask": 2}


@dataclass
class Decision:
    action: str                       # allow / deny / ask
    message: str = ""                 # for deny: the sentence the model reads as the tool result
    why: str = ""                     # for ask: why a person must confirm (shown with the request)
    dangerous: str | None = None      # the known-dangerous pattern that forces the question
    rule: dict[str, Any] | None = None  # the rule that decided, with its "source" and "index"
    scopes: tuple[str, ...] = ("once",)  # what an approval may cover beyond this call


@dataclass
class ApprovalRequest:
    tool_call_id: str
    tool_name: str
    tier: str = "exec"
    identity: dict[str, Any] = field(default_factory=dict)  # {"kind": "shell", "command": ...}, {"kind": "write", "path", "content"}, ...
    input: dict[str, Any] = field(default_factory=dict)     # the call's arguments: secrets redacted, bounded
    detail: str | None = None                               # why the policy asks (a sentence)
    scopes: tuple[str, ...] = ("once", "session")           # answers the person may give beyond once
    redacted_fields: list[str] = field(default_factory=list)   # dotted paths: "input.api_key", "identity.command"
    truncated_fields: list[str] = field(default_factory=list)  # input fields shortened or dropped to fit
    dangerous: str | None = None

    @property
    def tool_kind(self) -> str:
        return str(self.identity.get("kind") or "other")


@dataclass
class ApprovalAnswer:
    approved: bool
    scope: str | None  # once / session / always, when approved
    reason: str        # user / timeout / cancelled / unavailable / invalid
    message: str       # a sentence for the model and the user


def as_request(request: Any) -> ApprovalRequest:
    """An ``ApprovalRequest`` from itself or from a mapping with the interface's camelCase names."""
    if isinstance(request, ApprovalRequest):
        return request
    if isinstance(request, Mapping):
        return ApprovalRequest(
            tool_call_id=str(request.get("toolCallId", "")), tool_name=str(request.get("toolName", "")),
            tier=str(request.get("tier", "exec")), identity=dict(request.get("identity") or {}),
            input=dict(request.get("input") or {}), detail=request.get("detail"),
            scopes=tuple(request.get("scopes") or ("once", "session")))
    raise TypeError(f"not an approval request: {type(request).__name__}")


# ---------------------------------------------------------------------------------------------
# How each ending reads (the tool result the model gets when the call is denied)
# ---------------------------------------------------------------------------------------------
def approved(tool_name: str, scope: str) -> ApprovalAnswer:
    return ApprovalAnswer(True, scope, "user", f"The user approved {tool_name} ({scope}).")


def rejected(tool_name: str, note: str | None = None) -> ApprovalAnswer:
    text = f"Tool call denied by user: {tool_name}"  # oh-my-pi's words for a person's no
    return ApprovalAnswer(False, None, "user", f"{text} ({note})" if note else text)


def timed_out(tool_name: str, timeout_ms: int) -> ApprovalAnswer:
    return ApprovalAnswer(False, None, "timeout",
                          f"Tool call denied: the approval request for {tool_name} timed out after "
                          f"{timeout_ms / 1000:g} s with no answer; the call was not run.")


def cancelled(tool_name: str, *, by_client: bool = False) -> ApprovalAnswer:
    if by_client:
        return ApprovalAnswer(False, None, "cancelled",
                              f"Tool call denied: the client dismissed the approval request for {tool_name}.")
    return ApprovalAnswer(False, None, "cancelled",
                          f"Tool call denied: the run was aborted while {tool_name} waited for approval.")


def disconnected(tool_name: str) -> ApprovalAnswer:
    return ApprovalAnswer(False, None, "unavailable",
                          f"Tool call denied: the client went away before answering the approval request for "
                          f"{tool_name}.")


def malformed(tool_name: str, problem: str) -> ApprovalAnswer:
    return ApprovalAnswer(False, None, "invalid",
                          f"Tool call denied: the approval answer for {tool_name} was malformed ({problem}); "
                          "pisces fails closed.")


def nobody_to_ask(tool_name: str, why: str | None, where: str) -> ApprovalAnswer:
    hint = ("A known-dangerous command cannot be allowed without asking." if why and "dangerous" in why else
            "Allow it with a looser --approval-mode, an allow rule in tools.approvalRules (docs/approval.md), or run "
            "it where someone can approve it (--mode rpc, --mode acp).")
    reason = f" ({why.rstrip('.')})" if why else ""
    return ApprovalAnswer(False, None, "unavailable",
                          f"Tool call denied: {tool_name} needs approval{reason}, and {where} has no one to ask. "
                          f"{hint}")
