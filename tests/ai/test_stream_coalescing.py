"""What a reply makes pisces emit grows linearly with the message (pisces.ai.stream._Coalescer).

Every event carries the whole partial message, so an N-character reply in tiny deltas would cost N^2/2
characters of snapshots downstream. Small messages keep one event per delta (pi's behaviour); past
COALESCE_FROM_CHARS, deltas of one block that arrive in a burst are merged, deltas that arrive slowly still go
out one by one, and no character is lost or reordered.
"""

from __future__ import annotations

import asyncio

from provider_helpers import final, kinds

from pisces.ai.models import FAUX_MODELS
from pisces.ai.stream import COALESCE_FROM_CHARS, SNAPSHOT_CHARS_PER_S, _Coalescer, stream
from pisces.ai.types import Context, StreamOptions, TextDeltaEvent, ThinkingDeltaEvent, UserMessage

FAUX = FAUX_MODELS[0]


def _delta(text: str, index: int = 0, cls=TextDeltaEvent):
    return cls(contentIndex=index, delta=text, partial=None)  # type: ignore[arg-type]


def feed(coalescer: _Coalescer, items, times):
    out = []
    for item, now in zip(items, times, strict=False):
        out.extend(coalescer.delta(item, now))
    return out


def test_small_messages_keep_one_event_per_delta():
    c = _Coalescer()
    items = [_delta("abcd") for _ in range(1000)]
    out = feed(c, items, [1.0] * 1000)  # all at once: a burst
    assert out == items


def test_a_burst_past_the_threshold_is_merged_and_nothing_is_lost():
    c = _Coalescer()
    n = (4 * COALESCE_FROM_CHARS) // 4
    items = [_delta("wxyz") for _ in range(n)]
    out = feed(c, items, [1.0] * n)  # one instant: every gap is 0
    if c.held is not None:
        out.append(c.flush())
    assert "".join(e.delta for e in out) == "wxyz" * n
    first_merged = next(i for i, e in enumerate(out) if len(e.delta) > 4)
    assert first_merged * 4 >= COALESCE_FROM_CHARS - 4, "below the threshold every delta is its own event"
    # each merged event adds at least 1/8 of the message: a handful of events, not tens of thousands
    assert len(out) - first_merged < 40, len(out)


def test_slow_deltas_still_go_out_one_by_one():
    c = _Coalescer()
    c.size = 1024 * 1024  # a 1 MB message already
    gap = 2 * c.size / SNAPSHOT_CHARS_PER_S
    items = [_delta("tok") for _ in range(50)]
    out = feed(c, items, [1.0 + i * gap for i in range(50)])
    assert out == items


def test_a_different_block_sends_the_held_delta_first():
    c = _Coalescer()
    c.size = 1024 * 1024
    a1, a2, b1 = _delta("a1"), _delta("a2"), _delta("b1", index=1, cls=ThinkingDeltaEvent)
    out = feed(c, [a1, a2, b1], [1.0, 1.0, 1.0])
    assert out == [] or out[0].delta == "a1"  # the first one may go out (the gap from start is large)
    rest = out + ([c.flush()] if c.held is not None else [])
    assert [(type(e).__name__, e.contentIndex) for e in rest][-1] == ("ThinkingDeltaEvent", 1)
    assert "".join(e.delta for e in rest if e.contentIndex == 0) == "a1a2"


async def test_a_large_fast_reply_emits_snapshots_linear_in_its_size(faux):
    """1 MB in 16-character deltas: 65,536 deltas, whose snapshots would sum to 32 G characters one per delta.
    Past the threshold they are merged and sum to about 9x the message; the bound asserted leaves room for 100
    scheduling hiccups (a gap long enough to count as slow), so it holds on a loaded machine."""
    size = 1024 * 1024
    faux.enqueue({"text": "0123456789abcdef" * (size // 16), "chunkSize": 16})
    events = []

    async def run():
        async for ev in stream(FAUX, Context(messages=[UserMessage(content="go")]), StreamOptions()):
            events.append(ev)

    await asyncio.wait_for(run(), 120)
    types = kinds(events)
    assert types[-1] == "done"
    deltas = [e for e, t in zip(events, types, strict=False) if t == "text_delta"]
    assert "".join(e.delta for e in deltas) == final(events).content[0].text
    emitted = 0
    so_far = 0
    for e in deltas:
        so_far += len(e.delta)
        if so_far > COALESCE_FROM_CHARS:
            emitted += so_far  # the snapshot this event carries
    assert emitted <= 110 * size, f"{emitted / size:.0f}x the message in snapshots"
    singles = COALESCE_FROM_CHARS // 16 - 1
    assert [len(e.delta) for e in deltas[:singles]] == [16] * singles, \
        "below the threshold, every delta is its own event"
