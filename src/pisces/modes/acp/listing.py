"""Finding and listing the session files ACP names by id (the same pi-format files every mode uses).

Blocking (directory scans, file reads): called on a worker thread.
"""

from __future__ import annotations

import os
from typing import Any

from acp import RequestError
from acp.schema import ListSessionsResponse, SessionInfo

from pisces.core.config.paths import agent_dir
from pisces.core.config.settings import Settings
from pisces.core.store import list_sessions, resolve_session_dir
from pisces.modes.acp.sessions import title_of

PAGE_SIZE = 50


def check_cwd(cwd: str) -> None:
    if not os.path.isabs(cwd):
        raise RequestError.invalid_params({"cwd": cwd, "reason": "cwd must be an absolute path"})
    if not os.path.isdir(cwd):
        raise RequestError.invalid_params({"cwd": cwd, "reason": "cwd is not a directory"})


def session_directory(cwd: str, explicit: str | None) -> str:
    """Where sessions of ``cwd`` live: --session-dir, $PISCES_CODING_AGENT_SESSION_DIR, settings, default."""
    return resolve_session_dir(cwd, explicit, Settings(agent_dir(), cwd).session_dir)


def find_session_file(session_id: str, cwd: str, explicit_dir: str | None) -> str | None:
    """The file of the session with exactly this id: first among ``cwd``'s sessions, then anywhere."""
    for directory in (session_directory(cwd, explicit_dir), None):
        for info in list_sessions(directory):
            if info.id == session_id:
                return info.path
    return None


def list_page(cwd: str | None, cursor: str | None, explicit_dir: str | None) -> ListSessionsResponse:
    if cwd is not None:
        check_cwd(cwd)
        infos = [i for i in list_sessions(session_directory(cwd, explicit_dir)) if i.cwd == cwd]
    else:
        infos = list_sessions(explicit_dir)
    try:
        start = int(cursor) if cursor else 0
    except ValueError:
        start = -1
    if start < 0 or start > len(infos):
        raise RequestError.invalid_params({"cursor": cursor, "reason": "not a cursor this agent gave out"})
    page = infos[start:start + PAGE_SIZE]
    more = start + PAGE_SIZE < len(infos)
    return ListSessionsResponse(
        sessions=[_info(i, title_of) for i in page], next_cursor=str(start + PAGE_SIZE) if more else None)


def _info(info: Any, title_of: Any) -> SessionInfo:
    name = info.name if isinstance(info.name, str) else None
    return SessionInfo(session_id=info.id, cwd=info.cwd, title=name or title_of(info.firstMessage),
                       updated_at=info.modified)
