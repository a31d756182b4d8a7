"""Plan mode: a session mode on top of the approval engine (docs/planning.md#plan-mode).

While it is on, a tool call runs only when it cannot change anything, or writes the one plan file:

* tools of the ``read`` tier (read, grep, find, ls, and extension or host tools that declare ``read``);
* ``write`` and ``edit`` of exactly the plan file (its real path: a symbolic link out of it is refused), which
  the approval gate then lets through unasked (``SessionApproval.exempt``);
* ``todo_write`` (the session's own list) and ``exit_plan_mode``.

Everything else is refused before the approval policy sees it, with a tool result that tells the model it is in
plan mode. ``bash`` is refused too: the approval engine judges whether a command is dangerous, not whether it is
read-only, and a read-only allow-list is easy to get round (``find -delete``, ``sed -i``, a redirection,
``git -c core.pager=...``), so plan mode leaves commands out rather than guess.

Only a person turns plan mode on (``set_enabled``: the RPC command ``set_plan_mode``, ``/plan`` in the terminal
UI, ACP's ``plan`` session mode); the model cannot. The model leaves it by calling ``exit_plan_mode{title,
plan?}``, which asks the person through the session's approver (``SessionApproval.ask_person``: typed
``tool_approval_request``, pi's ``select``, ACP ``session/request_permission``, the web card, the terminal dialog).
A person's yes turns plan mode off and work goes on in place (``plan.continueIn: "same"``, the default) or in a
new session whose first prompt is the plan (``"new"``); anything else (a no with its message, a timeout, no one
to ask) leaves plan mode on and tells the model why.

The approval mode is never changed by plan mode (it only adds refusals), so after plan mode the mode in force is
the one before it. Every change is a ``pisces.plan_mode`` custom entry in the session file (a resumed session, a
fork or a tree move find the state as it was on that branch) and a ``plan_mode_changed{enabled, planFile,
reason}`` event; an approved plan's entry holds the plan, which the HTML export shows.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

from pisces.agent.gate import APPROVAL_RANK, install
from pisces.agent.types import AgentTool, AgentToolResult, GateDecision, ToolError
from pisces.ai.types import TextContent
from pisces.core.approval import types as T
from pisces.core.approval.policy import tier_of
from pisces.core.planning import PLAN_MODE_ENTRY
from pisces.core.planning.session_todos import plan_continue_in
from pisces.core.store import CustomMessage, entry_type

ENTRY_TYPE = PLAN_MODE_ENTRY  # the customType of the session entries that hold the state
MESSAGE_TYPE = "plan_mode"  # the customType of the messages that tell the model the mode changed
TOOL_NAME = "exit_plan_mode"
PLAN_RANK = APPROVAL_RANK - 5  # after the extensions (which may rewrite arguments), before the approval policy
ALWAYS_ALLOWED = frozenset({TOOL_NAME, "todo_write"})
PLAN_FILE_TOOLS = frozenset({"write", "edit"})
MAX_PLAN_CHARS = 256 * 1024  # a plan longer than this is refused (it is shown for approval and saved in the file)


def plan_dir(cwd: str) -> str:
    return os.path.join(os.path.realpath(cwd), ".pisces", "plans")


class PlanMode:
    def __init__(self, session: Any) -> None:
        self.session = session
        self.enabled = False
        self.plan_file: str | None = None
        self._seed: str | None = None  # the first prompt of the new session, once a plan is approved ("new")
        # a front end where only the person starts a run (ACP: every turn is the editor's prompt) fixes "same"
        self.fixed_continue_in: str | None = None

    # -- state --------------------------------------------------------------------------------------
    @property
    def continue_in(self) -> str:
        return self.fixed_continue_in or plan_continue_in(self.session.settings)

    def state(self) -> dict[str, Any]:
        """What ``get_state`` shows as ``planMode``."""
        return {"enabled": self.enabled, "planFile": self.plan_file, "continueIn": self.continue_in}

    async def set_enabled(self, enabled: bool) -> dict[str, Any]:
        """A person's command: persist, announce, and tell the model with its next prompt (a visible message)."""
        if enabled == self.enabled:
            self._tools()  # the tool set may have been changed meanwhile (ACP's modes set it)
            return self.state()
        if enabled:
            self._seed = None
            if self.plan_file is None:
                sid = str(self.session.store.get_session_id() or "session")
                self.plan_file = os.path.join(plan_dir(self.session.cwd), f"{sid[:8]}-plan.md")
        self.enabled = enabled
        self._tools()
        self._record("command")
        await self.session.send_custom_message(self._message(), deliver_as="nextTurn")
        return self.state()

    def _record(self, reason: str, **extra: Any) -> None:
        data = {"enabled": self.enabled, "planFile": self.plan_file, "reason": reason, **extra}
        self.session.store.append_custom_entry(ENTRY_TYPE, data)
        self._announce(reason, extra.get("title"))

    def _announce(self, reason: str, title: Any = None) -> None:
        event: dict[str, Any] = {"type": "plan_mode_changed", "enabled": self.enabled, "planFile": self.plan_file,
                                 "reason": reason}
        if title is not None:
            event["title"] = title
        self.session.emit(event)

    def _message(self) -> CustomMessage:
        if self.enabled:
            text = ("<system-reminder>Plan mode is on: the user wants a plan before any change. Explore with read, "
                    f"grep, find and ls (commands are not run), write the plan to {self.plan_file} with write or "
                    "edit (the only file you may change) or pass it to exit_plan_mode as 'plan', and call "
                    "exit_plan_mode with a short title to ask the user to approve it. The plan must stand on its own: "
                    + ("it is carried out in a new session that sees only the plan." if self.continue_in == "new"
                       else "goals, the files to change, the steps, how to check the result.")
                    + "</system-reminder>")
        else:
            text = "<system-reminder>Plan mode is off: every tool may be used again.</system-reminder>"
        return CustomMessage(customType=MESSAGE_TYPE, content=text, display=True,
                             details={"enabled": self.enabled, "planFile": self.plan_file})

    def _tools(self) -> None:
        """``exit_plan_mode`` is among the active tools exactly while plan mode is on."""
        names = [t.name for t in self.session.agent.tools]
        if self.enabled and TOOL_NAME not in names:
            self.session.set_active_tools([*names, TOOL_NAME])
        elif not self.enabled and TOOL_NAME in names:
            self.session.set_active_tools([n for n in names if n != TOOL_NAME])

    def restore(self, announce: bool = True) -> None:
        """The state last written on the current branch (off when none was)."""
        data: Any = {}
        for entry in reversed(self.session.store.get_branch()):
            if entry_type(entry) == "custom" and getattr(entry, "customType", None) == ENTRY_TYPE:
                data = getattr(entry, "data", None)
                break
        data = data if isinstance(data, dict) else {}
        before = (self.enabled, self.plan_file)
        self.enabled = data.get("enabled") is True
        path = data.get("planFile")
        self.plan_file = path if isinstance(path, str) and path else None
        self._seed = None
        self._tools()
        if announce and (self.enabled != before[0] or (self.enabled and self.plan_file != before[1])):
            self._announce("restore")

    def on_event(self, event: Any) -> None:
        if isinstance(event, dict) and event.get("type") == "session_changed":
            self.restore()

    # -- the gate -----------------------------------------------------------------------------------
    def is_plan_file(self, info: Any) -> bool:
        if not self.enabled or self.plan_file is None or info.tool_name not in PLAN_FILE_TOOLS:
            return False
        path = info.args.get("path") if isinstance(info.args, dict) else None
        if not isinstance(path, str) or not path.strip():
            return False
        full = os.path.join(self.session.cwd, os.path.expanduser(path.strip()))
        return os.path.realpath(full) == self.plan_file

    async def before_tool_call(self, info: Any) -> GateDecision | None:
        if not self.enabled:
            if self._seed is not None and info.tool_name != TOOL_NAME:
                return GateDecision(block=True, reason="The plan was approved and is carried out in a new session: "
                                                       "nothing more runs here. End your turn now.")
            return None
        name = info.tool_name
        if name in ALWAYS_ALLOWED:
            return None
        if name in PLAN_FILE_TOOLS:
            if await asyncio.to_thread(self.is_plan_file, info):
                return None
            return GateDecision(block=True, reason=f"Plan mode is on: {name} may change only the plan file "
                                                   f"{self.plan_file}. Nothing was written.")
        args = info.args if isinstance(info.args, dict) else {}
        if tier_of(name, info.tool, args) == "read":
            return None
        return GateDecision(block=True, reason=(
            f"Plan mode is on: {name} is not allowed (only read, grep, find, ls, and write or edit of the plan file "
            f"{self.plan_file}; commands are not run). Finish the plan, then call exit_plan_mode with a title to "
            "ask the user to approve it."))

    # -- leaving ------------------------------------------------------------------------------------
    async def request_exit(self, tool_call_id: str, title: str, plan: str | None, signal: Any) -> str:
        """``exit_plan_mode``: ask the person to approve the plan. Returns the tool result's text when approved;
        raises ToolError (plan mode stays on) otherwise."""
        if not self.enabled or self.plan_file is None:
            raise ToolError("exit_plan_mode: plan mode is not on (only the user turns it on); nothing to approve.")
        title = " ".join(title.split())[:200]
        if not title:
            raise ToolError("exit_plan_mode needs a non-empty 'title'.")
        if plan is not None:
            if len(plan) > MAX_PLAN_CHARS:
                raise ToolError(f"exit_plan_mode: the plan is longer than {MAX_PLAN_CHARS} characters; shorten it.")
            await asyncio.to_thread(_write, self.plan_file, plan)
        text = await asyncio.to_thread(_read, self.plan_file)
        if not text.strip():
            raise ToolError(f"exit_plan_mode: the plan file {self.plan_file} is empty or missing: write the plan "
                            "there first (or pass it as 'plan').")
        approval = self.session.approval
        if approval is None:
            raise ToolError("exit_plan_mode: this session has no approval gate to ask the user with.")
        request = T.ApprovalRequest(
            tool_call_id, TOOL_NAME, "exec",
            identity={"kind": "plan", "title": title, "path": self.plan_file, "content": text},
            input={"title": title, "planFile": self.plan_file, "plan": text},
            detail=f"the model asks to leave plan mode and carry out this plan ({self._where()})", scopes=("once",))
        answer = await approval.ask_person(request, signal)
        if not (answer.approved and answer.reason == "user"):
            if answer.approved:  # a fallback said yes (ACP's approvalFallback): only a person approves a plan
                answer = T.nobody_to_ask(TOOL_NAME, "a plan is approved by a person only", "this front end")
            raise ToolError(self._refused(answer))
        continue_in = self.continue_in
        self.enabled = False
        if continue_in == "new":
            self._seed = (f"Carry out this plan, which the user approved (it is also in {self.plan_file}).\n\n"
                          f"# {title}\n\n{text}")
        self._tools()
        self._record("approved", title=title, plan=text, continueIn=continue_in)
        if continue_in == "new":
            return (f"The user approved the plan \"{title}\". It is carried out in a new session that starts with "
                    "the plan as its first prompt: do nothing more here, end your turn now.")
        return (f"The user approved the plan \"{title}\". Plan mode is off and every tool may be used: carry out "
                f"the plan now (it is in {self.plan_file}).")

    def _where(self) -> str:
        return "in a new session" if self.continue_in == "new" else "in this session"

    @staticmethod
    def _refused(answer: T.ApprovalAnswer) -> str:
        prefix = f"Tool call denied by user: {TOOL_NAME}"
        if answer.reason == "user":
            note = answer.message[len(prefix):].strip()
            note = note[1:-1] if note.startswith("(") and note.endswith(")") else note
            if note and note[-1] not in ".!?":
                note += "."
            said = f" The user said: {note}" if note else ""
            return (f"The user rejected the plan.{said} You are still in plan mode: revise the plan file, then call "
                    "exit_plan_mode again.")
        return f"The plan was not approved: {answer.message} You are still in plan mode."

    def after_run(self) -> None:
        """After a run settles: with an approved plan to carry out in a new session, start it (its own task,
        since the new session's prompt waits for this run's lock)."""
        seed, self._seed = self._seed, None
        if seed is not None:
            asyncio.get_running_loop().create_task(self._start_new(seed))

    async def _start_new(self, seed: str) -> None:
        session = self.session
        try:
            previous = session.store.get_session_file()
            if await session.new_session(parent_session=previous):
                sys.stderr.write("pisces: an extension cancelled the new session for the approved plan\n")
                return
            await session.prompt(seed, source="plan", expand=False)
        except Exception as exc:  # noqa: BLE001 - a task of its own: report, never raise into the loop
            sys.stderr.write(f"pisces: could not start the approved plan in a new session: {exc}\n")


class ExitPlanModeTool(AgentTool):
    name = TOOL_NAME
    label = "Exit plan mode"
    description = ("Ask the user to approve your plan and leave plan mode. Write the plan to the plan file first "
                   "(or pass it as 'plan', which replaces the file). Give a short title. If the user rejects it you "
                   "stay in plan mode and get their message.")
    parameters: dict[str, Any] = {
        "type": "object",
        "properties": {
            "title": {"type": "string", "description": "A short title for the plan"},
            "plan": {"type": "string", "description": "The plan in markdown (optional: default the plan file)"},
        },
        "required": ["title"],
    }
    approval_tier = "read"  # its own approval is the question it asks; the policy has nothing to add

    def __init__(self, session: Any) -> None:
        self._session = session

    async def execute(self, tool_call_id: str, params: dict[str, Any], signal: Any, on_update: Any) -> AgentToolResult:
        plan_mode = getattr(self._session, "plan_mode", None)
        if plan_mode is None:
            raise ToolError("exit_plan_mode: plan mode is not on (only the user turns it on); nothing to approve.")
        title = params.get("title")
        plan = params.get("plan")
        if not isinstance(title, str):
            raise ToolError("exit_plan_mode needs 'title', a string.")
        if plan is not None and not isinstance(plan, str):
            raise ToolError("exit_plan_mode: 'plan' must be a string.")
        text = await plan_mode.request_exit(tool_call_id, title, plan, signal)
        return AgentToolResult(content=[TextContent(text=text)],
                               details={"approved": True, "planFile": plan_mode.plan_file,
                                        "continueIn": plan_mode.continue_in})


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read(MAX_PLAN_CHARS + 1)[:MAX_PLAN_CHARS]
    except OSError:
        return ""


def _write(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if os.path.islink(path):
        raise ToolError(f"exit_plan_mode: {path} is a symbolic link; pisces does not write through it.")
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def attach(session: Any, announce: bool = False) -> PlanMode:
    """Give ``session`` plan mode (``session.plan_mode``), restored from its branch (``announce``: with a
    ``plan_mode_changed`` when that finds it on); idempotent."""
    existing = getattr(session, "plan_mode", None)
    if existing is not None:
        return existing
    plan_mode = PlanMode(session)
    session.all_tools.setdefault(TOOL_NAME, ExitPlanModeTool(session))
    install(session.agent).add(PLAN_RANK, before=plan_mode.before_tool_call)
    if session.approval is not None:
        session.approval.exempt = plan_mode.is_plan_file
    session.plan_mode = plan_mode
    plan_mode.restore(announce=announce)
    return plan_mode
