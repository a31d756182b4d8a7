"""``gc_paused()``: no cyclic garbage collection while a burst of long-lived objects is built.

Loading a vendor SDK (thousands of classes) or a long session file (hundreds of thousands of objects)
creates objects that all stay alive, yet each allocation threshold crossed starts a collection that walks
them again: 10-15% of an SDK's import time, a quarter of a long session's load time. Reference counting
still frees everything as usual meanwhile; only the search for reference cycles waits. It lives in the
lowest layer so that every layer may use it.
"""

from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Iterator


@contextmanager
def gc_paused() -> Iterator[None]:
    """Disable the cyclic collector for the block; re-enable it after only if it was enabled before."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
