"""The values the approval policy and the approvers pass around.

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

from typing import Any, Mapping

TIERS = ("read", "write", "exec")
MODES = ("yolo", "write", "always-ask")
APPROVALS = ("allow", "deny", "prompt")
SCOPES = ("once", "session", "always")
REASONS = ("user", "timeout", "cancelled", "unavailable", "invalid")

# Which tiers each mode lets through without asking.
MODE_PASSES = {"yolo": frozenset(TIERS), "write": frozenset({"read", "write"}), "always-ask": frozenset({"read"})}
MODE_STRICTNESS = {"yolo": 0, "write": 1, "always-ask": 2}


class Decision:
    """``action``: allow / deny / ask. ``message``: for deny, the sentence the model reads as the tool result.
    ``why``: for ask, why a person must confirm. ``dangerous``: the known-dangerous pattern that forces the
    question. ``rule``: the rule that decided (with its ``source`` and ``index``). ``scopes``: what an approval
    may cover beyond this call."""

    __slots__ = ("action", "message", "why", "dangerous", "rule", "scopes")

    def __init__(self, action: str, message: str = "", why: str = "", dangerous: str | None = None,
                 rule: dict[str, Any] | None = None, scopes: tuple[str, ...] = ("once",)) -> None:
        self.action, self.message, self.why, self.dangerous, self.rule, self.scopes = \
            action, message, why, dangerous, rule, scopes

    def __repr__(self) -> str:
        return f"Decision({self.action!r}, why={self.why!r}, message={self.message!r})"


class ApprovalRequest:
    """What an approver shows. ``identity``: ``{"kind": "shell", "command"}``, ``{"kind": "write", "path",
    "content"}``, ``{"kind": "edit", "path", "edits"}``, ``{"kind": "read"|"path", "path"}`` or ``{"kind":
    "other"}``. ``input``: the arguments, secrets redacted, bounded. ``detail``: why the policy asks.
    ``scopes``: the answers the person may give beyond ``once``. ``redacted_fields``/``truncated_fields``:
    dotted paths (``input.api_key``, ``identity.command``)."""

    __slots__ = ("tool_call_id", "tool_name", "tier", "identity", "input", "detail", "scopes", "redacted_fields",
                 "truncated_fields", "dangerous")

    def __init__(self, tool_call_id: str, tool_name: str, tier: str = "exec", identity: dict[str, Any] | None = None,
                 input: dict[str, Any] | None = None, detail: str | None = None,
                 scopes: tuple[str, ...] = ("once", "session"), redacted_fields: list[str] | None = None,
                 truncated_fields: list[str] | None = None, dangerous: str | None = None) -> None:
        self.tool_call_id = tool_call_id
        self.tool_name = tool_name
        self.tier = tier
        self.identity = identity if identity is not None else {}
        self.input = input if input is not None else {}
        self.detail = detail
        self.scopes = tuple(scopes)
        self.redacted_fields = list(redacted_fields or [])
        self.truncated_fields = list(truncated_fields or [])
        self.dangerous = dangerous

    @property
    def tool_kind(self) -> str:
        return str(self.identity.get("kind") or "other")


class ApprovalAnswer:
    """``approved``; ``scope`` (once / session / always) when approved; ``reason`` (user / timeout / cancelled /
    unavailable / invalid); ``message``, a sentence for the model and the user."""

    __slots__ = ("approved", "scope", "reason", "message")

    def __init__(self, approved: bool, scope: str | None, reason: str, message: str) -> None:
        self.approved, self.scope, self.reason, self.message = approved, scope, reason, message

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ApprovalAnswer) and (self.approved, self.scope, self.reason, self.message) == \
            (other.approved, other.scope, other.reason, other.message)

    def __repr__(self) -> str:
        return f"ApprovalAnswer({self.approved!r}, {self.scope!r}, {self.reason!r}, {self.message!r})"


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
            "Only a person can let a command out of the sandbox: add the directory to sandbox.writableRoots, turn "
            "the sandbox off (--sandbox off; docs/security.md), or run it where someone can approve it (--mode rpc, "
            "--mode acp)." if why and why.startswith("the sandbox blocked") else
            "Allow it with a looser --approval-mode, an allow rule in tools.approvalRules (docs/approval.md), or run "
            "it where someone can approve it (--mode rpc, --mode acp).")
    reason = f" ({why})" if why else ""
    return ApprovalAnswer(False, None, "unavailable",
                          f"Tool call denied: {tool_name} needs approval{reason}, and {where} has no one to ask. "
                          f"{hint}")
