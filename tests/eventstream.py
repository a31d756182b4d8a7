"""AWS event-stream framing (``application/vnd.amazon.eventstream``), written here for the scripted Bedrock
server: each message is a prelude (total length, headers length, CRC32 of those 8 bytes), the headers
(name length u8, name, type 7 = string, value length u16, value), the payload, and a CRC32 of all before."""

from __future__ import annotations

import json
import struct
import zlib
from typing import Any

CONTENT_TYPE = "application/vnd.amazon.eventstream"


def _headers(headers: dict[str, str]) -> bytes:
    out = b""
    for name, value in headers.items():
        n, v = name.encode(), value.encode()
        out += struct.pack(">B", len(n)) + n + b"\x07" + struct.pack(">H", len(v)) + v
    return out


def message(headers: dict[str, str], payload: bytes) -> bytes:
    h = _headers(headers)
    total = 12 + len(h) + len(payload) + 4
    prelude = struct.pack(">II", total, len(h))
    prelude += struct.pack(">I", zlib.crc32(prelude))
    body = prelude + h + payload
    return body + struct.pack(">I", zlib.crc32(body))


def event(kind: str, body: dict[str, Any]) -> bytes:
    """One Converse stream event (``messageStart``, ``contentBlockDelta``, ``metadata``, ...)."""
    return message({":message-type": "event", ":event-type": kind, ":content-type": "application/json"},
                   json.dumps(body).encode())


def exception(kind: str, text: str) -> bytes:
    """An exception sent inside the stream (``throttlingException``, ``modelStreamErrorException``, ...)."""
    return message({":message-type": "exception", ":exception-type": kind, ":content-type": "application/json"},
                   json.dumps({"message": text}).encode())
