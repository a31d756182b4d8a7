"""Session modes and config options: what an editor shows as the mode, model and thinking pickers.

Modes choose the tools the model may use: ``default`` keeps the tools the session started with,
``read-only`` leaves only the tools that cannot change anything (read, grep, find, ls), and ``plan`` is pisces'
plan mode (docs/planning.md#plan-mode: the session's tools, but only reads and the plan file run, until the
person approves the plan the model submits with ``exit_plan_mode``; then the mode is ``default`` again). The same
choice is
also the ``mode`` config option, next to ``model`` (every model that has a key, as ``provider/id``) and
``thought_level`` (the thinking levels the current model supports). Every setter answers with the complete
list of options, as ACP asks.
"""

from __future__ import annotations

from typing import Any, Literal

from acp import RequestError
from acp.schema import (
    SessionConfigOptionBoolean,
    SessionConfigOptionSelect,
    SessionConfigSelectOption,
    SessionMode,
    SessionModeState,
)

from pisces.ai.models import supported_thinking_levels
from pisces.core.errors import SessionError

READ_ONLY_TOOLS = ("read", "grep", "find", "ls")
MODES = {
    "default": ("Default", "The session's tools: the model may read, run commands and edit files."),
    "read-only": ("Read-only", "Only read, grep, find and ls: the model can look but not change anything."),
    "plan": ("Plan", "Plan mode: the model explores and writes a plan file only, then asks you to approve the plan."),
}
LEVEL_NAMES = {"off": "Off", "minimal": "Minimal", "low": "Low", "medium": "Medium", "high": "High",
               "xhigh": "Extra high"}


class SessionSettings:
    """The mode of one session, and the options built from its AgentSession's state."""

    def __init__(self, session: Any) -> None:
        self.session = session
        self._mode = "default"
        self._default_tools = [t.name for t in session.agent.tools if t.name != "exit_plan_mode"]
        if session.plan_mode is not None:  # a session resumed in plan mode
            session.plan_mode.fixed_continue_in = "same"  # only the editor starts a turn: no new session

    @property
    def mode(self) -> str:
        plan_mode = getattr(self.session, "plan_mode", None)
        return "plan" if plan_mode is not None and plan_mode.enabled else self._mode

    def modes(self) -> SessionModeState:
        return SessionModeState(current_mode_id=self.mode, available_modes=[
            SessionMode(id=mode_id, name=name, description=text) for mode_id, (name, text) in MODES.items()])

    async def set_mode(self, mode_id: str) -> None:
        if mode_id not in MODES:
            raise RequestError.invalid_params({"modeId": mode_id, "reason": f"unknown mode: use {', '.join(MODES)}"})
        plan_mode = getattr(self.session, "plan_mode", None)
        if mode_id != "plan" and plan_mode is not None and plan_mode.enabled:
            await plan_mode.set_enabled(False)
        tools = [name for name in READ_ONLY_TOOLS if name in self.session.all_tools] if mode_id == "read-only" \
            else self._default_tools
        self.session.set_active_tools(tools)
        self._mode = "default" if mode_id == "plan" else mode_id
        if mode_id == "plan":
            plan_mode = self.session.load_plan_mode()
            plan_mode.fixed_continue_in = "same"  # only the editor starts a turn: no new session behind its back
            await plan_mode.set_enabled(True)

    def options(self) -> list[SessionConfigOptionSelect | SessionConfigOptionBoolean]:
        session = self.session
        current = session.model
        models = list(session.available_models())
        if not any(m.provider == current.provider and m.id == current.id for m in models):
            models.insert(0, current)
        levels = supported_thinking_levels(current)
        level = session.agent.thinking_level if session.agent.thinking_level in levels else levels[0]
        return [
            _select("mode", "Mode", "mode", self.mode, [(k, v[0], v[1]) for k, v in MODES.items()]),
            _select("model", "Model", "model", f"{current.provider}/{current.id}",
                    [(f"{m.provider}/{m.id}", m.name, m.provider) for m in models]),
            _select("thought_level", "Thinking", "thought_level", level,
                    [(name, LEVEL_NAMES.get(name, name), None) for name in levels]),
        ]

    async def set_option(self, config_id: str, value: Any) -> None:
        """Apply one option; a SessionError (unknown model) or a bad value becomes invalid params."""

        if not isinstance(value, str):
            raise RequestError.invalid_params({"configId": config_id, "reason": "pisces options take a string value"})
        if config_id == "mode":
            await self.set_mode(value)
        elif config_id == "model":
            provider, _, model_id = value.partition("/")
            try:
                self.session.set_model_by_id(provider, model_id)
            except SessionError as exc:
                raise RequestError.invalid_params({"configId": config_id, "reason": str(exc)}) from None
        elif config_id == "thought_level":
            try:
                self.session.set_thinking_level(value)
            except SessionError as exc:
                raise RequestError.invalid_params({"configId": config_id, "reason": str(exc)}) from None
        else:
            raise RequestError.invalid_params({"configId": config_id,
                                               "reason": "unknown option: use mode, model or thought_level"})


def _select(option_id: str, name: str, category: Literal["mode", "model", "thought_level"], current: str,
            choices: list[tuple[str, str, str | None]]) -> SessionConfigOptionSelect:
    return SessionConfigOptionSelect(
        type="select", id=option_id, name=name, category=category, current_value=current,
        options=[SessionConfigSelectOption(value=v, name=n, description=d) for v, n, d in choices])
