"""What handlers, tools and commands receive as ``ctx``.

``ExtensionContext``: ``ui``, ``has_ui``, ``cwd``, ``session`` (a read-only view of the session file; also
``session_manager``), ``model``, ``model_registry``, ``signal`` (the current run's abort signal, None when idle),
``is_idle()``, ``abort()``, ``has_pending_messages()``, ``shutdown()``, ``get_context_usage()``, ``compact()``,
``get_system_prompt()``.

``CommandContext`` (command handlers only) adds ``wait_for_idle()``, ``new_session()``, ``fork()``,
``navigate_tree()``, ``switch_session()`` and ``reload()``. Both go stale when the extension runtime is replaced
(reload, new session, switch, fork): every use then raises with pi's explanation.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable


class SessionView:
    """Read-only access to the session file: entries, branch, leaf, labels, name, path."""

    def __init__(self, store: Any) -> None:
        self._store = store

    def get_entries(self) -> list[Any]:
        return list(self._store.get_entries())

    def get_branch(self) -> list[Any]:
        return list(self._store.get_branch())

    def get_entry(self, entry_id: str) -> Any:
        return self._store.get_entry(entry_id)

    def get_leaf_id(self) -> str | None:
        return self._store.get_leaf_id()

    def get_label(self, entry_id: str) -> str | None:
        return self._store.get_labels().get(entry_id)

    def get_session_file(self) -> str | None:
        return self._store.get_session_file()

    def get_session_id(self) -> str:
        return self._store.get_session_id()

    def get_session_name(self) -> str | None:
        return self._store.get_session_name()

    def get_cwd(self) -> str:
        return self._store.cwd if hasattr(self._store, "cwd") else ""

    # pi's camelCase names, for ports of TypeScript extensions
    getEntries, getBranch, getEntry, getLeafId, getLabel = get_entries, get_branch, get_entry, get_leaf_id, get_label
    getSessionFile, getSessionId, getSessionName = get_session_file, get_session_id, get_session_name


class ExtensionContext:
    def __init__(self, host: Any, runtime: Any, system_prompt: Callable[[], str] | None = None) -> None:
        self._host = host
        self._rt = runtime
        self._system_prompt = system_prompt

    def _session(self) -> Any:
        if self._rt.stale:
            raise RuntimeError(self._rt.stale)
        return self._host.session

    @property
    def ui(self) -> Any:
        return self._session().ui

    @property
    def has_ui(self) -> bool:
        return bool(self._session().ui.has_ui)

    hasUI = has_ui

    @property
    def cwd(self) -> str:
        return self._session().cwd

    @property
    def session(self) -> SessionView:
        return SessionView(self._session().store)

    session_manager = sessionManager = session

    @property
    def model(self) -> Any:
        return self._session().model

    @property
    def model_registry(self) -> Any:
        return self._session().registry

    modelRegistry = model_registry

    @property
    def signal(self) -> Any:
        return self._session().agent.signal

    def is_idle(self) -> bool:
        return not self._session().is_busy

    def abort(self) -> None:
        self._host.spawn(self._session().abort(), "abort")

    def has_pending_messages(self) -> bool:
        return self._session().pending_count > 0

    def shutdown(self) -> None:
        self._session()
        self._host.request_shutdown()

    def get_context_usage(self) -> dict[str, Any] | None:
        return self._session().context_usage(brief=True)

    def compact(self, custom_instructions: str | None = None, *, on_complete: Callable[[Any], Any] | None = None,
                on_error: Callable[[BaseException], Any] | None = None, **options: Any) -> None:
        """Start a compaction without waiting for it; ``on_complete(result)`` / ``on_error(exc)`` follow."""
        session = self._session()
        custom_instructions = custom_instructions or options.get("customInstructions")

        async def run() -> None:
            try:
                result = await session.compact(custom_instructions)
            except Exception as exc:  # noqa: BLE001 - handed to the extension
                if on_error is not None:
                    await _maybe_await(on_error(exc))
                return
            if on_complete is not None:
                await _maybe_await(on_complete(result))

        self._host.spawn(run(), "compact")

    def get_system_prompt(self) -> str:
        if self._system_prompt is not None:
            return self._system_prompt()
        prompt = self._session().agent.system_prompt
        return prompt() if callable(prompt) else prompt

    # pi's camelCase names
    isIdle, hasPendingMessages, getContextUsage, getSystemPrompt = (is_idle, has_pending_messages,
                                                                   get_context_usage, get_system_prompt)


class CommandContext(ExtensionContext):
    async def wait_for_idle(self) -> None:
        await self._session().agent.wait_for_idle()

    async def new_session(self, parent_session: str | None = None, *, setup: Callable[..., Any] | None = None,
                          with_session: Callable[..., Any] | None = None, **options: Any) -> dict[str, bool]:
        session = self._session()
        cancelled = await session.new_session(parent_session=parent_session or options.get("parentSession"))
        if not cancelled:
            if setup is not None:
                await _maybe_await(setup(session.store))
            await self._with_session(with_session or options.get("withSession"))
        return {"cancelled": bool(cancelled)}

    async def fork(self, entry_id: str, *, position: str = "before", with_session: Callable[..., Any] | None = None
                   ) -> dict[str, bool]:
        session = self._session()
        if position == "at":
            if entry_id != session.store.get_leaf_id():
                raise ValueError("fork(position='at') copies the current branch: give the current leaf's id")
            cancelled = await session.clone()
        else:
            cancelled = (await session.fork(entry_id))["cancelled"]
        if not cancelled:
            await self._with_session(with_session)
        return {"cancelled": bool(cancelled)}

    async def navigate_tree(self, target_id: str, *, summarize: bool = False, custom_instructions: str | None = None,
                            replace_instructions: bool = False, label: str | None = None) -> dict[str, bool]:
        result = await self._session().navigate_tree(target_id, summarize=summarize,
                                                     custom_instructions=custom_instructions,
                                                     replace_instructions=replace_instructions, label=label)
        return {"cancelled": bool(result.get("cancelled"))}

    async def switch_session(self, session_path: str, *, with_session: Callable[..., Any] | None = None
                             ) -> dict[str, bool]:
        cancelled = await self._session().switch_session(session_path)
        if not cancelled:
            await self._with_session(with_session)
        return {"cancelled": bool(cancelled)}

    async def reload(self) -> None:
        self._session()
        await self._host.reload()

    async def _with_session(self, fn: Callable[..., Any] | None) -> None:
        if fn is not None:
            await _maybe_await(fn(self._host.replaced_context()))

    waitForIdle, newSession, navigateTree, switchSession = wait_for_idle, new_session, navigate_tree, switch_session


async def _maybe_await(value: Any) -> Any:
    if inspect.isawaitable(value):
        return await value
    return value

