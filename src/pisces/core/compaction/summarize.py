"""The summarisation calls: history, turn prefix, their merge for a split turn, and branch summaries.

Each call is one ``complete()`` with the session's model and credentials, no tools, a capped output
(80 % of ``reserveTokens`` for history, 50 % for a turn prefix, 2048 for a branch), and the caller's abort
signal, so an abort ends the request at once.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Callable

from pisces.ai.stream import complete
from pisces.ai.types import Context, Model, StreamOptions, TextContent, UserMessage, now_ms
from pisces.core.compaction.tokens import estimate_tokens
from pisces.core.store import convert_to_llm, entry_type, message_role

from . import prompts
from .cut_point import Preparation, entry_message
from .serialize import FileOps, file_ops_from_message, format_file_lists, serialize_conversation

__all__ = [
    "CompactionCancelled",
    "SummaryError",
    "Summarizer",
    "CompactionResult",
    "run_compaction",
    "collect_branch_entries",
    "prepare_branch_entries",
    "summarize_branch_entries",
]

BRANCH_SUMMARY_MAX_TOKENS = 2048


class CompactionCancelled(Exception):
    """The summarisation was aborted."""

    def __init__(self) -> None:
        super().__init__("Compaction cancelled")


class SummaryError(Exception):
    """The model failed to summarise; the text says why."""


@dataclass
class Summarizer:
    """How to reach the model: ``options_for(max_tokens, reasoning)`` gives fresh StreamOptions."""

    model: Model
    options_for: Callable[[int, bool], StreamOptions]
    thinking_level: str = "off"
    # every reply's usage, whatever its end (a summary the user's budget pays for, like any reply)
    on_usage: Callable[[Any], None] | None = None

    async def ask(self, prompt_text: str, max_tokens: int, *, reasoning: bool, failure: str | None) -> str:
        """The model's text reply. Raises CompactionCancelled on abort and SummaryError on failure
        (``failure: <error>``, or the bare error when ``failure`` is None)."""
        context = Context(
            systemPrompt=prompts.SYSTEM_PROMPT,
            messages=[UserMessage(content=[TextContent(text=prompt_text)], timestamp=now_ms())],
        )
        use_reasoning = reasoning and self.model.reasoning and self.thinking_level not in ("off", "", None)
        reply = await complete(self.model, context, self.options_for(max_tokens, use_reasoning))
        if self.on_usage is not None:
            self.on_usage(reply.usage)
        if reply.stopReason == "aborted":
            raise CompactionCancelled()
        if reply.stopReason == "error":
            error = reply.errorMessage if isinstance(reply.errorMessage, str) else ""
            raise SummaryError(f"{failure}: {error or 'Unknown error'}" if failure else error or "Summarization failed")
        return "\n".join(b.text for b in reply.content if isinstance(b, TextContent))


@dataclass
class CompactionResult:
    summary: str
    first_kept_entry_id: str
    tokens_before: int
    read_files: list[str]
    modified_files: list[str]

    @property
    def details(self) -> dict[str, list[str]]:
        return {"readFiles": self.read_files, "modifiedFiles": self.modified_files}

    def to_dict(self) -> dict[str, Any]:
        """The RPC ``compact`` data and the ``compaction_end.result``."""
        return {"summary": self.summary, "firstKeptEntryId": self.first_kept_entry_id,
                "tokensBefore": self.tokens_before, "details": self.details}


async def _all(*coros: Any) -> list[Any]:
    """Run concurrently; the first failure cancels the rest and is raised."""
    tasks = [asyncio.ensure_future(c) for c in coros]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


async def run_compaction(prep: Preparation, summarizer: Summarizer, reserve_tokens: int,
                         custom_instructions: str | None = None) -> CompactionResult:
    """Summarise what ``prep`` drops. A split turn gets two summaries, made in parallel and merged."""

    def history() -> Any:
        text = serialize_conversation(convert_to_llm(prep.messages_to_summarize))
        return summarizer.ask(prompts.history_prompt(text, prep.previous_summary, custom_instructions),
                              int(0.8 * reserve_tokens), reasoning=True, failure="Summarization failed")

    if prep.is_split_turn and prep.turn_prefix_messages:
        prefix_text = serialize_conversation(convert_to_llm(prep.turn_prefix_messages))
        prefix = summarizer.ask(prompts.turn_prefix_prompt(prefix_text), int(0.5 * reserve_tokens),
                                reasoning=True, failure="Turn prefix summarization failed")
        if prep.messages_to_summarize:
            history_summary, prefix_summary = await _all(history(), prefix)
        else:
            history_summary, prefix_summary = prompts.NO_PRIOR_HISTORY, await prefix
        summary = history_summary + prompts.SPLIT_TURN_SEPARATOR + prefix_summary
    else:
        summary = await history()
    read_files, modified_files = prep.file_ops.lists()
    summary += format_file_lists(read_files, modified_files)
    return CompactionResult(summary, prep.first_kept_entry_id, prep.tokens_before, read_files, modified_files)


# ---------------------------------------------------------------------------------------------
# Branch summaries (navigate_tree with summarize)
# ---------------------------------------------------------------------------------------------
def collect_branch_entries(store: Any, old_leaf_id: str | None, target_id: str) -> list[Any]:
    """The entries of the branch being left: from the old leaf back to (not including) the deepest entry it
    shares with the target's path, oldest first."""
    if not old_leaf_id:
        return []
    old_ids = {e.id for e in store.get_branch(old_leaf_id)}
    common = next((e.id for e in reversed(store.get_branch(target_id)) if e.id in old_ids), None)
    entries = []
    current: str | None = old_leaf_id
    while current and current != common:
        entry = store.get_entry(current)
        if entry is None:
            break
        entries.append(entry)
        current = entry.parentId
    entries.reverse()
    return entries


def prepare_branch_entries(entries: list[Any], token_budget: int = 0) -> tuple[list[Any], FileOps]:
    """The newest messages of ``entries`` that fit ``token_budget`` (0: no limit), oldest first, plus the
    files touched (from every entry, including earlier branch summaries' details)."""
    ops = FileOps()
    for entry in entries:
        if entry_type(entry) == "branch_summary" and getattr(entry, "fromHook", None) is not True:
            ops.add_details(getattr(entry, "details", None))
    messages: list[Any] = []
    total = 0
    for entry in reversed(entries):
        msg = entry_message(entry)
        if msg is None or message_role(msg) == "toolResult":  # the tool call tells the story
            continue
        file_ops_from_message(msg, ops)
        tokens = estimate_tokens(msg)
        if token_budget > 0 and total + tokens > token_budget:
            if entry_type(entry) in ("compaction", "branch_summary") and total < token_budget * 0.9:
                messages.insert(0, msg)  # a summary is worth squeezing in
                total += tokens
            break
        messages.insert(0, msg)
        total += tokens
    return messages, ops


async def summarize_branch_entries(entries: list[Any], summarizer: Summarizer, reserve_tokens: int,
                                   custom_instructions: str | None = None,
                                   replace_instructions: bool = False) -> tuple[str, list[str], list[str]]:
    """(summary, read files, modified files) of an abandoned branch."""
    window = summarizer.model.contextWindow or 128000
    messages, ops = prepare_branch_entries(entries, window - reserve_tokens)
    if not messages:
        return "No content to summarize", [], []
    text = serialize_conversation(convert_to_llm(messages))
    summary = await summarizer.ask(prompts.branch_prompt(text, custom_instructions, replace_instructions),
                                   BRANCH_SUMMARY_MAX_TOKENS, reasoning=False, failure=None)
    read_files, modified_files = ops.lists()
    summary = prompts.BRANCH_SUMMARY_PREAMBLE + summary + format_file_lists(read_files, modified_files)
    return summary, read_files, modified_files
