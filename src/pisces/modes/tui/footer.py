"""The footer row: cwd and git branch, session name, model and thinking level, tokens, cost, context %,
approval mode, extension statuses. Reads only what ``get_state``/``get_context_usage`` answered."""

from __future__ import annotations

import os
import time
from typing import Any

from pisces.modes.tui.render import fit, style

BRANCH_RECHECK_S = 2.0  # a directory without a repository is looked at again after this long
_branch: dict[str, tuple[str | None, Any, float, str | None]] = {}  # cwd -> (HEAD path, its stat, when, branch)


def git_branch(cwd: str) -> str | None:
    """The branch checked out in ``cwd``'s repository. Cached: a frame costs one stat of ``.git/HEAD`` (the
    branch read again when it changed), not a walk up the directories."""
    seen = _branch.get(cwd)
    if seen is not None:
        head, stamp, when, branch = seen
        if head is None:
            if time.monotonic() - when < BRANCH_RECHECK_S:
                return branch
        else:
            try:
                if _stamp(head) == stamp:
                    return branch
            except OSError:
                pass
    head, branch = _find_branch(cwd)
    stamp = None
    if head is not None:
        try:
            stamp = _stamp(head)
        except OSError:
            head = None
    if len(_branch) > 64:
        _branch.clear()
    _branch[cwd] = (head, stamp, time.monotonic(), branch)
    return branch


def _stamp(path: str) -> tuple[int, int, int]:
    """What changes when git rewrites HEAD (it renames a new file over it: a new inode)."""
    st = os.stat(path)
    return st.st_ino, st.st_mtime_ns, st.st_size


def _find_branch(cwd: str) -> tuple[str | None, str | None]:
    path = cwd
    for _ in range(40):
        head = os.path.join(path, ".git", "HEAD")
        if os.path.isfile(head):
            try:
                with open(head, encoding="utf-8") as f:
                    ref = f.read(200).strip()
            except OSError:
                return None, None
            return head, (ref.rsplit("/", 1)[-1] if ref.startswith("ref:") else ref[:8])
        parent = os.path.dirname(path)
        if parent == path:
            return None, None
        path = parent
    return None, None


def footer_rows(state: dict[str, Any], usage: dict[str, Any], busy: bool, statuses: dict[str, str],
                width: int) -> list[str]:
    """Two rows: where (cwd, branch, session name, extension statuses), then the model and what it cost."""
    cwd = os.getcwd()
    home = os.path.expanduser("~")
    where = "~" + cwd[len(home):] if cwd.startswith(home) else cwd
    branch = git_branch(cwd)
    parts = [where + (f" ({branch})" if branch else "")]
    if state.get("sessionName"):
        parts.append(str(state["sessionName"]))
    parts.extend(statuses.values())
    first = " · ".join(parts)
    parts = []
    model = state.get("model") or {}
    if model:
        parts.append(f"{model.get('provider')}/{model.get('id')}" + (f" · {state.get('thinkingLevel')}"
                                                                    if state.get("thinkingLevel") else ""))
    parts.append(f"↑{usage['input']} ↓{usage['output']}" + (f" R{usage['cacheRead']}" if usage["cacheRead"] else ""))
    parts.append(f"${usage['cost']:.3f}")
    ctx = state.get("contextUsage") or {}
    if isinstance(ctx, dict) and ctx.get("percent") is not None:
        parts.append(f"ctx {float(ctx['percent']):.0f}%")
    approval = state.get("approval") or state.get("approvalMode")
    if isinstance(approval, dict):
        approval = approval.get("mode")
    if approval:
        parts.append(f"approval {approval}")
    if (state.get("planMode") or {}).get("enabled"):
        parts.append("plan mode")
    if busy:
        parts.insert(0, "●")
    return [fit(style(first, 2), width), fit(style(" · ".join(parts), 2), width)]
