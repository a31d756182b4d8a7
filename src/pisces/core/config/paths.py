"""Where pisces keeps its configuration: the global agent dir and a project's ``.pisces`` dir."""

from __future__ import annotations

import os

AGENT_DIR_ENV = "PISCES_CODING_AGENT_DIR"
PI_AGENT_DIR_ENV = "PI_CODING_AGENT_DIR"  # pi's name, read when pisces' own is unset (pi's tests, pi-acp)
SESSION_DIR_ENV = "PISCES_CODING_AGENT_SESSION_DIR"
PI_SESSION_DIR_ENV = "PI_CODING_AGENT_SESSION_DIR"
CONFIG_DIR_NAME = ".pisces"


def env_value(name: str, pi_name: str) -> str | None:
    """``$name``, or pi's ``$pi_name`` when pisces' own variable is unset or empty."""
    return os.environ.get(name) or os.environ.get(pi_name) or None


def agent_dir() -> str:
    """``$PISCES_CODING_AGENT_DIR``, else ``$PI_CODING_AGENT_DIR`` (with ``~`` expanded), else
    ``~/.pisces/agent``."""
    env = env_value(AGENT_DIR_ENV, PI_AGENT_DIR_ENV)
    if env:
        return os.path.expanduser(env)
    return os.path.join(os.path.expanduser("~"), CONFIG_DIR_NAME, "agent")


def project_config_dir(cwd: str) -> str:
    """The per-project configuration directory, ``<cwd>/.pisces``."""
    return os.path.join(cwd, CONFIG_DIR_NAME)


def display_path(path: str) -> str:
    """``path`` with the home directory shortened to ``~``, for messages meant for people."""
    home = os.path.expanduser("~")
    if home and home != "/" and (path == home or path.startswith(home + os.sep)):
        return "~" + path[len(home):]
    return path


def docs_dir() -> str:
    """Absolute path of pisces' documentation directory (the ``docs`` folder next to ``src``)."""
    here = os.path.dirname(os.path.abspath(__file__))  # .../src/pisces/core
    return os.path.normpath(os.path.join(here, "..", "..", "..", "docs"))


def project_root(cwd: str) -> str:
    """Where project discovery stops: the nearest directory from ``cwd`` up that holds ``.git`` (a directory
    or a worktree's file) owned by the user, not going above the home directory nor through a directory
    anyone may write (the system temp directory); else ``cwd`` itself. Agents, skills and context files are
    looked for between ``cwd`` and this root, never in a shared parent, whose files would otherwise apply to
    every project below it (a ``.git`` planted there by someone else does not make it a root either)."""
    start = os.path.abspath(cwd)
    home = os.path.abspath(os.path.expanduser("~"))
    current = start
    while True:
        if current == home and current != start:
            return start  # the home directory is the user's, not a project above cwd
        try:
            shared = current != start and bool(os.stat(current).st_mode & 0o002)
        except OSError:
            shared = True
        if shared:
            return start  # a directory anyone may write is nobody's project
        try:
            owned = os.lstat(os.path.join(current, ".git")).st_uid == os.getuid()
        except OSError:
            owned = None
        if owned is not None:
            return current if owned else start
        parent = os.path.dirname(current)
        if parent == current:
            return start
        current = parent


def dirs_to_root(cwd: str) -> list[str]:
    """``cwd`` and each parent up to ``project_root(cwd)``, nearest first."""
    root = project_root(cwd)
    out, current = [], os.path.abspath(cwd)
    while True:
        out.append(current)
        parent = os.path.dirname(current)
        if current == root or parent == current:
            return out
        current = parent
