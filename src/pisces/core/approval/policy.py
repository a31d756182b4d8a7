"""The approval policy: tiers, modes and rules decide allow, deny or ask for one tool call. No I/O.

Tiers: ``read`` (read, grep, find, ls), ``write`` (write, edit), ``exec`` (bash, task, and every other tool
unless it declares its tier: an extension tool with ``tier`` in its definition, a host tool with ``tier`` in
``set_host_tools``; a missing or unknown tier is ``exec``).

Modes say which tiers pass without asking: ``yolo`` all of them, ``write`` read and write, ``always-ask``
only read.

The order, for one call:
1. a ``deny`` rule that matches denies (nothing overrides it);
2. a known-dangerous command (``shell.danger``) asks, whatever the mode and the allow rules;
3. a ``prompt`` rule asks, an ``allow`` rule allows (rules are ordered, the first that matches decides);
4. otherwise the mode decides by the tool's tier.

Rules come from the settings key ``tools.approvalRules`` of the global file and of the project file. In a
trusted project the project's rules come first, then the global ones. In a project that is not trusted its
rules can only make things stricter: its ``allow`` rules are ignored, and its ``deny``/``prompt`` rules are
matched on their own, the stricter of the two verdicts winning (so a repository can never allow-list its
own commands, nor turn a global ``deny`` into a question).
"""

from __future__ import annotations

import sys
from typing import Any, Callable

from pisces.core.approval import effects, redact, shell
from pisces.core.approval import rules as R
from pisces.core.approval.types import MODE_PASSES, MODES, TIERS, ApprovalRequest, Decision

BUILTIN_TIERS = {"read": "read", "grep": "read", "find": "read", "ls": "read", "write": "write", "edit": "write",
                 "bash": "exec", "task": "exec", "submit_result": "read"}


def tier_of(tool_name: str, tool: Any, args: dict[str, Any]) -> str:
    """The tool's declared tier (a string, or a function of the arguments), else the built-in table, else exec."""
    declared = getattr(tool, "approval_tier", None)
    if callable(declared):
        try:
            declared = declared(args)
        except Exception:  # noqa: BLE001 - a broken declaration is the strictest tier
            declared = "exec"
    if declared is None:
        declared = BUILTIN_TIERS.get(tool_name, "exec")
    return declared if declared in TIERS else "exec"


def read_rules(values: Any, origin: str, warn: Callable[[str], None] | None = None) -> list[dict[str, Any]]:
    """The valid rules of one settings file's ``tools.approvalRules``; a bad one is reported and skipped."""
    say = warn or (lambda text: sys.stderr.write(f"pisces: {text}\n"))
    if values is None:
        return []
    if not isinstance(values, list):
        say(f"ignoring tools.approvalRules in {origin}: it must be an array of rules")
        return []
    out = []
    for i, raw in enumerate(values):
        try:
            out.append(R.check_rule(raw))
        except R.RuleError as exc:
            say(f"ignoring tools.approvalRules[{i}] in {origin}: {exc}")
    return out


class ApprovalPolicy:
    """The rules in force for one session, and ``decide``."""

    def __init__(self, global_rules: list[dict[str, Any]] | None = None,
                 project_rules: list[dict[str, Any]] | None = None, *, project_trusted: bool = False,
                 cwd: str = "/") -> None:
        self.cwd = cwd
        self.global_rules = [dict(r, source="global", index=i) for i, r in enumerate(global_rules or [])]
        self.project_rules = [dict(r, source="project", index=i) for i, r in enumerate(project_rules or [])]
        self.project_trusted = project_trusted
        if project_trusted:
            self._lists = [self.project_rules + self.global_rules]
        else:
            self._lists = [self.global_rules, [r for r in self.project_rules if r["approval"] != "allow"]]

    @property
    def has_rules(self) -> bool:
        return bool(self.global_rules or self.project_rules)

    def matching_rule(self, view: R.CallView) -> dict[str, Any] | None:
        verdict = None
        for rules in self._lists:
            verdict = R.stricter(verdict, R.first_match(rules, view))
        return verdict

    def decide(self, tool_name: str, tier: str, args: dict[str, Any], mode: str,
               crossed: str | None = None) -> tuple[Decision, R.CallView]:
        """The decision for one call (and the view of the call it was made from). ``crossed``: why a write
        left the workspace boundary (``boundary.judge``; the tier is then ``exec``)."""

        view = R.CallView(tool_name, args, self.cwd)
        rule = self.matching_rule(view) if self.has_rules else None
        if rule is not None and rule["approval"] == "deny":
            return Decision("deny", message=_denied_by(rule), rule=rule), view
        danger = (shell.danger(view.raw or "") or effects.effect(view.raw or "")) if view.kind == "command" else None
        if danger is not None:
            return Decision("ask", why=f"known-dangerous command: {danger}; it always needs approval",
                            dangerous=danger, rule=rule, scopes=("once",)), view
        if rule is not None and rule["approval"] == "prompt":
            why = f"approval rule {_rule_name(rule)} asks" + _reason(rule)
            return Decision("ask", why=why, rule=rule, scopes=self._scopes(view, rule)), view
        if rule is not None:
            return Decision("allow", rule=rule), view
        if tier in MODE_PASSES.get(mode, MODE_PASSES["always-ask"]):
            return Decision("allow"), view
        why = f"the approval mode is {mode}, and {tool_name} is {'an' if tier == 'exec' else 'a'} {tier} tool"
        if crossed is not None and view.kind == "command":
            why = f"{crossed}: not the delegated work, so it asks"
        elif crossed is not None:
            why = f"{crossed}: a write there is judged as a command, and the approval mode is {mode}"
        return Decision("ask", why=why, scopes=self._scopes(view, None)), view

    def _scopes(self, view: R.CallView, rule: dict[str, Any] | None) -> tuple[str, ...]:
        """``always`` only when an allow rule for this exact call would take effect."""
        blocked_by_project = rule is not None and rule.get("source") == "project" and not self.project_trusted
        if view.allowable and not blocked_by_project:
            return ("once", "session", "always")
        return ("once", "session")


def always_rule(view: R.CallView) -> dict[str, Any]:
    """The allow rule an "always" answer adds: exactly this command, this path, or the tool."""
    rule: dict[str, Any] = {"tool": R.escape(view.tool_name)}
    if view.kind == "command":
        rule["match"] = R.escape(view.text or "")
    elif view.kind == "path":
        rule["match"] = R.escape(view.paths[0])
    rule["approval"] = "allow"
    rule["reason"] = "approved with \"always\""
    return rule


def build_request(tool_call_id: str, tool_name: str, tier: str, args: dict[str, Any], decision: Decision,
                  view: R.CallView) -> ApprovalRequest:
    """The request an approver shows. Raises ``redact.IdentityTooLarge``."""

    ident, ident_redacted = redact.identity(tool_name, tier, args, view.kind)
    shown, input_redacted, truncated = redact.redact_input(args)
    return ApprovalRequest(tool_call_id=tool_call_id, tool_name=tool_name, tier=tier, identity=ident, input=shown,
                           detail=decision.why, scopes=decision.scopes,
                           redacted_fields=[*ident_redacted, *input_redacted], truncated_fields=truncated,
                           dangerous=decision.dangerous)


def _rule_name(rule: dict[str, Any]) -> str:
    return f"{R.describe(rule)} ({rule.get('source', 'global')} settings, #{rule.get('index', 0)})"


def _reason(rule: dict[str, Any]) -> str:
    reason = rule.get("reason")
    return f": {reason}" if reason else ""


def _denied_by(rule: dict[str, Any]) -> str:
    return f"Tool call denied by approval rule {_rule_name(rule)}{_reason(rule)}."


def check_mode(mode: Any) -> str:
    if mode not in MODES:
        shown = repr(mode) if isinstance(mode, str) else R._kind(mode)
        raise ValueError(f"Invalid approval mode {shown}: use 'yolo', 'write' or 'always-ask'")
    return mode
