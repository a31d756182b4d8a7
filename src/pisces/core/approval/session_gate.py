"""``SessionApproval``: the approval policy joined to one session's tool-call gate (rank 20, after the
extensions, before budget counting), with the session's mode, grants, pending requests and rule commands.

What it is given (and nothing more of the session): its ``Settings``, its working directory, a way to get
the session UI (for the default approver), and its events (a ``session_changed`` for a new, switched or
forked session releases the session grants).

The approver is the mode's (``set_approver``): RPC asks its client with typed frames or pi's ``select``,
ACP asks the editor with ``session/request_permission``. Without one, ``UIApprover`` asks through the
session UI, which in print and json modes is nobody: the call is denied with a sentence that says so.

The mode, by precedence: ``set_mode`` (the RPC command ``set_approval_mode``), the CLI (``--approval-mode``,
``--yolo``), the settings (``tools.approvalMode``: the global file; a trusted project's file wins over it, an
untrusted project's may only make it stricter), and last the approver's default: ``write`` where a person can
be asked properly (an RPC client that announced typed approvals, an ACP editor), ``yolo`` elsewhere (pi's
clients, print mode), so that pisces stays a drop-in for pi. Known-dangerous commands ask in every mode.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any, Callable

from pisces.agent.gate import APPROVAL_RANK, install
from pisces.agent.types import GateDecision
from pisces.core.approval import types as T
from pisces.core.approval.frames import request_title

DEFAULT_TIMEOUT_MS = 300_000  # five minutes; then the call is denied
MAX_TIMEOUT_MS = 86_400_000  # 24 h
_KEY = "tools"
_END_GRANTS = ("new", "switch", "fork")


class UIApprover:
    """The default approver: pi's ``select`` with ``Approve``/``Deny`` through the session UI; with no UI
    (print and json modes, the SDK without one) nobody can be asked and the call is denied."""

    default_mode = "yolo"

    @property
    def asks(self) -> str:
        return "select" if getattr(self._ui(), "has_ui", False) else "nobody"

    def __init__(self, ui: Callable[[], Any], where: str = "this mode",
                 notice: Callable[[str], None] | None = None) -> None:
        self._ui = ui
        self.where = where
        self.notice = notice

    async def approve(self, request: Any, *, timeout_ms: int | None = None, signal: Any = None) -> T.ApprovalAnswer:
        req = T.as_request(request)
        ui = self._ui()
        if not getattr(ui, "has_ui", False):
            answer = T.nobody_to_ask(req.tool_name, req.detail, self.where)
            if self.notice is not None:
                self.notice(answer.message)
            return answer
        limit = timeout_ms or DEFAULT_TIMEOUT_MS

        value = await ui.select(request_title(req), ["Approve", "Deny"], timeout_ms=limit, signal=signal)
        if value == "Approve":
            return T.approved(req.tool_name, "once")
        if value == "Deny":
            return T.rejected(req.tool_name)
        if signal is not None and signal.aborted:
            return T.cancelled(req.tool_name)
        return T.timed_out(req.tool_name, limit)  # no answer: the dialog's time ran out or it was dismissed


class SessionApproval:
    def __init__(self, settings: Any, cwd: str, *, ui: Callable[[], Any] | None = None,
                 cli_mode: str | None = None) -> None:
        self.settings = settings
        self.cwd = cwd
        self.cli_mode = cli_mode
        self.command_mode: str | None = None
        self.approver: Any = None
        self._ui = ui or (lambda: None)
        self._default_approver: Any = None
        self.grants: set[tuple[str, ...]] = set()
        self.pending: dict[str, dict[str, Any]] = {}  # the open requests, for get_state
        self._asked = 0
        self._policy: Any = None
        self._policy_key: Any = None
        # The settings' modes when the session started: a reload may make the mode stricter, never looser
        # (loosening takes a person's action: set_approval_mode, a flag, save_mode).
        start = self._sections()
        self._start_modes = self._setting_modes(start)
        # the allow rules in force at the start, and those a person added since (add_approval_rule, "always"):
        # an allow rule that appears in a settings file later does not take effect before the next start
        self._start_rules = json.dumps([start[0].get("approvalRules"), start[1].get("approvalRules")])
        self._added_allows: set[str] = set()
        self._warned_allows: set[str] = set()
        # plan mode's one plan file (core/planning/plan_mode.py): a call it names passes this gate unasked
        self.exempt: Callable[[Any], bool] | None = None

    @staticmethod
    def _setting_modes(sections: tuple[dict[str, Any], dict[str, Any]]) -> tuple[Any, Any]:
        return sections[0].get("approvalMode"), sections[1].get("approvalMode")

    # -- wiring ----------------------------------------------------------------------------------
    def set_approver(self, approver: Any) -> None:
        self.approver = approver

    def current_approver(self) -> Any:
        if self.approver is not None:
            return self.approver
        if self._default_approver is None:
            self._default_approver = UIApprover(self._ui)
        return self._default_approver

    def on_event(self, event: Any) -> None:
        if isinstance(event, dict) and event.get("type") == "session_changed" and event.get("reason") in _END_GRANTS:
            self.grants.clear()

    # -- settings ----------------------------------------------------------------------------------
    def _section(self, data: dict[str, Any]) -> dict[str, Any]:
        section = data.get(_KEY)
        return section if isinstance(section, dict) else {}

    def _sections(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """The ``tools`` sections of the global and the project settings now (each file copied once)."""
        return self._section(self.settings.global_settings()), self._section(self.settings.project_settings())

    def policy(self, sections: tuple[dict[str, Any], dict[str, Any]] | None = None) -> Any:
        """The policy for the rules in the settings now (rebuilt when they change); ``sections``: ``_sections()``
        when the caller has them already."""
        g_section, p_section = sections or self._sections()
        g, p = g_section.get("approvalRules"), p_section.get("approvalRules")
        trusted = bool(self.settings.project_trusted) if p is not None else False
        key = (g, p, trusted)
        if self._policy is None or key != self._policy_key:
            from pisces.core.approval.policy import ApprovalPolicy, read_rules  # noqa: PLC0415 - not needed at start-up

            self._policy = ApprovalPolicy(self._known(read_rules(g, self.settings.global_path)),
                                          self._known(read_rules(p, self.settings.project_path)),
                                          project_trusted=trusted, cwd=self.cwd)
            self._policy_key = key
        return self._policy

    def _known(self, rules: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """``rules`` without the allow rules that appeared in a file after the session started (a reload never
        loosens what asks); each left out is reported once on stderr."""
        from pisces.core.approval.policy import read_rules  # noqa: PLC0415 - not needed at start-up

        start: set[Any] = set()
        for raw in json.loads(self._start_rules):
            start.update(_canon(r) for r in read_rules(raw, "", warn=lambda _t: None))
        out = []
        for rule in rules:
            key = _canon(rule)
            if rule["approval"] != "allow" or key in start or key in self._added_allows:
                out.append(rule)
            elif key not in self._warned_allows:
                self._warned_allows.add(key)
                sys.stderr.write(f"pisces: ignoring the allow rule {key} until the next start: it appeared in the "
                                 "settings after this session started (add it with add_approval_rule to use it "
                                 "now)\n")
        return out

    def mode(self, sections: tuple[dict[str, Any], dict[str, Any]] | None = None) -> tuple[str, str]:
        """(the mode in force, where it comes from: command, cli, project, settings or default)."""
        if self.command_mode is not None:
            return self.command_mode, "command"
        if self.cli_mode is not None:
            return self.cli_mode, "cli"
        now = self._from_settings(self._setting_modes(sections or self._sections()))
        start = self._from_settings(self._start_modes)
        return start if T.MODE_STRICTNESS[start[0]] > T.MODE_STRICTNESS[now[0]] else now

    def _from_settings(self, modes: tuple[Any, Any]) -> tuple[str, str]:
        g, p = modes
        if g in T.MODES:
            base, source = g, "settings"
        else:
            base, source = getattr(self.current_approver(), "default_mode", "yolo"), "default"
        if p in T.MODES and (self.settings.project_trusted or T.MODE_STRICTNESS[p] > T.MODE_STRICTNESS[base]):
            return p, "project"
        return base, source

    @property
    def timeout_ms(self) -> int:
        value = self.settings.get("tools.approvalTimeoutMs")
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
            return int(min(value, MAX_TIMEOUT_MS))
        return DEFAULT_TIMEOUT_MS

    @property
    def fallback(self) -> str:
        """What a front end that cannot ask does (ACP): ``tools.approvalFallback``, ``deny`` unless ``allow``."""
        return "allow" if self.settings.get("tools.approvalFallback") == "allow" else "deny"

    # -- the gate ------------------------------------------------------------------------------------
    def gate_subagent(self, agent: Any, workspace: str | None = None,
                      outside: list[dict[str, str]] | None = None) -> None:
        """A subagent's tool calls pass this session's gate as ``yolo``: approving the ``task`` call approved
        the work it delegates, but deny and prompt rules and known-dangerous commands still hold, and ask the
        same person. A write that leaves the subagent's ``workspace`` (its worktree, or the parent's working
        directory) or lands on a protected path is not delegated work: it asks (is refused where nobody can be
        asked), whatever the mode. ``outside`` receives ``{tool, path}`` (the resolved path) of each such write
        that was approved and succeeded, for the task's result."""
        from pisces.core.approval.boundary import resolved_path  # noqa: PLC0415 - not needed at start-up

        where = workspace or self.cwd
        crossed: set[str] = set()

        async def before(info: Any) -> GateDecision | None:
            return await self.before_tool_call(info, mode="yolo", workspace=where, confined=True,
                                               on_crossing=lambda: crossed.add(info.tool_call_id))

        async def after(info: Any, result: Any, is_error: bool) -> None:
            if info.tool_call_id in crossed:
                crossed.discard(info.tool_call_id)
                args = info.args if isinstance(info.args, dict) else {}
                path = resolved_path(info.tool_name, args, where)
                if not is_error and outside is not None and path is not None:
                    outside.append({"tool": info.tool_name, "path": path})
                elif not is_error and outside is not None and isinstance(args.get("command"), str):
                    outside.append({"tool": info.tool_name, "command": args["command"]})
            return None

        install(agent).add(APPROVAL_RANK, before=before, after=after)

    async def check_command(self, command: str, *, tool_call_id: str, signal: Any = None,
                            trusted: bool = False) -> str | None:
        """Approve a command pisces runs for a tool other than ``bash`` (a task's verification) exactly as a
        ``bash`` call: deny rules, the known-dangerous check, and, unless ``trusted`` (it came from settings, not
        from the model), the mode, the rules and the session grants of ``bash`` (a grant covers that exact
        command, never another task's). Returns None to run it, else the sentence why not."""
        info = _CommandCall(command, tool_call_id, signal)
        decision = await self.before_tool_call(info, mode="yolo" if trusted else None)
        return decision.reason if decision is not None and decision.block else None

    async def escalate(self, command: str, tool_call_id: str, why: str, signal: Any = None) -> str | None:
        """Ask the person whether to run ``command``, which the OS sandbox blocked, outside it (a ``bash``
        approval request whose reason is ``why``; once only, never covered by a grant, a rule or a fallback:
        only a person's yes runs it unconfined). None: approved; else the sentence why not."""
        from pisces.core.approval.redact import IdentityTooLarge, identity, redact_input  # noqa: PLC0415 - not needed at start-up

        args = {"command": command}
        try:
            ident, ident_redacted = identity("bash", "exec", args, "command")
        except IdentityTooLarge as exc:
            return f"the command is too large to show for approval ({exc})"
        shown, input_redacted, truncated = redact_input(args)
        request = T.ApprovalRequest(tool_call_id, "bash", "exec", ident, shown, detail=why, scopes=("once",),
                                    redacted_fields=[*ident_redacted, *input_redacted], truncated_fields=truncated)
        timeout = self.timeout_ms
        self._asked += 1
        key = f"{self._asked}"
        self.pending[key] = {"toolCallId": tool_call_id, "toolName": "bash", "tier": "exec", "kind": "shell",
                             "summary": _summary(request), "reason": why, "requestedAt": int(time.time() * 1000),
                             "timeoutMs": timeout}
        try:
            answer = await self.current_approver().approve(request, timeout_ms=timeout, signal=signal)
        finally:
            self.pending.pop(key, None)
        if answer.approved and answer.reason == "user":
            return None
        if answer.approved:
            return "only a person can let a command out of the sandbox, and none answered"
        return answer.message

    async def ask_person(self, request: T.ApprovalRequest, signal: Any = None) -> T.ApprovalAnswer:
        """Ask the approver about ``request`` (not a tool call the policy judged: plan mode's exit), listed in
        ``pending`` while open, with the session's timeout. Only the answer is returned; nothing is granted."""
        timeout = self.timeout_ms
        self._asked += 1
        key = f"{self._asked}"
        self.pending[key] = {"toolCallId": request.tool_call_id, "toolName": request.tool_name,
                             "tier": request.tier, "kind": request.tool_kind, "summary": _summary(request),
                             "reason": request.detail or "", "requestedAt": int(time.time() * 1000),
                             "timeoutMs": timeout}
        try:
            return await self.current_approver().approve(request, timeout_ms=timeout, signal=signal)
        finally:
            self.pending.pop(key, None)

    async def before_tool_call(self, info: Any, mode: str | None = None, *, workspace: str | None = None,
                               confined: bool = False, on_crossing: Callable[[], None] | None = None
                               ) -> GateDecision | None:
        from pisces.core.approval.boundary import judge  # noqa: PLC0415 - not needed at start-up
        from pisces.core.approval.policy import tier_of  # noqa: PLC0415 - not needed at start-up
        from pisces.core.approval.rules import primary  # noqa: PLC0415 - not needed at start-up

        if self.exempt is not None and not confined and self.exempt(info):
            return None  # the plan file of plan mode: the one write plan mode exists for (docs/planning.md)
        args = info.args if isinstance(info.args, dict) else {}
        tier = tier_of(info.tool_name, info.tool, args)
        where = workspace or self.cwd
        crossed = None
        if tier == "write":  # only writes have a boundary; resolving the path reads the file system
            tier, crossed = await asyncio.to_thread(judge, info.tool_name, tier, args, where, where,
                                                    getattr(self.settings, "agent_dir", None))
        sections = self._sections()  # one read of the settings for the mode and the rules
        if mode is None:
            mode, _ = self.mode(sections)
        if confined and crossed is None and workspace is not None and workspace != self.cwd and \
                primary(info.tool_name, args)[0] == "command":
            from pisces.core.approval.boundary import command_reaches  # noqa: PLC0415 - not needed at start-up

            reached = await asyncio.to_thread(command_reaches, args.get("command") or "", self.cwd, workspace)
            if reached is not None:
                crossed = f"the command names {reached}, in the user's tree outside this subagent's worktree"
        if crossed is not None and confined and mode == "yolo":
            mode = "write"  # a subagent's write out of its workspace is not delegated work: it asks
        policy = self.policy(sections)
        if not policy.has_rules and primary(info.tool_name, args)[0] != "command" and \
                tier in T.MODE_PASSES[mode]:
            return None  # nothing to look at: no rule, no command, a tier the mode lets through
        decision, view = await asyncio.to_thread(policy.decide, info.tool_name, tier, args, mode, crossed)
        outcome = await self._decided(info, tier, args, decision, view)
        if outcome is None and crossed is not None and on_crossing is not None:
            on_crossing()
        return outcome

    async def _decided(self, info: Any, tier: str, args: dict[str, Any], decision: Any, view: Any
                       ) -> GateDecision | None:
        if decision.action == "allow":
            return None
        if decision.action == "deny":
            return GateDecision(block=True, reason=decision.message)
        if decision.dangerous is None and view.grant_key() in self.grants:
            return None
        return await self._ask(info, tier, args, decision, view)

    async def _ask(self, info: Any, tier: str, args: dict[str, Any], decision: Any, view: Any
                   ) -> GateDecision | None:
        from pisces.core.approval.policy import build_request  # noqa: PLC0415 - not needed at start-up
        from pisces.core.approval.redact import IdentityTooLarge  # noqa: PLC0415 - not needed at start-up

        try:
            request = await asyncio.to_thread(build_request, info.tool_call_id, info.tool_name, tier, args,
                                              decision, view)
        except IdentityTooLarge as exc:
            return GateDecision(block=True, reason=f"Tool call denied: {info.tool_name} needs approval "
                                                   f"({decision.why}), but {exc}; the call was not run.")
        timeout = self.timeout_ms
        self._asked += 1
        key = f"{self._asked}"
        self.pending[key] = {
            "toolCallId": info.tool_call_id, "toolName": info.tool_name, "tier": tier,
            "kind": request.tool_kind, "summary": _summary(request), "reason": decision.why,
            "requestedAt": int(time.time() * 1000), "timeoutMs": timeout}
        try:
            answer = await self.current_approver().approve(request, timeout_ms=timeout, signal=info.signal)
        finally:
            self.pending.pop(key, None)
        if answer.approved and decision.dangerous is not None and answer.reason != "user":
            answer = T.nobody_to_ask(info.tool_name, decision.why, "the fallback for clients that cannot ask")
        if not answer.approved:
            return GateDecision(block=True, reason=answer.message)
        scope = answer.scope if answer.scope in request.scopes else "once"
        if scope in ("session", "always"):
            self.grants.add(view.grant_key())
        if scope == "always":
            from pisces.core.approval.policy import always_rule  # noqa: PLC0415 - not needed at start-up

            try:
                await asyncio.to_thread(self.add_rule, always_rule(view), 0)
            except Exception as exc:  # noqa: BLE001 - approved all the same; the rule just was not saved
                sys.stderr.write(f"pisces: the \"always\" rule for {info.tool_name} was not saved: {exc}\n")
        return None

    # -- state and commands --------------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        """What get_state shows as ``approval``."""
        mode, source = self.mode()
        return {"mode": mode, "modeSource": source, "asks": getattr(self.current_approver(), "asks", "select"),
                "timeoutMs": self.timeout_ms,
                "pending": list(self.pending.values()), "sessionGrants": len(self.grants)}

    def set_mode(self, mode: str | None) -> dict[str, Any]:
        """Set the session's mode (None: back to the CLI's, the settings' or the default)."""
        if mode is not None:
            from pisces.core.approval.policy import check_mode  # noqa: PLC0415 - not needed at start-up

            check_mode(mode)
        self.command_mode = mode
        return self.state()

    def save_mode(self, mode: str | None) -> None:
        """Write ``tools.approvalMode`` to the global settings (None removes it): a person's command, so the
        mode saved is the new starting point a reload is compared with."""
        self.settings.update_global(_KEY, "approvalMode", lambda _old: mode)
        self._start_modes = (mode, self._start_modes[1])

    def list_rules(self) -> dict[str, Any]:
        """The rules as the settings files hold them (``rulesNotInForce``: the allow rules among them that
        appeared after the session started, which take effect at the next start)."""
        from pisces.core.approval.policy import read_rules  # noqa: PLC0415 - not needed at start-up

        policy = self.policy()
        g_section, p_section = self._sections()
        quiet = lambda _t: None  # noqa: E731 - the policy reported them already
        g = read_rules(g_section.get("approvalRules"), self.settings.global_path, warn=quiet)
        p = read_rules(p_section.get("approvalRules"), self.settings.project_path, warn=quiet)
        in_force = {_canon(r) for r in policy.global_rules + policy.project_rules}
        applied = "none" if not p else "all" if policy.project_trusted else "stricter-only"
        return {"rules": g, "projectRules": p, "projectRulesApplied": applied,
                "settingsPath": self.settings.global_path,
                "rulesNotInForce": [r for r in g + p if _canon(r) not in in_force]}

    def add_rule(self, rule: Any, index: Any = None) -> dict[str, Any]:
        """Insert a rule into the global ``tools.approvalRules`` (at ``index``, default last)."""
        from pisces.core.approval.rules import check_rule  # noqa: PLC0415 - not needed at start-up

        checked = check_rule(rule)
        self._added_allows.add(_canon(checked))
        self._policy = None  # rebuilt with the rule known

        def change(current: Any) -> list[Any]:
            rules = list(current) if isinstance(current, list) else []
            at = len(rules) if index is None else _index(index, len(rules) + 1)
            rules.insert(at, checked)
            return rules

        self.settings.update_global(_KEY, "approvalRules", change)
        return self.list_rules()

    def remove_rule(self, index: Any, expected: Any = None) -> dict[str, Any]:
        """Remove the global rule at ``index``; with ``expected``, only if that is the rule there."""
        removed: list[Any] = []

        def change(current: Any) -> list[Any]:
            rules = list(current) if isinstance(current, list) else []
            at = _index(index, len(rules))
            if expected is not None and rules[at] != expected:
                raise ValueError(f"the rule at index {at} is not the one given (the rules changed): list them again")
            removed.append(rules.pop(at))
            return rules

        self.settings.update_global(_KEY, "approvalRules", change)
        return {**self.list_rules(), "removed": removed[0]}


class _CommandCall:
    """What the gate reads of a tool call, for a command run on behalf of another tool."""

    tool_name = "bash"
    tool = None

    def __init__(self, command: str, tool_call_id: str, signal: Any) -> None:
        self.args = {"command": command}
        self.tool_call_id = tool_call_id
        self.signal = signal


def _canon(rule: dict[str, Any]) -> str:
    return json.dumps({k: v for k, v in rule.items() if k not in ("source", "index")}, sort_keys=True)


def _index(value: Any, size: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < max(size, 0):
        if size == 0:
            raise ValueError("there are no approval rules in the global settings")
        raise ValueError(f"'index' must be an integer from 0 to {size - 1}, not {value!r}")
    return value


def _summary(request: Any) -> str:
    ident = request.identity
    text = ident.get("command") or ident.get("path") or request.tool_name
    text = " ".join(str(text).split())
    return text if len(text) <= 200 else text[:199] + "…"


def attach(session: Any, cli_mode: str | None = None) -> SessionApproval:
    """Give ``session`` its approval gate (``session.approval``)."""

    approval = SessionApproval(session.settings, session.cwd, ui=lambda: session.ui, cli_mode=cli_mode)
    install(session.agent).add(APPROVAL_RANK, before=approval.before_tool_call)
    session.subscribe(approval.on_event, updates=False)  # session_changed only
    session.approval = approval
    return approval
