"""``rename_session`` and ``delete_session`` (newer pi's names): act on a session file by its path.

Guarantees: only a file whose first line is a pi session header is renamed or deleted; the session this
process has open is renamed through the session (``session_info_changed`` follows) and is never deleted;
a rename of another file appends one ``session_info`` entry to it (pi's way of naming, so pi and every
listing show the new name) and changes nothing else in it.
"""

from __future__ import annotations

import os
from typing import Any

from pisces.core.errors import SessionError
from pisces.core.store import SessionManager, read_session_info


def _session_file(path: Any) -> str:
    if not isinstance(path, str) or not path:
        raise SessionError("'sessionPath' must be the path of a session file (list_sessions gives them)")
    target = os.path.abspath(os.path.expanduser(path))
    if not target.endswith(".jsonl") or not os.path.isfile(target):
        raise SessionError(f"No session file at {target}")
    if read_session_info(target) is None:
        raise SessionError(f"{target} is not a session file (no session header)")
    return target


def _is_current(session: Any, target: str) -> bool:
    current = session.store.get_session_file()
    return bool(current) and os.path.realpath(current) == os.path.realpath(target)


def rename_session(session: Any, path: Any, name: Any) -> dict[str, Any]:
    if not isinstance(name, str) or not name.strip():
        raise SessionError("Session name cannot be empty")
    if path is None or (isinstance(path, str) and session.store.get_session_file()
                        and _is_current(session, os.path.abspath(os.path.expanduser(path)))):
        session.set_session_name(name)
        return {"path": session.store.get_session_file(), "name": name.strip()}
    target = _session_file(path)
    other = SessionManager.open(target)
    try:
        other.append_session_info(name.strip())
    finally:
        other.close()
    return {"path": target, "name": name.strip()}


def delete_session(session: Any, path: Any) -> dict[str, Any]:
    target = _session_file(path)
    if _is_current(session, target):
        raise SessionError("Cannot delete the session that is open: switch to another session first")
    try:
        os.unlink(target)
    except OSError as exc:
        raise SessionError(f"Cannot delete {target}: {exc.strerror or exc}") from None
    return {"path": target, "deleted": True}
