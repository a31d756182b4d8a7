"""A custom theme file reloaded when it changes, as pi does, without polling.

There is no timer: ``check`` is called when the TUI draws a frame (a key, a resize, an event from the host),
and looks at the file's stat at most every CHECK_S. An idle UI therefore wakes up zero times a second; a
theme saved while nothing happens applies with the next key. A change (size, mtime or inode: an editor that
saves by renaming counts) is read and resolved; a valid theme becomes the palette of every row drawn from then
on (rows already in the scrollback keep their colours), an invalid one is reported once per change and the
theme in use stays.
"""

from __future__ import annotations

import os
import time
from typing import Callable

from pisces.modes.tui import theme

CHECK_S = 0.25


def _stamp(path: str) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_ino, st.st_mtime_ns, st.st_size


class ThemeWatch:
    def __init__(self, path: str, report: Callable[[str], None]) -> None:
        self.path = path
        self.report = report
        self.stamp = _stamp(path)
        self.checked = time.monotonic()

    def check(self) -> bool:
        """True when the theme changed and was applied (the caller redraws its live region)."""
        now = time.monotonic()
        if now - self.checked < CHECK_S:
            return False
        self.checked = now
        stamp = _stamp(self.path)
        if stamp == self.stamp:
            return False
        self.stamp = stamp
        if stamp is None:
            self.report(f"theme: {self.path} is gone; the theme in use stays")
            return False
        try:
            colors = theme.resolve(theme.read_theme_file(self.path))
        except theme.ThemeError as exc:
            self.report(f"theme: {exc}; the theme in use stays")
            return False
        theme.apply(colors)
        return True
