"""Events to frame bytes, per stream profile: the one encoder every front end uses (stdio, later the web host).

Three profiles differ only in ``message_update``:

``full`` (the default)
    pi's exact frame: ``{"type":"message_update","assistantMessageEvent":{…,"partial":S},"message":S}``.
    The snapshot S appears twice; it is encoded once and its bytes copied.
``lean``
    ``assistantMessageEvent`` without ``partial``; the snapshot once, in ``message``.
``deltas``
    no snapshot at all: ``{"type":"message_update","assistantMessageEvent":{…}}``. A client rebuilds the
    message from the deltas; ``message_start`` and ``message_end`` still carry the whole message, so stdout
    grows with the reply, not with its square.

Every other frame is the same in all profiles. A frame is compact JSON, UTF-8 not escaped, one line.
``encode_profiles`` encodes one event for several profiles at once (a host with many clients), still
encoding each snapshot a single time.
"""

from __future__ import annotations

import json
import math
import sys
from typing import Any, Iterable

import msgspec
from msgspec import UNSET

FULL = "full"
LEAN = "lean"
DELTAS = "deltas"
PROFILES = (FULL, LEAN, DELTAS)

DEEP_ENCODE_LIMIT = 20_000  # nesting levels allowed when a frame is deeper than Python's recursion limit

_UPDATE_HEAD = b'{"type":"message_update","assistantMessageEvent":'
_PARTIAL_KEY = b',"partial":'
_MESSAGE_KEY = b',"message":'
_BETWEEN = b"}" + _MESSAGE_KEY  # the end of the event (after its partial), then the message


def profile_for(*, partial: bool = True, message_snapshots: bool = True) -> str:
    """The profile that sends the snapshots asked for (no message snapshots means no partial either)."""
    if not message_snapshots:
        return DELTAS
    return FULL if partial else LEAN


def _enc_hook(obj: Any) -> Any:
    if isinstance(obj, (set, frozenset, tuple)):
        return list(obj)
    if isinstance(obj, BaseException):
        return str(obj)
    raise NotImplementedError(f"cannot encode {type(obj).__name__}")


def _finite(obj: Any) -> Any:
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, list):
        return [_finite(v) for v in obj]
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    return obj


def encode_with_lone_surrogates(obj: Any) -> bytes:
    """A value holding a lone UTF-16 surrogate (JSON.parse accepts ``"\\ud800"``; UTF-8 cannot carry it),
    written as JSON.stringify writes it: a ``\\uXXXX`` escape. Rare, so the slow path."""
    data = _finite(msgspec.to_builtins(obj, enc_hook=_enc_hook))
    return json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "backslashreplace")


class StreamEncoder:
    """Turns events and responses into frame bytes (each ending in ``\\n``). Not thread-safe: one per loop."""

    def __init__(self) -> None:
        self._encoder = msgspec.json.Encoder(enc_hook=_enc_hook)

    # -- any value ----------------------------------------------------------------------------
    def append(self, obj: Any, buf: bytearray) -> None:
        """Encode ``obj`` onto the end of ``buf``; ``buf`` is unchanged when this raises."""
        start = len(buf)
        try:
            self._encoder.encode_into(obj, buf, -1)
        except UnicodeEncodeError:
            del buf[start:]
            buf += encode_with_lone_surrogates(obj)
        except RecursionError:
            # A deep value: get_session_tree nests two levels per entry, so a long session's tree outgrows
            # Python's default limit of 1000. msgspec recurses in C with little stack per level (200,000
            # levels fit in the 8 MB main stack), so allow more levels for this one encode.
            del buf[start:]
            old = sys.getrecursionlimit()
            sys.setrecursionlimit(max(old, DEEP_ENCODE_LIMIT))
            try:
                self._encoder.encode_into(obj, buf, -1)
            except BaseException:
                del buf[start:]
                raise
            finally:
                sys.setrecursionlimit(old)
        except BaseException:
            del buf[start:]
            raise

    def encode(self, obj: Any, profile: str = FULL) -> bytes:
        """One frame, newline included."""
        return self.encode_profiles(obj, (profile,))[profile]

    def encode_parts(self, obj: Any, profile: str = FULL) -> list[Any]:
        """One frame as the byte strings that make it up, in order (for ``os.writev``): a full-profile
        ``message_update`` lists its one encoded snapshot twice instead of copying it into a new buffer."""
        parts = _update_parts(obj) if profile == FULL else None
        if parts is not None and parts[0].partial is parts[1]:
            # the frame of every streamed delta: two encodes straight into new buffers; anything unusual (a lone
            # surrogate, a value too deep, an encoding that cannot be spliced) takes the careful path below
            ame, message = parts
            encode_into = self._encoder.encode_into
            head, snapshot = bytearray(_UPDATE_HEAD), bytearray()
            try:
                ame.partial = UNSET
                try:
                    encode_into(ame, head, -1)  # appended to the frame's head
                finally:
                    ame.partial = message
                encode_into(message, snapshot, -1)
            except Exception:  # noqa: BLE001 - not lost: encoded again below, by the path that handles it
                pass
            else:
                if head.endswith(b"}"):
                    head[-1:] = _PARTIAL_KEY  # the event's closing brace comes after its partial
                    return [head, snapshot, _BETWEEN, snapshot, b"}\n"]
        return [self.encode(obj, profile)]

    def _event_fields(self, ame: Any) -> bytearray | None:
        """The assistantMessageEvent encoded without its ``partial`` (the snapshot is spliced in by the caller);
        None when the encoding is not an object that can be spliced."""
        partial = ame.partial
        try:
            ame.partial = UNSET
            event_buf = bytearray()
            self.append(ame, event_buf)
        finally:
            ame.partial = partial
        return event_buf if event_buf.endswith(b"}") else None

    # -- several profiles at once ------------------------------------------------------------
    def encode_profiles(self, obj: Any, profiles: Iterable[str]) -> dict[str, bytes]:
        wanted = tuple(dict.fromkeys(profiles))
        for p in wanted:
            _check_profile(p)
        parts = _update_parts(obj)
        if parts is None:
            buf = bytearray()
            self.append(obj, buf)
            buf += b"\n"
            frame = bytes(buf)
            return {p: frame for p in wanted}
        return self._encode_update(obj, *parts, wanted)

    def _encode_update(self, obj: Any, ame: Any, message: Any, wanted: tuple[str, ...]) -> dict[str, bytes]:
        partial = ame.partial
        event_buf = self._event_fields(ame)  # the event's own fields, once, without the snapshot
        if event_buf is None:  # cannot splice: write it the plain way
            buf = bytearray()
            self.append(obj, buf)
            buf += b"\n"
            return {p: bytes(buf) for p in wanted}
        out: dict[str, bytes] = {}
        snapshot = bytearray()
        if FULL in wanted or LEAN in wanted:
            self.append(message, snapshot)
        if DELTAS in wanted:
            out[DELTAS] = b"".join((_UPDATE_HEAD, event_buf, b"}\n"))
        if LEAN in wanted:
            out[LEAN] = b"".join((_UPDATE_HEAD, event_buf, _MESSAGE_KEY, snapshot, b"}\n"))
        if FULL in wanted:
            if partial is UNSET:
                out[FULL] = b"".join((_UPDATE_HEAD, event_buf, _MESSAGE_KEY, snapshot, b"}\n"))
            else:
                if partial is message:
                    partial_bytes: bytes | bytearray = snapshot
                else:
                    partial_bytes = bytearray()
                    self.append(partial, partial_bytes)
                out[FULL] = b"".join((_UPDATE_HEAD, memoryview(event_buf)[:-1], _PARTIAL_KEY, partial_bytes,
                                      b"}", _MESSAGE_KEY, snapshot, b"}\n"))
        return out


def _check_profile(profile: str) -> None:
    if profile not in PROFILES:
        raise ValueError(f"unknown stream profile {profile!r}: use one of {', '.join(PROFILES)}")


# Per class (a struct's tag and fields belong to its class): whether it is a message_update event, and whether
# it is an event struct that carries ``partial``. Asked for every frame, so answered once per class.
_IS_UPDATE: dict[type, bool] = {}
_HAS_PARTIAL: dict[type, bool] = {}


def _update_parts(obj: Any) -> tuple[Any, Any] | None:
    """(assistantMessageEvent, message) of a message_update event whose event struct carries ``partial``;
    None for every other frame."""
    is_update = _IS_UPDATE.get(type(obj))
    if is_update is None:
        config = getattr(obj, "__struct_config__", None)
        is_update = _IS_UPDATE[type(obj)] = config is not None and config.tag == "message_update"
    if not is_update:
        return None
    ame = getattr(obj, "assistantMessageEvent", None)
    has_partial = _HAS_PARTIAL.get(type(ame))
    if has_partial is None:
        has_partial = _HAS_PARTIAL[type(ame)] = (hasattr(ame, "__struct_config__")
                                                 and "partial" in getattr(ame, "__struct_fields__", ()))
    if not has_partial:
        return None
    return ame, obj.message
