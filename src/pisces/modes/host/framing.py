"""One input line to one command: what every client's transport (stdin, a WebSocket message) hands the host.

msgspec decodes the common case; what JavaScript's JSON.parse accepts and msgspec does not (lone surrogates,
integers past 4300 digits) goes through the standard library; anything else is refused with pi's text.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec

_decoder = msgspec.json.Decoder()


def parse_line(raw: bytes) -> tuple[Any, str | None]:
    """Decode one input line; returns (value, None) or (None, pi's parse error message)."""
    if raw.endswith(b"\r"):
        raw = raw[:-1]
    try:
        return _decoder.decode(raw), None
    except (msgspec.DecodeError, UnicodeDecodeError, ValueError, RecursionError):
        pass
    text = raw.decode("utf-8", "replace")
    try:
        # what JSON.parse accepts and msgspec does not (e.g. lone surrogates); NaN and Infinity are not JSON
        return json.loads(text, parse_constant=_reject_constant, parse_int=_js_int), None
    except (ValueError, RecursionError):
        pass
    from pisces.modes.host.jsonerror import describe_json_error  # noqa: PLC0415 - only bad input pays for it

    return None, f"Failed to parse command: {describe_json_error(text)}"


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _js_int(text: str) -> int | float:
    """An integer literal; one longer than Python converts (4300 digits) is a double, as in JSON.parse."""
    try:
        return int(text)
    except ValueError:
        return float(text)
