"""New, switch, fork, clone and navigate: the part of AgentSession that moves it to another file or leaf.

Each move asks the extensions first (the cancellable ``session_before_switch``, ``session_before_fork`` or
``session_before_tree``), then stops the work in flight. A move to another file (new, resume, fork) ends the
extension runtime with ``session_shutdown`` before it and starts a fresh one with ``session_start`` after it,
as pi 0.73.1 does.
"""

from __future__ import annotations

import os
from typing import Any

from pisces.ai.models import clamp_thinking_level
from pisces.ai.types import UserMessage
from pisces.core.config.models_registry import UNKNOWN_MODEL
from pisces.core.errors import SessionError
from pisces.core.session import views
from pisces.core.store import entry_type


class SessionSwitching:
    """Mixed into AgentSession (uses its store, agent, hooks and context loading)."""

    def _load_context(self: Any, initial: bool = False) -> None:
        """Rebuild the agent's messages, model and thinking level from the store's current leaf."""
        ctx = self.store.build_session_context()
        self.agent.replace_messages(ctx.messages)
        branch = self.store.get_branch()  # once: a walk over the whole path (20k entries: ~5 ms)
        self._context_unknown = bool(ctx.messages) and views.ends_with_compaction(branch)
        entries = self.store.get_entries()
        if not entries:
            model = self.agent.model
            if model is not UNKNOWN_MODEL:
                self.store.append_model_change(model.provider, model.id)
                self.store.append_thinking_level_change(self.agent.thinking_level)
            return
        if ctx.model is not None:
            restored = self.registry.find(ctx.model.provider, ctx.model.model_id)
            if restored is not None and self.registry.has_auth(restored):
                self.agent.model = restored
        has_level = any(entry_type(e) == "thinking_level_change" for e in branch)
        if has_level:
            self.agent.thinking_level = clamp_thinking_level(self.agent.model, ctx.thinking_level)
        else:
            self.store.append_thinking_level_change(self.agent.thinking_level)

    def _session_changed(self: Any, reason: str) -> None:
        self.emit({"type": "session_changed", "reason": reason, **self._identity(),
                   "messageCount": len(self.agent.messages)})

    async def _leave_current(self: Any, hook: str, **details: Any) -> bool:
        """Run the cancellable hook, then stop work in flight. Returns True when a hook cancelled."""
        result = await self.hooks.before(hook, details)
        if _get(result, "cancel"):
            return True
        await self.abort()
        self.clear_queue_silently()
        self._pending_bash.clear()
        return False

    def clear_queue_silently(self: Any) -> None:
        self.agent.clear_queues()
        self._steering_texts.clear()
        self._follow_up_texts.clear()

    async def _moved(self: Any, reason: str, previous: str | None, changed: str) -> None:
        self._load_context()
        await self.hooks.replaced(reason, previous, self.store.get_session_file())
        self._session_changed(changed)

    async def new_session(self: Any, parent_session: str | None = None) -> bool:
        if await self._leave_current("session_before_switch", reason="new"):
            return True
        previous = self.store.get_session_file()
        await self.hooks.leaving("new", None)
        self.store.new_session(parent_session=parent_session)
        await self._moved("new", previous, "new")
        return False

    async def switch_session(self: Any, path: str) -> bool:
        target = os.path.abspath(os.path.expanduser(path))
        loaded = self.store.load_target(target)  # a path that must not be the session file: refused, nothing left
        if await self._leave_current("session_before_switch", reason="resume", targetSessionFile=path):
            return True
        previous = self.store.get_session_file()
        await self.hooks.leaving("resume", target)
        self.store.set_session_file(target, loaded)
        await self._moved("resume", previous, "switch")
        return False

    async def fork(self: Any, entry_id: str) -> dict[str, Any]:
        entry = self.store.get_entry(entry_id) if entry_id else None
        if entry is None or entry_type(entry) != "message" or not isinstance(entry.message, UserMessage):
            raise SessionError("Invalid entry ID for forking")
        if await self._leave_current("session_before_fork", entryId=entry_id, position="before"):
            return {"cancelled": True}
        text = views.user_text(entry.message)
        previous = self.store.get_session_file()
        await self.hooks.leaving("fork", None)
        if entry.parentId is None:
            self.store.new_session(parent_session=self.store.get_session_file())
        else:
            path = self.store.create_branched_session(entry.parentId)
            if path and not self.store.is_on_disk():
                # pi opens the forked file by its path; a path with no reply is not written yet, so what it
                # opens is a fresh session bound to that path (new id, the branch's settings entries gone)
                self.store.set_session_file(path)
        await self._moved("fork", previous, "fork")
        return {"text": text, "cancelled": False}

    async def clone(self: Any) -> bool:
        leaf = self.store.get_leaf_id()
        if leaf is None:
            raise SessionError("Cannot clone session: no current entry selected")
        if self.store.is_persisted() and not self.store.is_on_disk():
            raise SessionError(f"Entry {leaf} not found")  # pi clones from the file, which is not written yet
        if await self._leave_current("session_before_fork", entryId=leaf, position="at"):
            return True
        previous = self.store.get_session_file()
        await self.hooks.leaving("fork", None)
        self.store.create_branched_session(leaf)
        await self._moved("fork", previous, "fork")
        return False

    async def navigate_tree(self: Any, target_id: str, *, summarize: bool = False,
                            custom_instructions: str | None = None, replace_instructions: bool = False,
                            label: str | None = None) -> dict[str, Any]:
        entry = self.store.get_entry(target_id)
        if entry is None:
            raise SessionError(f"Entry {target_id} not found")
        old_leaf = self.store.get_leaf_id()
        preparation = {"targetId": target_id, "oldLeafId": old_leaf, "userWantsSummary": summarize,
                       "customInstructions": custom_instructions, "replaceInstructions": replace_instructions,
                       "label": label}
        if await self._leave_current("session_before_tree", targetId=target_id, preparation=preparation):
            return {"cancelled": True}
        result: dict[str, Any] = {"cancelled": False}
        if summarize:
            await self.compactor.summarize_branch(target_id, custom_instructions, replace_instructions)
        is_user = entry_type(entry) == "message" and isinstance(entry.message, UserMessage)
        if is_user:  # as in pi's tree view: land before the user message and hand its text back
            result["editorText"] = views.user_text(entry.message)
            if summarize:
                pass  # summarize_branch already moved the leaf (onto the summary it wrote)
            elif entry.parentId is None:
                self.store.reset_leaf()
            else:
                self.store.branch(entry.parentId)
        elif not summarize:
            self.store.branch(target_id)
        if label:
            self.store.append_label_change(target_id, label)
        self._load_context()
        await self.hooks.notify({"type": "session_tree", "newLeafId": self.store.get_leaf_id(),
                                 "oldLeafId": old_leaf})
        self._session_changed("tree")
        return result


def _get(result: Any, key: str) -> Any:
    if isinstance(result, dict):
        return result.get(key)
    return getattr(result, key, None)
