"""``@`` fuzzy file completion: the project's files and folders ranked for ``@query`` (shown by
``dropdown.AtDropdown`` under the editor).

Guarantees (bounded on any tree): the walk honours ``.gitignore``, ``.ignore`` and git's excludes (the
ripgrep-like walker of the grep/find tools), skips ``.git``, stops after MAX_FILES entries or MAX_WALK_S
seconds, and is cached per directory for CACHE_S seconds; matching is a subsequence match, case-insensitive,
ranked by a basename hit, consecutive characters and word starts, then by shorter paths; at most SHOWN
matches are kept.
"""

from __future__ import annotations

import os
import time

MAX_FILES = 20_000
MAX_WALK_S = 1.0
CACHE_S = 10.0
SHOWN = 50
_cache: dict[str, tuple[float, list[str]]] = {}


def project_files(cwd: str) -> list[str]:
    """Paths relative to ``cwd`` (directories end with ``/``), bounded, cached for a few seconds."""
    hit = _cache.get(cwd)
    now = time.monotonic()
    if hit is not None and now - hit[0] < CACHE_S:
        return hit[1]
    from pisces.core.tools._walk import Walker  # noqa: PLC0415 - the first @ completion

    out: list[str] = []
    walker = Walker(cwd)
    for i, (path, is_dir) in enumerate(walker.walk(include_dirs=True)):
        rel = os.path.relpath(path, cwd)
        if rel == ".git" or rel.startswith(".git" + os.sep) or f"{os.sep}.git{os.sep}" in rel:
            continue
        out.append(rel + "/" if is_dir else rel)
        if len(out) >= MAX_FILES or (i % 256 == 0 and time.monotonic() - now > MAX_WALK_S):
            break
    _cache[cwd] = (now, out)
    return out


def score(query: str, path: str) -> float | None:
    """How well ``path`` matches ``query`` (higher is better), None when it does not."""
    q, p = query.lower(), path.lower()
    if not q:
        return -len(p) * 0.1
    total = 0.0
    at = -1
    prev = -2
    for ch in q:
        i = p.find(ch, at + 1)
        if i < 0:
            return None
        if i == prev + 1:
            total += 5
        if i == 0 or p[i - 1] in "/_-. ":
            total += 3
        prev = at = i
    base = p.rstrip("/").rsplit("/", 1)[-1]
    if base.startswith(q):
        total += 30
    elif q in base:
        total += 20
    elif q in p:
        total += 10
    return total - len(p) * 0.1


def matches(query: str, paths: list[str]) -> list[str]:
    scored = [(s, p) for p in paths if (s := score(query, p)) is not None]
    scored.sort(key=lambda sp: (-sp[0], sp[1]))
    return [p for _, p in scored[:SHOWN]]
