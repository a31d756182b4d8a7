"""Checking a path before it becomes the session file (``--session PATH``, ``switch_session``).

The session file is appended to for as long as the session lives, so a path is refused up front, with a
sentence saying why, when writing there would destroy something or lose every message: a directory, a
file that cannot be read or written, a path whose directory cannot be created or written, and an
existing file that holds something other than a session (a README, a symlink to notes). An empty file, or
a path that does not exist yet, is fine: the session is written there at its first reply, as in pi.
"""

from __future__ import annotations

import os
import stat

from pisces.core.safe_open import UnsafeFileError, file_kind

from .load import LoadedSession, load_session_file

__all__ = ["SessionFileError", "load_target"]


class SessionFileError(ValueError):
    """A path that cannot be the session file; the text says why. Nothing was changed."""


def _refuse(path: str, why: str) -> SessionFileError:
    return SessionFileError(f"Cannot use {path} as the session file: {why}")


def load_target(path: str) -> LoadedSession | None:
    """Load ``path`` to become the session file. ``None``: it does not exist yet (a new session will be
    written there). Raises :class:`SessionFileError` when it must not be used."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        _check_creatable(path)
        return None
    except NotADirectoryError:
        raise _refuse(path, "a part of its directory is a file") from None
    except OSError as exc:
        raise _refuse(path, exc.strerror or str(exc)) from None
    if stat.S_ISDIR(info.st_mode):
        raise _refuse(path, "it is a directory")
    if not stat.S_ISREG(info.st_mode):  # a FIFO, a device, a socket: never opened (it could block or never end)
        raise _refuse(path, f"it is {file_kind(info.st_mode)}, not a regular file")
    _check_writable(path)
    try:
        loaded = load_session_file(path)
    except UnsafeFileError as exc:  # over the size bound, or swapped for a FIFO since the stat
        raise _refuse(path, exc.reason) from None
    if loaded is None:
        raise _refuse(path, "it cannot be read")
    if loaded.header is None and loaded.has_content:
        raise _refuse(path, "it is not a session file (its first line is not a session header)")
    return loaded


def _check_writable(path: str) -> None:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise _refuse(path, f"it cannot be written ({exc.strerror or exc})") from None
    os.close(fd)


def _check_creatable(path: str) -> None:
    """The file does not exist: its directory must exist (or be creatable) and accept new files."""
    parent = os.path.dirname(path) or "."
    if os.path.isdir(parent):
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            return  # appeared meanwhile, or a dangling symlink: the first write will see what is there
        except OSError as exc:
            raise _refuse(path, f"no file can be created in {parent} ({exc.strerror or exc})") from None
        os.close(fd)
        os.unlink(path)  # created at the first reply, as any new session
        return
    ancestor = parent
    while not os.path.lexists(ancestor):
        up = os.path.dirname(ancestor)
        if up == ancestor:
            break
        ancestor = up
    if not os.path.isdir(ancestor):
        raise _refuse(path, f"{ancestor} is not a directory")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise _refuse(path, f"no directory can be created in {ancestor} (permission denied)")
