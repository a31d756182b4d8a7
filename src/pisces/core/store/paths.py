"""Where session files live and what they are called (pi's layout under pisces' names)."""

from __future__ import annotations

import os
import re

__all__ = [
    "AGENT_DIR_ENV",
    "SESSION_DIR_ENV",
    "agent_dir",
    "sessions_root",
    "encode_cwd",
    "default_session_dir",
    "resolve_session_dir",
    "session_file_name",
]

from pisces.core.config.paths import AGENT_DIR_ENV, PI_SESSION_DIR_ENV, SESSION_DIR_ENV, env_value
from pisces.core.config.paths import agent_dir as _agent_dir

_SEPARATORS = re.compile(r"[/\\:]")


def _expand(path: str) -> str:
    return os.path.expanduser(path)


def agent_dir() -> str:
    """``$PISCES_CODING_AGENT_DIR`` (else pi's ``$PI_CODING_AGENT_DIR``; ``~`` expanded) or ``~/.pisces/agent``."""
    return _agent_dir()


def sessions_root() -> str:
    """``<agentDir>/sessions``: one sub-directory per working directory."""
    return os.path.join(agent_dir(), "sessions")


def encode_cwd(cwd: str) -> str:
    """``/tmp/a/b`` -> ``--tmp-a-b--``: the leading separator dropped, every ``/ \\ :`` made ``-``."""
    stripped = cwd[1:] if cwd[:1] in ("/", "\\") else cwd
    return f"--{_SEPARATORS.sub('-', stripped)}--"


def default_session_dir(cwd: str) -> str:
    """``<agentDir>/sessions/--<cwd>--``. Not created here; the store creates it on first write."""
    return os.path.join(sessions_root(), encode_cwd(cwd))


def resolve_session_dir(cwd: str, explicit: str | None = None, settings_session_dir: str | None = None) -> str:
    """The session directory, by precedence: ``--session-dir``, ``$PISCES_CODING_AGENT_SESSION_DIR`` (else
    pi's ``$PI_CODING_AGENT_SESSION_DIR``), settings ``sessionDir``, then the per-cwd default. Relative paths
    resolve against ``cwd``."""
    for candidate in (explicit, env_value(SESSION_DIR_ENV, PI_SESSION_DIR_ENV), settings_session_dir):
        if candidate:
            return os.path.abspath(os.path.join(cwd, _expand(candidate)))
    return default_session_dir(cwd)


def session_file_name(iso_timestamp: str, session_id: str) -> str:
    """``2026-11-21T22:36:42.990Z`` + id -> ``2026-11-21T22-36-42-990Z_<id>.jsonl``."""
    return f"{iso_timestamp.replace(':', '-').replace('.', '-')}_{session_id}.jsonl"
