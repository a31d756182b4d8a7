"""The web mode's port: a configured one, or a stable one derived from the project's directory.

A browser keeps its device key in the storage of one origin (scheme, host and port), so a paired browser
finds the UI again after a restart only if pisces comes back on the same port. Without ``--port`` or the
``web.port`` setting, the port is derived from the project's real path: ``candidates(cwd)`` yields
``ATTEMPTS`` ports in ``[LOW, HIGH)``, the same ones in the same order on every run (sha256 of the path
and the attempt number), so a port taken by another program moves pisces to the same alternate each time.

Guarantees: deterministic (no clock, no randomness, no environment but the path); every port is in
``[LOW, HIGH)``, below Linux's ephemeral range (32768-60999) so outgoing connections are not given it.
"""

from __future__ import annotations

import hashlib
import os
from typing import Any, Iterator

LOW = 20000
HIGH = 30000
ATTEMPTS = 8


def candidates(cwd: str) -> Iterator[int]:
    """The project's ports, first choice first (distinct, ``ATTEMPTS`` of them)."""
    path = os.path.realpath(cwd).encode("utf-8", "surrogateescape")
    seen: set[int] = set()
    i = 0
    while len(seen) < ATTEMPTS:
        digest = hashlib.sha256(path + b"\0" + str(i).encode()).digest()
        port = LOW + int.from_bytes(digest[:4], "big") % (HIGH - LOW)
        i += 1
        if port not in seen:
            seen.add(port)
            yield port


def configured_port(args: Any, settings: Any) -> int | None:
    """``--port N`` (0: any free port), else the ``web.port`` setting, else None (derive from the project)."""
    if getattr(args, "port", None) is not None:
        return int(args.port)
    value = settings.get("web.port") if settings is not None else None
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 65535:
        return value
    return None
