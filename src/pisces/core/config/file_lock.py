"""A lock shared between processes for one small file (``settings.json``, ``trust.json``).

The protocol is the one pi uses (proper-lockfile): the lock is the directory ``<file>.lock``, made with
``mkdir`` (atomic on every local file system); whoever made it holds the lock and removes it when done.
A lock directory older than ``stale`` seconds belongs to a process that died while holding it and is
taken over. So pi and pisces pointed at the same agent directory also respect each other's locks.

Held only around a read-modify-write of a small file, so waiting for it is short: ``timeout`` bounds it,
and a lock that cannot be had in that time raises :class:`LockTimeout` with a sentence saying what to do.
"""

from __future__ import annotations

import os
import time
from typing import Any

__all__ = ["FileLock", "LockTimeout"]

STALE_S = 10.0  # proper-lockfile's default: a lock not refreshed for this long is abandoned
RETRY_S = 0.02  # pi retries every 20 ms


class LockTimeout(OSError):
    """The lock stayed held by someone else for the whole timeout."""


class FileLock:
    """``with FileLock(path): ...`` holds ``<path>.lock`` for the block."""

    def __init__(self, path: str, *, timeout: float = 1.0, stale: float = STALE_S) -> None:
        self.path = path
        self.lock_path = f"{path}.lock"
        self.timeout = timeout
        self.stale = stale
        self._held = False

    def acquire(self) -> None:
        deadline = time.monotonic() + self.timeout
        directory = os.path.dirname(self.lock_path) or "."
        os.makedirs(directory, exist_ok=True)
        while True:
            try:
                os.mkdir(self.lock_path, 0o700)
                self._held = True
                return
            except FileExistsError:
                pass
            if self._take_over_stale():
                continue
            if time.monotonic() >= deadline:
                raise LockTimeout(f"{self.path} is locked by another process ({self.lock_path} exists; remove it "
                                  "if no pisces or pi process is running)")
            time.sleep(RETRY_S)

    def _take_over_stale(self) -> bool:
        """Remove a lock left by a process that died holding it. True when the caller should retry at once."""
        try:
            age = time.time() - os.stat(self.lock_path).st_mtime
        except FileNotFoundError:
            return True  # released meanwhile
        except OSError:
            return False
        if age <= self.stale:
            return False
        try:
            os.rmdir(self.lock_path)
        except FileNotFoundError:
            pass
        except OSError:
            return False  # not a directory we can remove: wait, then report
        return True

    def release(self) -> None:
        if self._held:
            self._held = False
            try:
                os.rmdir(self.lock_path)
            except OSError:
                pass

    def __enter__(self) -> "FileLock":
        self.acquire()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()
