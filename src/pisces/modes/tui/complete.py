"""Tab completion of a word in the editor: ``@path`` (files for the prompt) and plain paths. Bounded: one
directory is listed, at most 200 names are kept."""

from __future__ import annotations

import os

LIMIT = 200


def complete_word(word: str, cwd: str) -> list[str]:
    """Completions of ``word`` (each a whole replacement for it), sorted; directories end with ``/``."""
    at = word.startswith("@")
    path = word[1:] if at else word
    if not at and "/" not in path and not path.startswith("."):
        return []
    head, tail = os.path.split(path)
    folder = os.path.join(cwd, os.path.expanduser(head)) if head else cwd
    out: list[str] = []
    try:
        with os.scandir(folder) as it:
            for entry in it:
                if entry.name.startswith(tail) and (tail.startswith(".") or not entry.name.startswith(".")):
                    name = os.path.join(head, entry.name) + ("/" if entry.is_dir() else "")
                    out.append(("@" if at else "") + name)
                    if len(out) >= LIMIT:
                        break
    except OSError:
        return []
    return sorted(out)


def command_hint(text: str, usage: dict[str, str]) -> str:
    """While a known ``/command`` is being typed (its name, then its arguments on the same line): the command
    and what it takes, e.g. ``/compact — compact the context (/compact [instructions])``."""
    if not text.startswith("/") or "\n" in text:
        return ""
    name = text.split(" ", 1)[0]
    return f"{name} — {usage[name]}" if usage.get(name) else ""
