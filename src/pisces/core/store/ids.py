"""Identifiers and timestamps for session files: UUIDv7 session ids, 8-hex entry ids, ISO times."""

from __future__ import annotations

import os
import threading
import time
import uuid
from datetime import datetime, timezone
from typing import Container

__all__ = ["uuid7", "new_entry_id", "iso_now", "iso_from_ms", "iso_to_ms"]

_lock = threading.Lock()
_last_ms = 0
_last_seq = 0


def uuid7(now_ms: int | None = None) -> str:
    """A UUIDv7 string (RFC 9562): 48-bit Unix ms, version 7, 12-bit sequence, variant, 62 random bits.

    Ids made by one process are strictly increasing: within one millisecond the 12-bit ``rand_a``
    field counts up from a random start, and when it overflows the timestamp is advanced by one.
    """
    global _last_ms, _last_seq
    ms = int(time.time() * 1000) if now_ms is None else now_ms
    with _lock:
        if ms > _last_ms:
            seq = int.from_bytes(os.urandom(2), "big") & 0x7FF  # leave room to count up
        else:
            ms = _last_ms
            seq = _last_seq + 1
            if seq > 0xFFF:
                ms += 1
                seq = 0
        _last_ms, _last_seq = ms, seq
    rand_b = int.from_bytes(os.urandom(8), "big") & ((1 << 62) - 1)
    value = ((ms & ((1 << 48) - 1)) << 80) | (0x7 << 76) | (seq << 64) | (0b10 << 62) | rand_b
    return str(uuid.UUID(int=value))


def new_entry_id(taken: Container[str]) -> str:
    """The first 8 hex digits of a random UUIDv4 that is not in ``taken`` (pi's ``generateId``)."""
    for _ in range(100):
        candidate = uuid.uuid4().hex[:8]
        if candidate not in taken:
            return candidate
    return str(uuid.uuid4())  # pi's fallback: a full UUID


def iso_from_ms(ms: int | float) -> str:
    """JavaScript's ``Date.prototype.toISOString()``: ``2026-11-21T22:36:42.990Z``."""
    ms = int(ms)
    dt = datetime.fromtimestamp(ms // 1000, tz=timezone.utc)
    return dt.strftime("%Y-%m-%dT%H:%M:%S") + f".{ms % 1000:03d}Z"


def iso_now() -> str:
    return iso_from_ms(int(time.time() * 1000))


def iso_to_ms(iso: str) -> int:
    """``new Date(iso).getTime()`` for the ISO strings pi writes; 0 when the string is not a date."""
    try:
        return int(datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() * 1000 + 0.5)
    except (ValueError, TypeError, AttributeError, OverflowError):
        return 0
