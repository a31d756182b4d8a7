"""A lock shared between processes for one small file (``settings.json``, ``trust.json``).

The protocol is the one pi uses (proper-lockfile): the lock is the directory ``<file>.lock``, made with
``mkdir`` (atomic on every local file system); whoever made it holds the lock and removes it when done.
A lock directory older than ``stale`` seconds belongs to a process that died while holding it and is
taken over. So pi and pisces pointed at the same agent directory also respect each other's locks.

Held only around a read-modify-write of a small file, so waiting for it is short. The waiting never gives up
on a clock of its own, because a busy machine can stretch any such clock and a setting the person chose would
be lost: it waits while the holder is alive, which the holder shows by refreshing the lock's time every
``stale / 2`` seconds while it holds it (as proper-lockfile does), and takes the lock over once it has not been
refreshed for ``stale`` seconds (its holder died or is stopped). So the wait is bounded by the holder's own
write plus, at worst, ``stale`` seconds. A caller may still pass ``timeout`` (then :class:`LockTimeout`, with a
sentence saying what to do).
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

__all__ = ["FileLock", "LockTimeout"]

STALE_S = 10.0  # proper-lockfile's default: a lock not refreshed for this long is abandoned
RETRY_S = 0.02  # pi retries every 20 ms


class LockTimeout(OSError):
    """The lock stayed held by someone else for the whole timeout."""


class FileLock:
    """``with FileLock(path): ...`` holds ``<path>.lock`` for the block."""

    def __init__(self, path: str, *, timeout: float | None = None, stale: float = STALE_S) -> None:
        self.path = path
        self.lock_path = f"{path}.lock"
        self.timeout = timeout
        self.stale = stale
        self._held = False
        self._refreshing: threading.Event | None = None

    def acquire(self) -> None:
        deadline = time.monotonic() + self.timeout if self.timeout is not None else None
        directory = os.path.dirname(self.lock_path) or "."
        os.makedirs(directory, exist_ok=True)
        while True:
            try:
                os.mkdir(self.lock_path, 0o700)
                self._held = True
                self._start_refreshing()
                return
            except FileExistsError:
                pass
            if self._take_over_stale():
                continue
            if deadline is not None and time.monotonic() >= deadline:
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

    def _start_refreshing(self) -> None:
        """Show waiters that the holder is alive: touch the lock every ``stale / 2`` seconds while held."""
        stop = self._refreshing = threading.Event()

        def refresh() -> None:
            while not stop.wait(self.stale / 2):
                try:
                    os.utime(self.lock_path)
                except OSError:
                    return

        threading.Thread(target=refresh, name="pisces-lock-refresh", daemon=True).start()

    def release(self) -> None:
        if self._refreshing is not None:
            self._refreshing.set()
            self._refreshing = None
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
