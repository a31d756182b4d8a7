"""Compactor: when and how an AgentSession compacts, with pi's events and errors.

Three triggers:
- ``manual`` (RPC ``compact``): stops the current run, then compacts whatever the session holds;
- ``threshold``: after a run (and before each prompt) when the context exceeds window - reserveTokens;
- ``overflow``: the model refused the context as too long; the failed reply leaves the in-memory context,
  the session is compacted and the run continues, once per user message.

Every compaction emits ``compaction_start{reason}`` and ``compaction_end{reason, result?, aborted,
willRetry, errorMessage?}``; the automatic ones also emit pisces' ``auto_compaction_start/end`` beside them.
Only one compaction (or branch summary) runs at a time; ``abort()`` stops the one in flight at once, and
cancels a manual one still waiting for its turn. A manual compaction holds the session's run lock, so no
reply starts or streams while it rewrites the context: a prompt sent meanwhile runs after it, and a
``compact`` sent while another compaction or a reply is under way waits for them (the automatic ones run
inside a run, which already holds that lock).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Callable

from pisces.agent.types import MessageEndEvent, MessageStartEvent
from pisces.ai.abort import AbortSignal
from pisces.ai.error_kinds import is_overflow_error
from pisces.ai.types import AssistantMessage, StreamOptions, UserMessage
from pisces.core.compaction.cut_point import prepare_compaction
from pisces.core.compaction.summarize import (
    CompactionCancelled,
    CompactionResult,
    Summarizer,
    collect_branch_entries,
    run_compaction,
    summarize_branch_entries,
)
from pisces.core.compaction.tokens import estimate_context_tokens, usage_tokens
from pisces.core.errors import SessionError
from pisces.core.store import CompactionEntry, entry_type, iso_to_ms

if TYPE_CHECKING:
    from pisces.core.session.ports import CompactionHost

__all__ = ["Compactor", "is_context_overflow", "OVERFLOW_RETRY_FAILED"]

OVERFLOW_RETRY_FAILED = ("Context overflow recovery failed after one compact-and-retry attempt. "
                         "Try reducing context or switching to a larger-context model.")


def is_context_overflow(message: AssistantMessage, context_window: int) -> bool:
    """The reply says the context was too long: an overflow error, or a "successful" reply whose input
    alone exceeds the window (providers that truncate silently)."""
    if message.stopReason == "error":
        return is_overflow_error(message.errorMessage if isinstance(message.errorMessage, str) else None)
    if message.stopReason == "stop" and context_window > 0:
        return message.usage.input + message.usage.cacheRead > context_window
    return False


class Compactor:
    def __init__(self, session: CompactionHost, run_lock: asyncio.Lock | None = None) -> None:
        self.session = session
        self._run_lock = run_lock or asyncio.Lock()  # the session's: held by every run (prompt, retries)
        self._aborts = 0
        self._lock = asyncio.Lock()
        self._signal: AbortSignal | None = None
        self._idle = asyncio.Event()
        self._idle.set()
        self._last_reply: AssistantMessage | None = None  # the last reply of the current run, for the check
        self._overflow_attempted = False
        session.subscribe(self._on_event, updates=False)  # starts and ends only

    # ------------------------------------------------------------------------------------------
    # Bookkeeping
    # ------------------------------------------------------------------------------------------
    def _on_event(self, event: Any) -> None:
        if isinstance(event, MessageStartEvent) and isinstance(event.message, UserMessage):
            self._overflow_attempted = False  # a new user message earns a new overflow recovery
        elif isinstance(event, MessageEndEvent) and isinstance(event.message, AssistantMessage):
            self._last_reply = event.message
            if event.message.stopReason != "error":
                self._overflow_attempted = False

    @property
    def running(self) -> bool:
        return not self._idle.is_set()

    async def wait_idle(self) -> None:
        while not self._idle.is_set():
            await self._idle.wait()

    def abort(self) -> None:
        self._aborts += 1
        if self._signal is not None:
            self._signal.abort()

    def _begin(self) -> AbortSignal:
        self._signal = AbortSignal()
        self._idle.clear()
        self.session.is_compacting = True
        return self._signal

    def _finish(self) -> None:
        self._signal = None
        self.session.is_compacting = False
        self._idle.set()

    def _start(self, reason: str, auto: bool) -> None:
        self.session.emit({"type": "compaction_start", "reason": reason})
        if auto:
            self.session.emit({"type": "auto_compaction_start", "reason": reason})

    def _end(self, reason: str, auto: bool, result: CompactionResult | None = None, *, aborted: bool = False,
             will_retry: bool = False, error: str | None = None) -> None:
        event: dict[str, Any] = {"type": "compaction_end", "reason": reason}
        if result is not None:
            event["result"] = result.to_dict()
        event["aborted"] = aborted
        event["willRetry"] = will_retry
        if error is not None:
            event["errorMessage"] = error
        self.session.emit(event)
        if auto:
            self.session.emit({**event, "type": "auto_compaction_end"})

    def _summarizer(self, signal: AbortSignal) -> Summarizer:
        session = self.session
        model = session.agent.model
        level = session.agent.thinking_level

        def options_for(max_tokens: int, reasoning: bool) -> StreamOptions:
            opts = session.stream_options(model)
            opts.signal = signal
            opts.maxTokens = max_tokens
            opts.reasoning = level if reasoning else None
            return opts

        return Summarizer(model=model, options_for=options_for, thinking_level=level,
                          on_usage=self.session.record_usage)

    def _has_model(self) -> bool:
        try:
            self.session.check_model()
        except Exception:  # noqa: BLE001 - no model or no key: automatic compaction just does nothing
            return False
        return True

    async def _compact(self, signal: AbortSignal, custom_instructions: str | None) -> CompactionResult | None:
        """Plan, summarise, store, reload. None when there is nothing to compact."""
        session = self.session
        settings = session.settings
        branch = session.store.get_branch()
        prep = prepare_compaction(branch, settings.compaction_keep_recent_tokens)
        if prep is None:
            return None
        result = await self._from_extensions(prep, branch, custom_instructions, signal)
        from_extension = result is not None
        if result is None:
            result = await run_compaction(prep, self._summarizer(signal), settings.compaction_reserve_tokens,
                                          custom_instructions)
        if signal.aborted:
            raise CompactionCancelled()
        entry_id = session.store.append_compaction(result.summary, result.first_kept_entry_id,
                                                   result.tokens_before, result.details, from_hook=from_extension)
        await session.hooks.notify({"type": "session_compact", "fromExtension": from_extension,
                                    "compactionEntry": session.store.get_entry(entry_id)})
        session.agent.replace_messages(session.store.build_session_context().messages)
        session.mark_context_unknown()
        return result

    async def _from_extensions(self, prep: Any, branch: list[Any], custom_instructions: str | None,
                               signal: AbortSignal) -> CompactionResult | None:
        """session_before_compact: an extension may cancel (CompactionCancelled) or supply the compaction."""
        if not self.session.hooks.active:
            return None
        preparation = {"firstKeptEntryId": prep.first_kept_entry_id,
                       "messagesToSummarize": prep.messages_to_summarize,
                       "turnPrefixMessages": prep.turn_prefix_messages, "isSplitTurn": prep.is_split_turn,
                       "tokensBefore": prep.tokens_before, "previousSummary": prep.previous_summary}
        decision = await self.session.hooks.before("session_before_compact", {
            "preparation": preparation, "branchEntries": branch, "customInstructions": custom_instructions,
            "signal": signal})
        get: Callable[[str], Any] = ((lambda k: decision.get(k)) if isinstance(decision, dict)
                                     else (lambda k: getattr(decision, k, None)))
        if get("cancel"):
            raise CompactionCancelled()
        custom = get("compaction")
        if not custom:
            return None
        field: Callable[[str], Any] = ((lambda k: custom.get(k)) if isinstance(custom, dict)
                                       else (lambda k: getattr(custom, k, None)))
        summary = field("summary")
        if not isinstance(summary, str) or not summary:
            return None
        return CompactionResult(summary=summary,
                                first_kept_entry_id=field("firstKeptEntryId") or prep.first_kept_entry_id,
                                tokens_before=field("tokensBefore") or prep.tokens_before, read_files=[],
                                modified_files=[])

    # ------------------------------------------------------------------------------------------
    # Manual
    # ------------------------------------------------------------------------------------------
    async def compact_manual(self, custom_instructions: str | None = None) -> dict[str, Any]:
        session = self.session
        session.retry.cancel()
        session.agent.abort()
        await session.agent.wait_for_idle()
        aborts = self._aborts
        async with self._run_lock, self._lock:
            if self._aborts != aborts:  # an abort (or a session switch) came while this waited its turn
                raise SessionError("Compaction cancelled")
            signal = self._begin()
            self._start("manual", auto=False)
            try:
                session.check_model()
                result = await self._compact(signal, custom_instructions)
                if result is None:
                    branch = session.store.get_branch()
                    if branch and entry_type(branch[-1]) == "compaction":
                        raise SessionError("Already compacted")
                    raise SessionError("Nothing to compact (session too small)")
            except CompactionCancelled:
                self._end("manual", False, aborted=True)
                raise SessionError("Compaction cancelled") from None
            except Exception as exc:
                message = str(exc) or type(exc).__name__
                self._end("manual", False, error=f"Compaction failed: {message}")
                if isinstance(exc, SessionError):
                    raise
                raise SessionError(message) from exc
            finally:
                self._finish()
            self._end("manual", False, result)
            return result.to_dict()

    # ------------------------------------------------------------------------------------------
    # Automatic
    # ------------------------------------------------------------------------------------------
    async def _auto(self, reason: str, will_retry: bool) -> bool:
        """One automatic compaction. True when it compacted."""
        async with self._lock:
            signal = self._begin()
            self._start(reason, auto=True)
            try:
                result = await self._compact(signal, None) if self._has_model() else None
            except CompactionCancelled:
                self._end(reason, True, aborted=True)
                return False
            except Exception as exc:  # noqa: BLE001
                text = str(exc) or "compaction failed"
                prefix = "Context overflow recovery failed" if reason == "overflow" else "Auto-compaction failed"
                self._end(reason, True, error=f"{prefix}: {text}")
                return False
            finally:
                self._finish()
            if result is None:
                self._end(reason, True)
                return False
            if will_retry:
                messages = self.session.agent.messages
                last = messages[-1] if messages else None
                if isinstance(last, AssistantMessage) and last.stopReason == "error":
                    messages.pop()  # the failed reply is back after the reload; the retry replaces it
            self._end(reason, True, result, will_retry=will_retry)
            return True

    def _is_stale(self, message: Any) -> tuple[bool, CompactionEntry | None]:
        """Whether ``message`` predates the latest compaction (its usage or error describes a context that
        no longer exists). Decided by position on the branch, so a reply in the same millisecond as the
        compaction is told apart; by timestamp for a message the branch does not hold."""
        store = self.session.store
        compaction = store.latest_compaction()  # kept per entry by the store: no walk over the whole branch
        if compaction is None:
            return False, None
        for entry in store.walk_back():  # from the leaf: the reply just appended is met at once
            if entry is compaction:
                return True, compaction
            if getattr(entry, "message", None) is message:
                return False, compaction
        return message.timestamp <= iso_to_ms(compaction.timestamp), compaction

    def _overflowed(self, message: AssistantMessage) -> bool:
        model = self.session.agent.model
        same_model = message.provider == model.provider and message.model == model.id
        return same_model and is_context_overflow(message, model.contextWindow or 0)

    async def _check(self, message: AssistantMessage, *, skip_aborted: bool) -> bool:
        """pi's post-run check on ``message``: overflow recovery or threshold compaction.
        True when an overflow compaction succeeded (the run should go on)."""
        session = self.session
        settings = session.settings
        if not settings.compaction_enabled:
            return False
        if skip_aborted and message.stopReason == "aborted":
            return False
        stale, compaction = self._is_stale(message)
        if stale:
            return False
        if self._overflowed(message):
            if self._overflow_attempted:
                self._end("overflow", True, error=OVERFLOW_RETRY_FAILED)
                return False
            self._overflow_attempted = True
            messages = session.agent.messages
            if messages and isinstance(messages[-1], AssistantMessage):
                messages.pop()  # kept in the session file, out of the context for the retry
            return await self._auto("overflow", True)
        window = session.agent.model.contextWindow or 0
        if message.stopReason == "error":
            estimate = estimate_context_tokens(session.agent.messages)
            index = estimate["lastUsageIndex"]
            if index is None:
                return False
            if compaction is not None and self._is_stale(session.agent.messages[index])[0]:
                return False  # that usage describes the context before the last compaction
            tokens = estimate["tokens"]
        else:
            tokens = usage_tokens(message)
        if window > 0 and tokens > window - settings.compaction_reserve_tokens:
            await self._auto("threshold", False)
        return False

    async def handle_overflow(self, last_assistant: AssistantMessage) -> bool:
        """After a failed reply: recover from a context overflow. True when compacted and the run should
        continue; False when this was no overflow, or the recovery failed (the events say so)."""
        if not self.session.settings.compaction_enabled or self._is_stale(last_assistant)[0]:
            return False
        if not self._overflowed(last_assistant):
            return False
        self._last_reply = None  # handled here; no threshold check for this reply
        return await self._check(last_assistant, skip_aborted=True)

    async def check_threshold(self, before_prompt: bool = False) -> None:
        """After a run (on its last reply) or before a prompt (on the last reply in the context, aborted
        ones included): compact when the context has grown past the threshold."""
        if before_prompt:
            message = self.session.last_assistant_message()
        else:
            message, self._last_reply = self._last_reply, None
        if message is None:
            return
        await self._check(message, skip_aborted=not before_prompt)

    # ------------------------------------------------------------------------------------------
    # Branch summaries
    # ------------------------------------------------------------------------------------------
    async def summarize_branch(self, target_id: str, custom_instructions: str | None = None,
                               replace_instructions: bool = False) -> str | None:
        """Leave the current branch for ``target_id`` with a summary of it: the leaf moves to the target
        (to its parent for a user or custom message) and a ``branch_summary`` entry is appended there.
        Returns the summary entry's id, or None when there was nothing to summarise (the leaf still moves)."""

        session = self.session
        store = session.store
        target = store.get_entry(target_id)
        if target is None:
            raise SessionError(f"Entry {target_id} not found")
        is_user = entry_type(target) == "custom_message" or (
            entry_type(target) == "message" and isinstance(getattr(target, "message", None), UserMessage))
        new_leaf = target.parentId if is_user else target_id
        entries = collect_branch_entries(store, store.get_leaf_id(), target_id)
        if target_id == store.get_leaf_id() or not entries:
            if new_leaf is None:
                store.reset_leaf()
            else:
                store.branch(new_leaf)
            return None
        session.check_model()
        async with self._lock:
            signal = self._begin()
            try:
                summary, read_files, modified_files = await summarize_branch_entries(
                    entries, self._summarizer(signal), session.settings.branch_summary_reserve_tokens,
                    custom_instructions, replace_instructions)
            except CompactionCancelled:
                raise SessionError("Branch summarization cancelled") from None
            except Exception as exc:
                raise SessionError(str(exc) or "Summarization failed") from exc
            finally:
                self._finish()
        if signal.aborted:
            raise SessionError("Branch summarization cancelled")
        return store.branch_with_summary(new_leaf, summary, {"readFiles": read_files, "modifiedFiles": modified_files},
                                         from_hook=False)
