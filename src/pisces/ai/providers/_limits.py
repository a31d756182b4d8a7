"""Bounds on what a provider's HTTP reply can make pisces read, hold, classify and report, in one place.

Every SDK client pisces builds (openai, anthropic and google-genai all send through httpx2) gets the options
of :func:`http_client_options`: a response hook that puts a bounded reader in front of the body, so that

- an error body (status >= 400, or JSON where an event stream was expected) is read up to
  ``MAX_ERROR_BODY_BYTES`` and cut there: a 50 MB error page costs 64 KB, not 50 MB and a minute of regexes;
- a reply is read up to :func:`reply_limit` bytes (64 MB, ``PISCES_MAX_REPLY_MB`` changes it), then fails
  with :class:`ProviderLimitError`, whose text says so: an endless stream ends;
- one line of an event stream may hold a quarter of that, no more (the same error);
- gzip and deflate are inflated here, in bounded pieces, so the limits count what the reply expands to
  (a small compressed body cannot inflate without bound); other encodings are refused (we never ask for them);
- every chunk that arrives counts as progress for the stall timer of :mod:`pisces.ai.stream` (through
  :data:`PROGRESS`): a reply whose bytes keep coming is slow, not stalled, even inside one huge event.

Nothing here imports an SDK or httpx2 until a client is built.
"""

from __future__ import annotations

import functools
import os
from contextvars import ContextVar
from typing import Any, AsyncIterator, Callable, Iterator

MB = 1024 * 1024
DEFAULT_MAX_REPLY_MB = 64
MAX_ERROR_BODY_BYTES = 64 * 1024
MAX_ERROR_MESSAGE_CHARS = 4000  # an error text longer than this keeps its head and its tail
_TAIL_CHARS = 400
_INFLATE_PIECE = 256 * 1024
_REQUESTED_ENCODINGS = "gzip, deflate"

# Called for every chunk of a reply body that arrives; pisces.ai.stream sets it while a provider reads.
PROGRESS: ContextVar[Callable[[], None] | None] = ContextVar("pisces_provider_progress", default=None)


class ProviderLimitError(Exception):
    """The reply broke one of the bounds above; the text is the sentence the user sees."""


def reply_limit() -> int:
    """Bytes one reply may send (after decompression): ``PISCES_MAX_REPLY_MB`` megabytes, default 64."""
    raw = os.environ.get("PISCES_MAX_REPLY_MB")
    if raw:
        try:
            value = float(raw)
            if value > 0:
                return max(1024, int(value * MB))
        except ValueError:
            pass
    return DEFAULT_MAX_REPLY_MB * MB


def _size(n: int) -> str:
    return f"{n / MB:g} MB" if n >= MB else f"{n // 1024} KB"


def reply_too_large_message(limit: int) -> str:
    return (f"The provider sent more than {_size(limit)} in one reply; pisces stopped reading it "
            "(set PISCES_MAX_REPLY_MB to allow more)")


def line_too_long_message(limit: int) -> str:
    return (f"The provider sent a single event line longer than {_size(limit)}; pisces stopped reading the reply "
            "(set PISCES_MAX_REPLY_MB to allow more)")


def bound_message(text: str, limit: int = MAX_ERROR_MESSAGE_CHARS) -> str:
    """``text`` when short enough; else its head and its tail (where a ``retry-after`` hint sits) with the
    number of characters left out between them."""
    if len(text) <= limit:
        return text
    head = limit - _TAIL_CHARS
    left_out = len(text) - head - _TAIL_CHARS
    return f"{text[:head]} … [{left_out} characters left out] … {text[-_TAIL_CHARS:]}"


def http_client_options() -> dict[str, Any]:
    """Keyword arguments for the httpx2 ``AsyncClient`` an SDK sends through."""
    return {"event_hooks": {"response": [bound_response]}, "headers": {"Accept-Encoding": _REQUESTED_ENCODINGS}}


def genai_client_args() -> dict[str, Any]:
    """``async_client_args`` for google-genai. That SDK sends through aiohttp instead of httpx2 whenever aiohttp
    can be imported (Ray and many other packages install it), unless the client names a transport; aiohttp
    would skip the bounded reader and refuses httpx2's options. A transport of pisces' own keeps it on httpx2."""
    import httpx2  # noqa: PLC0415 - the SDK's HTTP client: imported with the SDK, when the client is built

    return {**http_client_options(), "transport": httpx2.AsyncHTTPTransport()}


async def bound_response(response: Any) -> None:
    """httpx2 response hook: put the bounded reader in front of the body before anyone reads it."""
    headers = response.headers
    ctype = headers.get("content-type", "").lower()
    event_stream = "event-stream" in ctype
    cut = response.status_code >= 400 or ("json" in ctype and not event_stream)
    encoding = headers.get("content-encoding", "").strip().lower()
    inflater: _Inflater | None = None
    if encoding and encoding != "identity":
        if encoding not in ("gzip", "x-gzip", "deflate"):
            raise ProviderLimitError(f"The provider answered with content-encoding '{encoding}', "
                                     f"which pisces did not ask for ({_REQUESTED_ENCODINGS})")
        inflater = _Inflater(encoding)
        del headers["content-encoding"]  # inflated here: httpx2 must not inflate it again
    limit = MAX_ERROR_BODY_BYTES if cut else reply_limit()
    response.stream = _body_class()(response.stream, limit=limit, cut=cut,
                                    line_limit=limit // 4 if event_stream else 0, inflater=inflater)


class _Inflater:
    """gzip/deflate, inflated in pieces of at most ``_INFLATE_PIECE`` bytes (a bomb is stopped by the limit)."""

    def __init__(self, encoding: str) -> None:
        import zlib  # noqa: PLC0415 - only a compressed reply needs it

        self.zlib = zlib
        self.raw_fallback = encoding == "deflate"  # "deflate" is zlib-wrapped, or raw from some servers
        self.d = zlib.decompressobj(zlib.MAX_WBITS if encoding == "deflate" else zlib.MAX_WBITS | 16)

    def feed(self, data: bytes) -> Iterator[bytes]:
        zlib = self.zlib
        try:
            piece = self.d.decompress(data, _INFLATE_PIECE)
        except zlib.error:
            if not self.raw_fallback:
                raise ProviderLimitError("The provider's compressed reply is corrupt") from None
            self.d = zlib.decompressobj(-zlib.MAX_WBITS)
            piece = self.d.decompress(data, _INFLATE_PIECE)
        self.raw_fallback = False
        while piece:
            yield piece
            tail = self.d.unconsumed_tail
            piece = self.d.decompress(tail, _INFLATE_PIECE) if tail else b""

    def flush(self) -> bytes:
        return self.d.flush(_INFLATE_PIECE)


@functools.cache
def _body_class() -> type:
    import httpx2  # noqa: PLC0415 - the SDKs' HTTP client: already imported by whoever built the client

    class BoundedBody(httpx2.AsyncByteStream):
        def __init__(self, inner: Any, *, limit: int, cut: bool, line_limit: int, inflater: _Inflater | None):
            self.inner = inner
            self.limit = limit
            self.cut = cut
            self.line_limit = line_limit
            self.inflater = inflater

        async def __aiter__(self) -> AsyncIterator[bytes]:
            total = 0
            line = 0  # bytes since the last line break, in an event stream
            inflater = self.inflater
            async for raw in self.inner:
                progress = PROGRESS.get()
                if progress is not None:
                    progress()
                for piece in (inflater.feed(raw) if inflater is not None else (raw,)):
                    room = self.limit - total
                    if len(piece) > room:
                        if self.cut:
                            if room > 0:
                                yield piece[:room]
                            return  # the rest is never read; closing the response drops the connection
                        raise ProviderLimitError(reply_too_large_message(self.limit))
                    total += len(piece)
                    if self.line_limit:
                        brk = max(piece.rfind(b"\n"), piece.rfind(b"\r"))
                        line = line + len(piece) if brk < 0 else len(piece) - brk - 1
                        if line > self.line_limit:
                            raise ProviderLimitError(line_too_long_message(self.line_limit))
                    yield piece
            if inflater is not None:
                rest = inflater.flush()
                if rest:
                    yield rest[:max(0, self.limit - total)] if self.cut else rest

        async def aclose(self) -> None:
            await self.inner.aclose()

    return BoundedBody


def body_chunks(response: Any) -> AsyncIterator[bytes]:
    """A streamed response's body as it arrives. With no ``content-encoding`` left (the bounded reader above
    inflates gzip/deflate and drops the header) httpx2's decoding layer would pass every chunk through
    unchanged, so the raw stream is read directly: one async layer less per chunk, the same bytes."""
    if response.headers.get("content-encoding"):
        return response.aiter_bytes()  # not inflated by the bounded reader: httpx2 decodes it
    return response.aiter_raw()


async def line_batches(response: Any, keep_tail: bool) -> AsyncIterator[list[bytes]]:
    """A streamed body's lines, split at LF, one list per chunk that completes at least one line (one async
    step per chunk, none per line; a CR before the LF is left for the caller). Linear however long a line
    grows: a partial line is assembled once, never re-copied per chunk. With ``keep_tail``, a last line
    without its LF comes as a final one-line list; otherwise it is dropped."""
    pending = bytearray()
    async for chunk in body_chunks(response):
        if b"\n" not in chunk:
            pending += chunk
            continue
        if pending:
            pending += chunk
            chunk = bytes(pending)
            pending.clear()
        lines = chunk.split(b"\n")
        pending += lines.pop()
        yield lines
    if keep_tail and pending:
        yield [bytes(pending)]
