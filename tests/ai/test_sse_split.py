"""The providers' SSE readers split lines inside one generator: whatever the chunking of the body (a line cut
anywhere, CRLF cut between CR and LF, many events in one chunk), the events are the ones a plain line-by-line
reading of the whole body gives; the body is read raw unless a content-encoding is left for httpx2 to decode."""

from __future__ import annotations

import asyncio
from typing import Any, AsyncIterator

from pisces.ai.providers import anthropic, openai_completions

BODY = (b": comment\r\n"
        b"event: message_start\r\ndata: {\"a\": 1}\r\n\r\n"
        b"data: {\"b\": \"\xc3\xa9 \xe2\x80\xa8 x\"}\n\n"
        b"data:first\ndata: second\n\n"
        b"data\n\n"
        b"event: ping\n: keep-alive\n\n"
        b"data: [DONE]\n\n"
        b"data: after\n\n"
        b"data: tail-without-lf")


class FakeResponse:
    def __init__(self, pieces: list[bytes], encoding: str = "") -> None:
        self.pieces = pieces
        self.headers = {"content-encoding": encoding} if encoding else {}
        self.read_with: str | None = None

    async def _gen(self) -> AsyncIterator[bytes]:
        for p in self.pieces:
            yield p

    def aiter_raw(self) -> AsyncIterator[bytes]:
        self.read_with = "raw"
        return self._gen()

    def aiter_bytes(self) -> AsyncIterator[bytes]:
        self.read_with = "bytes"
        return self._gen()


def reference_lines(body: bytes, keep_last: bool) -> list[bytes]:
    lines = body.split(b"\n")
    last = lines.pop()
    if keep_last and last:
        lines.append(last)
    return [line[:-1] if line.endswith(b"\r") else line for line in lines]


def reference_openai(body: bytes) -> list[tuple[Any, str]]:
    out, event, data = [], None, []
    for raw in reference_lines(body, keep_last=False):
        line = raw.decode("utf-8", "replace")
        if not line:
            if data:
                out.append((event, "\n".join(data)))
                if out[-1][1].startswith("[DONE]"):
                    return out
            event, data = None, []
        elif not line.startswith(":"):
            name, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if name == "data":
                data.append(value)
            elif name == "event":
                event = value
    if data:
        out.append((event, "\n".join(data)))
    return out


def reference_anthropic(body: bytes) -> list[tuple[str, bytes]]:
    out, event, data = [], "", []
    for line in reference_lines(body, keep_last=True):
        if not line:
            if data:
                out.append((event, b"\n".join(data)))
            event, data = "", []
        elif line.startswith(b"data:"):
            value = line[5:]
            data.append(value[1:] if value.startswith(b" ") else value)
        elif line.startswith(b"event:"):
            event = line[6:].strip().decode("utf-8", "replace")
    if data:
        out.append((event, b"\n".join(data)))
    return out


async def collect(gen: AsyncIterator[Any]) -> list[Any]:
    return [item async for item in gen]


def chunkings(body: bytes) -> list[list[bytes]]:
    out = [[body], [bytes([b]) for b in body]]
    for size in (2, 3, 5, 7, 13, 31):
        out.append([body[i:i + size] for i in range(0, len(body), size)])
    for cut in range(1, len(body)):
        out.append([body[:cut], body[cut:]])
    return out


def test_openai_events_are_the_same_for_every_chunking() -> None:
    want = reference_openai(BODY)
    assert want[0] == ("message_start", '{"a": 1}')
    assert want[-1] == (None, "[DONE]")  # nothing after [DONE], the unterminated line dropped
    for pieces in chunkings(BODY):
        got = asyncio.run(collect(openai_completions.iter_sse(FakeResponse(pieces))))
        assert got == want, pieces


def test_anthropic_events_are_the_same_for_every_chunking() -> None:
    want = reference_anthropic(BODY)
    assert want[-1] == ("", b"tail-without-lf")  # the last line counts without its LF
    assert (("message_start", b'{"a": 1}')) in want
    for pieces in chunkings(BODY):
        got = asyncio.run(collect(anthropic.iter_sse(FakeResponse(pieces))))
        assert got == want, pieces


def test_anthropic_last_line_event_and_blank() -> None:
    body = b"data: x\n\r"  # the last "line" is a lone CR: a blank line, which dispatches
    assert asyncio.run(collect(anthropic.iter_sse(FakeResponse([body])))) == [("", b"x")]


def test_encoded_body_goes_through_httpx_decoding() -> None:
    raw, encoded = FakeResponse([b"data: 1\n\n"]), FakeResponse([b"data: 1\n\n"], encoding="br")
    assert asyncio.run(collect(openai_completions.iter_sse(raw))) == [(None, "1")]
    assert asyncio.run(collect(openai_completions.iter_sse(encoded))) == [(None, "1")]
    assert (raw.read_with, encoded.read_with) == ("raw", "bytes")
