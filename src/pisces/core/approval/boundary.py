"""The write boundary: where a write-tier tool call may land without being judged as a command.

A call of a ``write``-tier tool (``write``, ``edit``, an extension or host tool that declares ``write``) whose
primary argument is a path is ``write`` tier only when the path, resolved, is inside the workspace (the
session's working directory, or the worktree a subagent owns) and is not a protected path. Otherwise it is
``exec`` tier: asked wherever the mode asks for commands, refused where nobody can be asked.

Protected, wherever they are:
* pisces' agent directory (the global ``settings.json``, ``trust.json``, ``extensions/``, ``agents/``, ...);
* inside the workspace, every path with a component named as another tool's or pisces' configuration or a
  version-control directory (``PROTECTED_NAMES``): ``.pisces``, ``.pi``, ``.claude``, ``.git``, ... A write
  there changes what decides or runs the next call (a project's approval rules, a ``.git/config`` with
  ``core.fsmonitor``, an extension loaded at the next reload).

Resolution: ``~`` expanded, joined to the working directory, and resolved with ``os.path.realpath`` (every
symbolic link of the existing part of the path followed, ``..`` applied after the link it follows). Both
the lexical form and the resolved form must be inside and unprotected, so a link named ``docs`` that points
at ``.git`` is judged as ``.git``. What this cannot see: a link created *after* the judgment and before the
write (a race with a command the person approved), and hard links (a hard link inside the workspace to a
file outside it is written as the workspace file it is); the OS sandbox is what confines commands.
"""

from __future__ import annotations

import os
from typing import Any

# Directory (or file) names that hold configuration of pisces or of another agent, or version-control
# internals. A write to any path with one of these components is outside the boundary.
PROTECTED_NAMES = frozenset({
    ".pisces", ".pi", ".omp", ".claude", ".codex", ".gemini", ".cursor", ".windsurf", ".continue", ".aider",
    ".git", ".hg", ".svn", ".jj", ".bzr", ".sl", ".pijul", "_darcs", ".fossil",
    ".envrc", ".direnv", ".vscode", ".idea", ".devcontainer",
    # what a shell, git, ssh or a package manager reads and runs from a home directory (the workspace can be one)
    ".bashrc", ".bash_profile", ".bash_login", ".bash_logout", ".profile", ".zshrc", ".zprofile", ".zshenv",
    ".zlogin", ".inputrc", ".ssh", ".gnupg", ".gitconfig", ".config", ".npmrc", ".yarnrc", ".yarnrc.yml",
    ".pypirc", ".netrc", ".docker", ".kube", ".aws", ".azure", ".local",
})


def _resolve(path: str, cwd: str) -> tuple[str, str]:
    """(the lexical absolute path, the resolved absolute path)."""
    lexical = os.path.normpath(os.path.join(cwd, os.path.expanduser(path.strip())))
    try:
        real = os.path.realpath(lexical)
    except (OSError, ValueError):
        real = lexical
    return lexical, real


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _protected_component(path: str, root: str) -> str | None:
    rel = os.path.relpath(path, root)
    for part in rel.split(os.sep):
        if part in PROTECTED_NAMES or part.lower() in PROTECTED_NAMES:
            return part
    return None


def crossing(path: str, cwd: str, workspace: str, agent_dir: str | None) -> str | None:
    """Why a write to ``path`` (as the model gave it, relative to ``cwd``) leaves the boundary of
    ``workspace``, or None when it stays inside."""
    if not isinstance(path, str) or not path.strip() or "\0" in path:
        return "the path is empty or not a valid path"
    lexical, real = _resolve(path, cwd)
    roots = {os.path.normpath(os.path.abspath(workspace))}
    try:
        roots.add(os.path.realpath(workspace))
    except (OSError, ValueError):
        pass
    protected_dirs = []
    if agent_dir:
        protected_dirs.append(os.path.normpath(os.path.abspath(agent_dir)))
        try:
            protected_dirs.append(os.path.realpath(agent_dir))
        except (OSError, ValueError):
            pass
    for form in (lexical, real):
        root = next((r for r in roots if _inside(form, r)), None)
        in_agent_dir = any(_inside(form, pdir) for pdir in protected_dirs)
        # the agent directory is protected unless the workspace is itself inside it (a subagent's worktree)
        if in_agent_dir and (root is None or any(_inside(pdir, root) for pdir in protected_dirs)):
            return f"{real} is in pisces' agent directory (its settings, trust store and extensions)"
        if root is None:
            return f"{real} is outside the workspace {sorted(roots)[0]}"
        part = _protected_component(form, root)
        if part is not None:
            return f"{real} is a protected path ({part}: configuration or version-control internals)"
    return None


def judge(tool_name: str, tier: str, args: dict[str, Any], cwd: str, workspace: str,
          agent_dir: str | None) -> tuple[str, str | None]:
    """(the tier to judge the call by, why it crossed the boundary or None). Only ``write``-tier calls with a
    path argument are looked at; every other call keeps its tier."""
    from pisces.core.approval.rules import primary  # noqa: PLC0415 - rules is loaded lazily with the policy

    if tier != "write":
        return tier, None
    kind, value = primary(tool_name, args)
    if kind != "path" or value is None:
        return tier, None
    why = crossing(value, cwd, workspace, agent_dir)
    return ("exec", why) if why is not None else (tier, None)


def resolved_path(tool_name: str, args: dict[str, Any], cwd: str) -> str | None:
    """The resolved absolute path a write-tier call names, or None."""
    from pisces.core.approval.rules import primary  # noqa: PLC0415 - rules is loaded lazily with the policy

    kind, value = primary(tool_name, args)
    if kind != "path" or not value:
        return None
    return _resolve(value, cwd)[1]


def command_reaches(command: str, tree: str, workspace: str) -> str | None:
    """The first path a command names (an absolute path, ``~/...``, or the value of ``opt=/path``) that lies
    inside ``tree`` (the user's working tree) but outside ``workspace`` (an isolated subagent's worktree), or
    None. A command that names the user's tree from an isolated worktree is not the delegated work, whatever
    it does there; what it reaches without naming it (a variable, a path built at run time) only an OS
    sandbox would stop."""
    from pisces.core.approval import shell  # noqa: PLC0415 - loaded lazily with the policy

    tree_real = {os.path.normpath(os.path.abspath(tree)), os.path.realpath(tree)}
    work_real = {os.path.normpath(os.path.abspath(workspace)), os.path.realpath(workspace)}
    for segment in shell.segments(command)[:512]:
        for word in shell.words(segment)[:512]:
            for piece in [word, *word.split("=")[1:], *word.split(":")[1:]]:
                if not piece.startswith(("/", "~")):
                    continue
                lexical, real = _resolve(piece, workspace)
                for form in (lexical, real):
                    if any(_inside(form, t) for t in tree_real) and not any(_inside(form, w) for w in work_real):
                        return real
    return None
