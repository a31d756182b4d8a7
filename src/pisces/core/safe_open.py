"""Opening, reading and writing files that a repository, a client or the model names, without blocking.

Every place where pisces opens such a path goes through here: the file tools, session files, settings,
models.json, auth.json, context files, SYSTEM.md / APPEND_SYSTEM.md and prompt templates. The rules:

- Only regular files are read or written. The path is ``stat``-ed first (following symbolic links, so a
  link to ``/dev/zero`` counts as the device it points at) and anything else (a FIFO, a character or block
  device, a socket, a directory) is refused with :class:`NotRegularFileError` before it is ever opened:
  opening a FIFO blocks until a writer comes, ``/dev/stdin`` is the RPC client's command stream, and
  ``/dev/zero`` never ends.
- The open itself uses ``O_NONBLOCK | O_NOCTTY``, and the opened descriptor is checked again with
  ``fstat``: a path swapped for a FIFO between the two calls still cannot block or be read.
- Reads are bounded: :func:`read_bytes` refuses a file larger than the caller's limit with
  :class:`FileTooLargeError` (checked on the size and again while reading, for files that grow or that
  report no size, as ``/proc`` files do) and never holds more than the limit in memory.
- :func:`write_atomic` replaces a file through a temporary file in the same directory: written, fsynced,
  given the old file's permission bits, then renamed over the target (symbolic links are followed, so the
  link stays and its target changes). A failed write (a full disk) leaves the original untouched and
  removes the temporary file.

Errors are ``OSError`` subclasses, so callers that already handle ``OSError`` keep working; their text is
a sentence that says what was refused and why.
"""

from __future__ import annotations

import errno
import os
import stat

__all__ = [
    "UnsafeFileError", "NotRegularFileError", "FileTooLargeError", "check_regular", "open_regular",
    "file_kind", "read_bytes", "read_fd", "read_text", "write_atomic", "existing_target", "format_bytes", "private_dir",
    "create_private_file",
    "CONFIG_MAX_BYTES", "TEXT_MAX_BYTES", "SESSION_MAX_BYTES",
]

CONFIG_MAX_BYTES = 16 << 20     # settings.json, models.json, auth.json
TEXT_MAX_BYTES = 4 << 20        # context files, SYSTEM.md, APPEND_SYSTEM.md, prompt templates
SESSION_MAX_BYTES = 1 << 30     # a session file (images make them large; pi stops at 2 GiB)

_READ_CHUNK = 1 << 20
_OPEN_FLAGS = os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)


class UnsafeFileError(OSError):
    """A path pisces will not open as asked. ``str()`` is the whole sentence (no ``[Errno n]`` prefix)."""

    reason = ""  # the refusal without the path ("it is a FIFO (named pipe), not a regular file")

    def __init__(self, code: int, message: str, path: str) -> None:
        super().__init__(code, message, path)
        self.message = message
        if not self.reason:
            self.reason = message

    def __str__(self) -> str:
        return self.message


class NotRegularFileError(UnsafeFileError):
    """The path is a FIFO, a device, a socket or a directory."""

    def __init__(self, path: str, kind: str) -> None:
        code = errno.EISDIR if kind == "a directory" else errno.EINVAL
        self.reason = f"it is {kind}, not a regular file"
        super().__init__(code, f"{path} is {kind}, not a regular file", path)
        self.kind = kind


class FileTooLargeError(UnsafeFileError):
    def __init__(self, path: str, limit: int) -> None:
        self.reason = f"it is larger than {format_bytes(limit)}, the most pisces reads from such a file"
        super().__init__(errno.EFBIG, f"{path} is larger than {format_bytes(limit)}, the most pisces reads "
                                      "from such a file", path)
        self.limit = limit


def format_bytes(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            value = n / size
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.1f} {unit}"
    return f"{n} bytes"


def file_kind(mode: int) -> str:
    """What a non-regular file is, as a phrase ("a FIFO (named pipe)", "a character device", ...)."""
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def check_regular(path: str) -> os.stat_result:
    """``os.stat(path)`` (links followed) when it is a regular file; NotRegularFileError otherwise.
    OSErrors of the stat itself (ENOENT, EACCES, ELOOP, ...) propagate unchanged."""
    st = os.stat(path)
    if not stat.S_ISREG(st.st_mode):
        raise NotRegularFileError(path, file_kind(st.st_mode))
    return st


def open_regular(path: str, flags: int = os.O_RDONLY, max_bytes: int | None = None, mode: int = 0o600) -> int:
    """A descriptor of the regular file ``path``, opened without blocking (see the module docstring).
    ``max_bytes``: refuse a larger file. With ``os.O_CREAT`` in ``flags`` a missing file is created with
    ``mode``. The caller closes the descriptor."""
    try:
        check_regular(path)
    except FileNotFoundError:
        if not flags & os.O_CREAT:
            raise
    fd = os.open(path, flags | _OPEN_FLAGS, mode)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegularFileError(path, file_kind(st.st_mode))
        if max_bytes is not None and st.st_size > max_bytes:
            raise FileTooLargeError(path, max_bytes)
        # O_NONBLOCK was for the open alone; reads and writes of the regular file behave as usual
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_fd(fd: int, path: str, max_bytes: int) -> bytes:
    """Everything left in ``fd``, refusing more than ``max_bytes``."""
    chunks: list[bytes] = []
    total = 0
    while True:
        chunk = os.read(fd, min(_READ_CHUNK, max_bytes + 1 - total))
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        total += len(chunk)
        if total > max_bytes:
            raise FileTooLargeError(path, max_bytes)


def read_bytes(path: str, max_bytes: int) -> bytes:
    """The contents of the regular file ``path``, at most ``max_bytes`` of them (else FileTooLargeError)."""
    fd = open_regular(path, max_bytes=max_bytes)
    try:
        return read_fd(fd, path, max_bytes)
    finally:
        os.close(fd)


def read_text(path: str, max_bytes: int, errors: str = "strict") -> str:
    """:func:`read_bytes` decoded as UTF-8 (``errors`` as for ``bytes.decode``)."""
    return read_bytes(path, max_bytes).decode("utf-8", errors)


# ---------------------------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------------------------
def existing_target(path: str) -> tuple[str, os.stat_result | None]:
    """(the path to replace, its stat or None when it does not exist yet). Symbolic links are followed to
    the file they name, so that replacing it keeps the link; a dangling link names the file it would
    create. An existing target that is not a regular file raises NotRegularFileError."""
    try:
        st = check_regular(path)
    except FileNotFoundError:
        st = None
    real = os.path.realpath(path)
    if st is None:
        return real, None
    try:
        same = os.path.samestat(st, os.stat(real))
    except OSError:
        same = False
    if not same:  # a link that names no path (/proc/self/fd/N to a deleted or unnamed file)
        raise UnsafeFileError(errno.EINVAL, f"{path} cannot be replaced: it does not lead to a named file", path)
    return real, st


_umask: int | None = None


def _current_umask() -> int:
    """The process's umask, read without changing it (``/proc/self/status``), else by setting it back."""
    global _umask
    if _umask is None:
        try:
            with open("/proc/self/status", "rb") as f:
                for line in f:
                    if line.startswith(b"Umask:"):
                        _umask = int(line.split()[1], 8)
                        break
        except (OSError, ValueError):
            pass
        if _umask is None:
            _umask = os.umask(0o022)
            os.umask(_umask)
    return _umask


def write_atomic(path: str, data: bytes, *, mode: int | None = None, new_mode: int | None = None,
                 durable: bool = True) -> str:
    """Replace (or create) the regular file ``path`` with ``data`` atomically; returns the path written
    (the link's target when ``path`` is a symbolic link).

    The new file keeps the old one's permission bits (``mode`` overrides them); a new file gets
    ``new_mode`` (default: 0o666 less the umask, as ``open`` would create it). A file the user may not write
    is refused (EACCES), as an in-place write would be. On any failure the original is left as it was and
    the temporary file is removed; the OSError propagates. ``durable=False`` skips the two fsyncs (file and
    directory) for output that can be made again (an HTML export): the replacement is still all-or-nothing
    for a failed write, but a power cut just after it may lose the new file."""
    target, st = existing_target(path)
    if st is not None and not os.access(target, os.W_OK):
        # a rename would replace a file its owner made read-only: refuse as writing it in place would
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), path)
    directory = os.path.dirname(target) or "."
    if mode is None:
        mode = stat.S_IMODE(st.st_mode) if st is not None else (
            new_mode if new_mode is not None else 0o666 & ~_current_umask())
    base = os.path.basename(target)
    fd = -1
    tmp = ""
    for _attempt in range(100):
        tmp = os.path.join(directory, f".{base[:200]}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o600)
            break
        except FileExistsError:
            continue
    if fd < 0:
        raise FileExistsError(errno.EEXIST, "could not pick a temporary file name", tmp)
    try:
        try:
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            os.fchmod(fd, mode)
            if st is not None and os.geteuid() == 0:  # root edits someone's file: it stays theirs
                try:
                    os.fchown(fd, st.st_uid, st.st_gid)
                except OSError:
                    pass
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    if durable:
        _fsync_dir(directory)
    return target


def _fsync_dir(directory: str) -> None:
    try:
        dfd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(dfd)
    except OSError:
        pass
    finally:
        os.close(dfd)


# ---------------------------------------------------------------------------------------------
# Private directories
# ---------------------------------------------------------------------------------------------
def private_dir(path: str) -> str:
    """Create ``path`` (and its parents) if needed; every directory pisces creates here gets mode 0700 (the
    parents too: ``sessions/`` lists, in its entries' names, every project the user worked in). An existing
    directory is left as it is."""
    missing = []
    current = os.path.abspath(path)
    while not os.path.isdir(current):
        missing.append(current)
        parent = os.path.dirname(current)
        if parent == current:
            break
        current = parent
    for directory in reversed(missing):
        try:
            os.mkdir(directory, 0o700)
        except FileExistsError:
            if not os.path.isdir(directory):
                raise
    return path


def create_private_file(name: str) -> tuple[int, str]:
    """(descriptor, path) of a new file ``name`` in the system's temp directory, mode 0600 (only this user can
    read it), opened for writing. Never follows a link and never reuses an existing file: a name someone
    else created first (a file, a symlink) is an error, so callers pick unguessable names."""
    import tempfile  # noqa: PLC0415 - not needed at start-up

    path = os.path.join(tempfile.gettempdir(), name)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    return os.open(path, flags, 0o600), path
