"""What goes into the system prompt: the base text, context files (AGENTS.md / CLAUDE.md), SYSTEM.md and
APPEND_SYSTEM.md.

Layout, as pi lays it out: the base prompt (who the agent is, its tools, guidelines) or a replacement for it
(``--system-prompt`` or SYSTEM.md), then the appended text (``--append-system-prompt`` or
APPEND_SYSTEM.md), then a "# Project Context" section with every context file under its path, then the
current date (UTC) and working directory.
"""

from __future__ import annotations

import datetime as _dt
import os
import sys
from collections.abc import Iterable, Sequence

from pisces.core.config import paths
from pisces.core.safe_open import TEXT_MAX_BYTES, read_text

CONTEXT_FILE_NAMES = ("AGENTS.md", "CLAUDE.md")  # the first one present in a directory is used

ALWAYS_GUIDELINES = (
    "Be concise in your responses",
    "Show file paths clearly when working with files",
)


# ---------------------------------------------------------------------------------------------
# Context files
# ---------------------------------------------------------------------------------------------
def _read_text(path: str) -> str | None:
    """The file's text, through the safe-open rules: a FIFO, a device (or a link to one) or a file over
    4 MiB is refused with a warning on stderr, never read."""
    try:
        return read_text(path, TEXT_MAX_BYTES, errors="replace")
    except OSError as exc:
        print(f"Warning: could not read {path}: {exc}", file=sys.stderr, flush=True)
        return None


def _context_file_in(directory: str) -> tuple[str, str] | None:
    for name in CONTEXT_FILE_NAMES:
        path = os.path.join(directory, name)
        if os.path.lexists(path) and not os.path.isdir(path):
            content = _read_text(path)
            if content is not None:
                return path, content
    return None


def load_context_files(cwd: str, agent_dir: str | None = None) -> list[tuple[str, str]]:
    """(path, content) of each context file: the agent dir's first, then one per directory from the
    filesystem root down to ``cwd``. In each directory AGENTS.md is preferred over CLAUDE.md."""
    agent_dir = agent_dir if agent_dir is not None else paths.agent_dir()
    found: list[tuple[str, str]] = []
    seen: set[str] = set()
    global_file = _context_file_in(agent_dir)
    if global_file:
        found.append(global_file)
        seen.add(global_file[0])
    chain: list[tuple[str, str]] = []
    for current in paths.dirs_to_root(cwd):  # up to the project root, never a shared parent directory
        hit = _context_file_in(current)
        if hit and hit[0] not in seen:
            chain.append(hit)
            seen.add(hit[0])
    found.extend(reversed(chain))
    return found


# ---------------------------------------------------------------------------------------------
# SYSTEM.md / APPEND_SYSTEM.md
# ---------------------------------------------------------------------------------------------
def _discover(cwd: str, agent_dir: str, name: str) -> str | None:
    for path in (os.path.join(paths.project_config_dir(cwd), name), os.path.join(agent_dir, name)):
        if os.path.lexists(path) and not os.path.isdir(path):  # a FIFO is found, then refused by _read_text
            return path
    return None


def discover_system_prompt_file(cwd: str, agent_dir: str | None = None) -> str | None:
    """``<cwd>/.pisces/SYSTEM.md``, else ``<agentDir>/SYSTEM.md``, else None."""
    return _discover(cwd, agent_dir if agent_dir is not None else paths.agent_dir(), "SYSTEM.md")


def discover_append_prompt_file(cwd: str, agent_dir: str | None = None) -> str | None:
    """``<cwd>/.pisces/APPEND_SYSTEM.md``, else ``<agentDir>/APPEND_SYSTEM.md``, else None."""
    return _discover(cwd, agent_dir if agent_dir is not None else paths.agent_dir(), "APPEND_SYSTEM.md")


def resolve_prompt_input(value: str | None) -> str | None:
    """A ``--system-prompt``-style value: the contents of the file it names, or the text itself."""
    if not value:
        return None
    try:
        if os.path.isfile(value):
            text = _read_text(value)
            return text if text is not None else value
    except (OSError, ValueError):  # a long text or one with NUL bytes is not a path
        pass
    return value


# ---------------------------------------------------------------------------------------------
# The prompt
# ---------------------------------------------------------------------------------------------
def default_guidelines(tool_names: Iterable[str]) -> list[str]:
    """Guidelines that follow from which built-in tools are present."""
    names = set(tool_names)
    out: list[str] = []
    explorers = names & {"grep", "find", "ls"}
    if "bash" in names and not explorers:
        out.append("Use bash for file operations such as ls, rg and find")
    elif "bash" in names:
        out.append("For exploring files, prefer the grep/find/ls tools to bash: they are faster and respect "
                   ".gitignore")
    if "read" in names:
        out.append("Look at files with read rather than cat or sed")
    if "edit" in names:
        out.append("Use edit for targeted changes; the old text has to match the file exactly")
    if "write" in names:
        out.append("Use write only to create files or to replace a whole file")
    if "edit" in names or "write" in names:
        out.append("When you describe what you changed, write it as plain text; do not use cat or bash to "
                   "show it")
    return out


def _base_prompt(tools: Sequence[tuple[str, str]], guidelines: Sequence[str] | None) -> str:
    names = [name for name, _ in tools]
    tool_lines = "\n".join(f"- {name}: {desc or name}" for name, desc in tools) if tools else "(none)"
    merged: list[str] = []
    for g in list(guidelines if guidelines is not None else default_guidelines(names)) + list(ALWAYS_GUIDELINES):
        g = g.strip()
        if g and g not in merged:
            merged.append(g)
    guideline_lines = "\n".join(f"- {g}" for g in merged)
    return (
        "You are pisces, an expert coding assistant that works as a coding agent. You help people by reading "
        "files, running commands, editing code and writing new files.\n"
        "\n"
        "Available tools:\n"
        f"{tool_lines}\n"
        "\n"
        "Depending on the project, other custom tools may be available besides these.\n"
        "\n"
        "Guidelines:\n"
        f"{guideline_lines}"
    )


def build_system_prompt(
    cwd: str,
    *,
    tools: Sequence[tuple[str, str]] = (),
    guidelines: Sequence[str] | None = None,
    agent_dir: str | None = None,
    custom_prompt: str | None = None,
    append: str | None = None,
    context_files: bool | Sequence[tuple[str, str]] = True,
    now: _dt.datetime | _dt.date | None = None,
    skills: str = "",
) -> str:
    """The system prompt for a session in ``cwd``.

    ``tools`` are (name, one-line description) pairs; ``guidelines`` the bullets for them (None: derived
    from the built-in tool names). ``custom_prompt`` (text or a file path; default SYSTEM.md) replaces the
    base prompt; ``append`` (text or a file path; default APPEND_SYSTEM.md) follows it. ``context_files``
    is True to discover AGENTS.md/CLAUDE.md files, False for none, or the (path, content) pairs to use.
    ``skills`` is the skills section (pisces.core.resources.skills.format_skills_for_prompt), placed after the context
    files. ``now`` fixes the date (default: today in UTC)."""
    agent_dir = agent_dir if agent_dir is not None else paths.agent_dir()

    base = resolve_prompt_input(custom_prompt)
    if base is None:
        found = discover_system_prompt_file(cwd, agent_dir)
        base = _read_text(found) if found else None
    prompt = base if base else _base_prompt(tools, guidelines)

    extra = resolve_prompt_input(append)
    if extra is None:
        found = discover_append_prompt_file(cwd, agent_dir)
        extra = _read_text(found) if found else None
    if extra:
        prompt += "\n\n" + extra

    if context_files is True:
        files = load_context_files(cwd, agent_dir)
    elif context_files is False or context_files is None:
        files = []
    else:
        files = list(context_files)
    if files:
        prompt += "\n\n# Project Context\n\nInstructions and conventions for this project:\n\n"
        for path, content in files:
            prompt += f"## {path}\n\n{content}\n\n"
    prompt += skills

    if now is None:
        now = _dt.datetime.now(_dt.timezone.utc)
    elif isinstance(now, _dt.datetime) and now.tzinfo is not None:
        now = now.astimezone(_dt.timezone.utc)
    day = now.date() if isinstance(now, _dt.datetime) else now
    prompt += f"\nCurrent date: {day.isoformat()}"
    prompt += f"\nCurrent working directory: {cwd.replace(os.sep, '/')}"
    return prompt
