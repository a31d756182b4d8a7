"""The RPC client's typed commands: one method per command of pi's RPC protocol, each returning the
response ``data`` (``None`` when the response has none) and raising RpcCommandError on ``success:false``.

:class:`RpcCommands` is a mixin: :class:`pisces.client.client.RpcClient` inherits it and supplies ``_call``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pisces.client.types import BashResult, CancelledResult, ImageContent, SessionState

__all__ = ["RpcCommands"]


class RpcCommands:
    if TYPE_CHECKING:
        async def _call(self, type: str, **fields: Any) -> Any: ...

    # -- typed commands ------------------------------------------------------------------------------
    async def prompt(self, message: str, images: list[ImageContent] | None = None,
                     streaming_behavior: str | None = None) -> None:
        """Start a run (answered once accepted; the run's events follow). While streaming, pass
        ``streaming_behavior`` "steer" or "followUp" to queue the message."""
        return await self._call("prompt", message=message, images=images, streamingBehavior=streaming_behavior)

    async def steer(self, message: str, images: list[ImageContent] | None = None) -> None:
        return await self._call("steer", message=message, images=images)

    async def follow_up(self, message: str, images: list[ImageContent] | None = None) -> None:
        return await self._call("follow_up", message=message, images=images)

    async def abort(self) -> None:
        """Abort the run; answered once the agent is idle (after ``agent_end``)."""
        return await self._call("abort")

    async def abort_and_prompt(self, message: str, images: list[ImageContent] | None = None) -> None:
        return await self._call("abort_and_prompt", message=message, images=images)

    async def new_session(self, parent_session: str | None = None) -> CancelledResult:
        return await self._call("new_session", parentSession=parent_session)

    async def get_state(self) -> SessionState:
        return await self._call("get_state")

    async def get_messages(self) -> dict:
        """``{"messages": [AgentMessage, ...]}``"""
        return await self._call("get_messages")

    async def set_model(self, provider: str, model_id: str) -> dict:
        """Returns the Model; RpcCommandError "Model not found: provider/id"."""
        return await self._call("set_model", provider=provider, modelId=model_id)

    async def cycle_model(self) -> dict | None:
        """``{"model", "thinkingLevel", "isScoped"}``, or None with at most one model."""
        return await self._call("cycle_model")

    async def get_available_models(self) -> dict:
        """``{"models": [Model, ...]}``"""
        return await self._call("get_available_models")

    async def set_thinking_level(self, level: str) -> None:
        return await self._call("set_thinking_level", level=level)

    async def cycle_thinking_level(self) -> dict | None:
        """``{"level": ...}``, or None for a model without reasoning."""
        return await self._call("cycle_thinking_level")

    async def set_steering_mode(self, mode: str) -> None:
        """``"all"`` or ``"one-at-a-time"``."""
        return await self._call("set_steering_mode", mode=mode)

    async def set_follow_up_mode(self, mode: str) -> None:
        """``"all"`` or ``"one-at-a-time"``."""
        return await self._call("set_follow_up_mode", mode=mode)

    async def set_interrupt_mode(self, mode: str) -> None:
        """``"immediate"`` or ``"wait"``."""
        return await self._call("set_interrupt_mode", mode=mode)

    async def compact(self, custom_instructions: str | None = None) -> dict:
        """``{"summary", "firstKeptEntryId", "tokensBefore", "details"}``"""
        return await self._call("compact", customInstructions=custom_instructions)

    async def set_auto_compaction(self, enabled: bool) -> None:
        return await self._call("set_auto_compaction", enabled=enabled)

    async def set_auto_retry(self, enabled: bool) -> None:
        return await self._call("set_auto_retry", enabled=enabled)

    async def abort_retry(self) -> None:
        return await self._call("abort_retry")

    async def bash(self, command: str) -> BashResult:
        return await self._call("bash", command=command)

    async def abort_bash(self) -> None:
        return await self._call("abort_bash")

    async def get_session_stats(self) -> dict:
        return await self._call("get_session_stats")

    async def export_html(self, output_path: str | None = None) -> dict:
        """``{"path": ...}``"""
        return await self._call("export_html", outputPath=output_path)

    async def switch_session(self, path: str) -> CancelledResult:
        return await self._call("switch_session", sessionPath=path)

    async def fork(self, entry_id: str) -> dict:
        """``{"text", "cancelled"}``; ``entry_id`` must be a user message entry."""
        return await self._call("fork", entryId=entry_id)

    async def get_fork_messages(self) -> dict:
        """``{"messages": [{"entryId", "text"}, ...]}``"""
        return await self._call("get_fork_messages")

    async def clone(self) -> CancelledResult:
        return await self._call("clone")

    async def get_last_assistant_text(self) -> dict:
        """``{"text": ...}``, or ``{}`` when there is no assistant message."""
        return await self._call("get_last_assistant_text")

    async def set_session_name(self, name: str) -> None:
        return await self._call("set_session_name", name=name)

    async def get_commands(self) -> dict:
        """``{"commands": [{"name", "description"?, "source", "sourceInfo"}, ...]}``"""
        return await self._call("get_commands")

    async def list_sessions(self, scope: str = "cwd", session_dir: str | None = None) -> dict:
        """``{"sessions": [...]}``; ``scope`` is "cwd" or "all"."""
        return await self._call("list_sessions", scope=scope, sessionDir=session_dir)

    async def get_session_tree(self) -> dict:
        """``{"leafId", "nodes": [{"entry", "children"}, ...]}``"""
        return await self._call("get_session_tree")

    async def navigate_tree(self, target_id: str, summarize: bool = False, custom_instructions: str | None = None,
                            replace_instructions: bool = False, label: str | None = None) -> dict:
        """``{"cancelled", "editorText"?}``"""
        return await self._call("navigate_tree", targetId=target_id, summarize=summarize or None,
                                customInstructions=custom_instructions,
                                replaceInstructions=replace_instructions or None, label=label)

    async def set_entry_label(self, target_id: str, label: str | None = None) -> None:
        return await self._call("set_entry_label", targetId=target_id, label=label)

    async def get_context_usage(self) -> dict:
        """``{"usage": {"tokens", "contextWindow", "percent", ...}}`` or ``{}``."""
        return await self._call("get_context_usage")

    async def get_tools(self) -> dict:
        """``{"activeToolNames": [...], "allTools": [{"name", "description", "parameters"}, ...]}``"""
        return await self._call("get_tools")

    async def set_active_tools(self, names: list[str]) -> dict:
        """``{"activeToolNames": [...]}``"""
        return await self._call("set_active_tools", toolNames=list(names))

    async def clear_queue(self) -> dict:
        """``{"steering": [...], "followUp": [...]}``: the messages taken off the queues."""
        return await self._call("clear_queue")

    async def set_budget(self, budget: dict | None) -> dict:
        """Replace the session's budget limits (``{"maxCostUsd": 2, ...}``; None clears them). Returns the budget
        as ``get_state`` shows it (pisces; see docs/budgets.md)."""
        return await self._call("set_budget", budget=budget)
