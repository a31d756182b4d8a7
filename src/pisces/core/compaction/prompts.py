"""The texts sent to the model when it summarises a session.

The structure follows pi (a system prompt, the transcript inside ``<conversation>``, an earlier summary
inside ``<previous-summary>``, then the instructions with their fixed section headings, and
``Additional focus:`` for the user's own instructions); the wording is pisces' own.
"""

from __future__ import annotations

__all__ = [
    "SYSTEM_PROMPT",
    "SUMMARY_PROMPT",
    "UPDATE_SUMMARY_PROMPT",
    "TURN_PREFIX_PROMPT",
    "BRANCH_SUMMARY_PROMPT",
    "BRANCH_SUMMARY_PREAMBLE",
    "SPLIT_TURN_SEPARATOR",
    "NO_PRIOR_HISTORY",
    "history_prompt",
    "turn_prefix_prompt",
    "branch_prompt",
]

SYSTEM_PROMPT = (
    "You are a context summarization assistant for a coding agent. You are shown the transcript of a session "
    "between a user and an AI coding assistant, and you condense it into a structured summary in the format "
    "you are asked for.\n"
    "\n"
    "Never carry the conversation on and never answer questions that appear in the transcript. Reply with "
    "the structured summary and nothing else."
)

_CLOSING = "Keep every section short. Quote file paths, function names and error messages exactly."

SUMMARY_PROMPT = f"""The transcript inside <conversation> above is a session to summarize. Write a structured checkpoint of it that another model can pick up from to carry on the work.

Follow this format exactly:

## Goal
[The user's objective. List several if the session covered more than one task.]

## Constraints & Preferences
- [Requirements, constraints or preferences the user stated]
- [Write "(none)" if there were none]

## Progress
### Done
- [x] [Finished tasks and changes]

### In Progress
- [ ] [Work currently under way]

### Blocked
- [Anything stopping progress, if applicable]

## Key Decisions
- **[Decision]**: [Why it was made, briefly]

## Next Steps
1. [What should happen next, in order]

## Critical Context
- [Data, examples or references needed to continue]
- [Write "(none)" if there is nothing]

{_CLOSING}"""

UPDATE_SUMMARY_PROMPT = f"""The transcript inside <conversation> above holds NEW messages from the session. Fold them into the existing summary given inside <previous-summary>.

How to update it:
- KEEP everything from the previous summary that still holds
- ADD the new progress, decisions and context
- MOVE items from "In Progress" to "Done" once they are finished
- REVISE "Next Steps" to reflect what has now been done
- KEEP file paths, function names and error messages exactly as written
- Drop an item only when it is clearly no longer relevant

Follow this format exactly:

## Goal
[The existing goals, plus new ones if the task grew]

## Constraints & Preferences
- [The existing ones, plus any newly found]

## Progress
### Done
- [x] [Items done before AND items finished since]

### In Progress
- [ ] [Current work, brought up to date]

### Blocked
- [Current blockers; remove resolved ones]

## Key Decisions
- **[Decision]**: [Why, briefly] (keep the earlier decisions, add new ones)

## Next Steps
1. [Brought up to date with the current state]

## Critical Context
- [Important context, kept and extended as needed]

{_CLOSING}"""

TURN_PREFIX_PROMPT = """The transcript above is only the BEGINNING of one turn that was too long to keep whole. The END of that turn (the most recent work) is still in the context.

Summarize this beginning so that the part that was kept makes sense on its own:

## Original Request
[What the user asked for in this turn]

## Early Progress
- [Decisions made and work done in this beginning part]

## Context for Suffix
- [What is needed to understand the recent work that was kept]

Be brief, and focus on what the kept part of the turn depends on."""

BRANCH_SUMMARY_PROMPT = f"""Write a structured summary of this branch of the conversation, so that its context is at hand when the user comes back to it.

Follow this format exactly:

## Goal
[What the user was trying to achieve on this branch]

## Constraints & Preferences
- [Constraints, preferences or requirements that came up]
- [Write "(none)" if there were none]

## Progress
### Done
- [x] [Finished tasks and changes]

### In Progress
- [ ] [Work begun but not finished]

### Blocked
- [Anything stopping progress, if applicable]

## Key Decisions
- **[Decision]**: [Why, briefly]

## Next Steps
1. [What to do next to carry this work on]

{_CLOSING}"""

BRANCH_SUMMARY_PREAMBLE = (
    "Before coming back to this point, the user explored another branch of the conversation.\n"
    "What happened there, in summary:\n\n"
)

SPLIT_TURN_SEPARATOR = "\n\n---\n\n**Turn Context (split turn):**\n\n"
NO_PRIOR_HISTORY = "No prior history."


def _focus(instructions: str, custom: str | None) -> str:
    return f"{instructions}\n\nAdditional focus: {custom}" if custom else instructions


def history_prompt(conversation: str, previous_summary: str | None, custom: str | None) -> str:
    """The user message for a history summary (a fresh one, or an update of ``previous_summary``)."""
    text = f"<conversation>\n{conversation}\n</conversation>\n\n"
    if previous_summary:
        text += f"<previous-summary>\n{previous_summary}\n</previous-summary>\n\n"
    return text + _focus(UPDATE_SUMMARY_PROMPT if previous_summary else SUMMARY_PROMPT, custom)


def turn_prefix_prompt(conversation: str) -> str:
    return f"<conversation>\n{conversation}\n</conversation>\n\n{TURN_PREFIX_PROMPT}"


def branch_prompt(conversation: str, custom: str | None, replace: bool) -> str:
    instructions = custom if (replace and custom) else _focus(BRANCH_SUMMARY_PROMPT, custom)
    return f"<conversation>\n{conversation}\n</conversation>\n\n{instructions}"
