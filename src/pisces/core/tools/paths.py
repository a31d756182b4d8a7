"""Path handling shared by the file tools: pi's resolution rules, Node-style error texts, and a per-file
queue that serialises writes and edits to the same file."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import re
import unicodedata
from typing import AsyncIterator

_UNICODE_SPACES = re.compile("[\u00a0\u2000-\u200a\u202f\u205f\u3000]")
_AM_PM = re.compile(r" (AM|PM)\.", re.IGNORECASE)
_NARROW_NBSP = "\u202f"


def expand_path(file_path: str) -> str:
    """Drop a leading ``@`` (models copy it from mentions), turn exotic spaces into plain ones, expand ``~``."""
    if file_path.startswith("@"):
        file_path = file_path[1:]
    normalized = _UNICODE_SPACES.sub(" ", file_path)
    if normalized == "~":
        return os.path.expanduser("~")
    if normalized.startswith("~/"):
        return os.path.expanduser("~") + normalized[1:]
    return normalized


def resolve_to_cwd(file_path: str, cwd: str) -> str:
    """An absolute path: ``file_path`` expanded, then taken relative to ``cwd`` unless already absolute.
    ``..`` and ``.`` segments are folded without touching the file system (as Node's path.resolve)."""
    expanded = expand_path(file_path)
    if os.path.isabs(expanded):
        return expanded
    return os.path.normpath(os.path.join(cwd, expanded)) if expanded else os.path.normpath(cwd)


def resolve_read_path(file_path: str, cwd: str) -> str:
    """``resolve_to_cwd``, then the variants macOS screenshots need if the plain path does not exist:
    a narrow no-break space before AM/PM, NFD normalisation, and a curly apostrophe."""
    resolved = resolve_to_cwd(file_path, cwd)
    if os.path.lexists(resolved):
        return resolved
    am_pm = _AM_PM.sub(lambda m: f"{_NARROW_NBSP}{m.group(1)}.", resolved)
    nfd = unicodedata.normalize("NFD", resolved)
    curly = resolved.replace("'", "\u2019")
    nfd_curly = nfd.replace("'", "\u2019")
    for candidate in (am_pm, nfd, curly, nfd_curly):
        if candidate != resolved and os.path.lexists(candidate):
            return candidate
    return resolved


# libuv's names and descriptions, so error texts read as pi's do ("ENOENT: no such file or directory, ...").
_UV_DESCRIPTIONS = {
    errno.ENOENT: "no such file or directory",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.EISDIR: "illegal operation on a directory",
    errno.ENOTDIR: "not a directory",
    errno.EEXIST: "file already exists",
    errno.ELOOP: "too many symbolic links encountered",
    errno.ENAMETOOLONG: "name too long",
    errno.EROFS: "read-only file system",
    errno.ENOSPC: "no space left on device",
    errno.EBUSY: "resource busy or locked",
    errno.EMFILE: "too many open files",
    errno.EINVAL: "invalid argument",
    errno.EIO: "i/o error",
    errno.ETXTBSY: "text file is busy",
    errno.EFBIG: "file too large",
    errno.EDQUOT: "disk quota exceeded",
}


def error_code(exc: BaseException) -> str:
    """``ENOENT``-style code of an OSError (``EUNKNOWN`` when there is none)."""
    num = getattr(exc, "errno", None)
    if isinstance(num, int) and num in errno.errorcode:
        return errno.errorcode[num]
    return "EUNKNOWN"


def node_error_message(exc: BaseException, syscall: str, path: str | None = None) -> str:
    """The message Node gives for a failed fs call: ``CODE: description, syscall 'path'``."""
    if not isinstance(exc, OSError):
        return str(exc)
    num = exc.errno if isinstance(exc.errno, int) else 0
    code = error_code(exc)
    desc = _UV_DESCRIPTIONS.get(num) or (os.strerror(num).lower() if num else str(exc))
    where = f"{syscall} '{path}'" if path is not None else syscall
    return f"{code}: {desc}, {where}"


def refusal_message(verb: str, display_path: str, exc: OSError) -> str:
    """The tool error for a path pisces refuses (a FIFO, a device, a socket, a file over a size limit)."""
    kind = getattr(exc, "kind", None)
    if kind:
        does = "searches" if verb == "search" else f"{verb}s"
        return (f"Cannot {verb} {display_path}: it is {kind}, not a regular file (pisces only {does} regular "
                "files: a FIFO or a device could block or never end)")
    return f"Cannot {verb} {display_path}: {exc}"


def not_regular_message(verb: str, display_path: str, exc: OSError, syscall: str, path: str | None = None
                        ) -> str:
    """A path that is not a regular file: Node's EISDIR text for ``syscall`` on a directory (as pi reports
    it), :func:`refusal_message` for a FIFO, a device or a socket."""
    if getattr(exc, "kind", None) == "a directory":
        return node_error_message(exc, syscall, path)  # the error carries EISDIR
    return refusal_message(verb, display_path, exc)


_WRITE_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO}


def write_error_message(exc: OSError, path: str, existed: bool) -> str:
    """A failed atomic replace: Node's text for the call that failed, and what became of the file."""
    syscall = "write" if exc.errno in _WRITE_ERRNOS else "open"
    text = node_error_message(exc, syscall, path)
    if syscall == "write":
        text += " (the file was left as it was)" if existed else " (nothing was written)"
    return text


_mutation_locks: dict[str, tuple[asyncio.Lock, int]] = {}


def _mutation_key(path: str) -> str:
    resolved = os.path.abspath(path)
    try:
        return os.path.realpath(resolved, strict=True)
    except OSError:
        return resolved


@contextlib.asynccontextmanager
async def file_mutation_queue(path: str) -> AsyncIterator[None]:
    """Serialise mutations of one file (writes and edits running in parallel tool calls); different
    files still proceed in parallel."""
    key = _mutation_key(path)
    lock, users = _mutation_locks.get(key, (None, 0))
    if lock is None:
        lock = asyncio.Lock()
    _mutation_locks[key] = (lock, users + 1)
    try:
        async with lock:
            yield
    finally:
        lock_now, users_now = _mutation_locks[key]
        if users_now <= 1:
            del _mutation_locks[key]
        else:
            _mutation_locks[key] = (lock_now, users_now - 1)


__all__ = ["expand_path", "resolve_to_cwd", "resolve_read_path", "node_error_message", "error_code",
           "refusal_message", "not_regular_message", "write_error_message", "file_mutation_queue"]
