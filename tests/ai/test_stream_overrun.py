"""A reply far past the model's maxTokens is a broken provider: the stream stops there with an error that says
so, instead of running on to the byte cap (hundreds of MB of frames for the client first)."""

from __future__ import annotations

import msgspec

from pisces.ai.models import FAUX_MODELS
from pisces.ai.stream import OVERRUN_CHARS_PER_TOKEN, complete
from pisces.ai.types import Context, StreamOptions, UserMessage


async def test_a_reply_far_past_max_tokens_is_stopped_with_a_clear_error(faux):
    model = msgspec.structs.replace(FAUX_MODELS[0], maxTokens=1000)
    faux.enqueue({"text": "w" * (OVERRUN_CHARS_PER_TOKEN * 1000 * 4), "chunkSize": 4096})
    final = await complete(model, Context(messages=[UserMessage(content="go", timestamp=0)]), StreamOptions())
    assert final.stopReason == "error"
    assert final.errorMessage.startswith("The provider kept sending past this model's output limit (")
    assert "for maxTokens 1000): pisces stopped the reply" in final.errorMessage
    streamed = len(final.content[0].text)
    assert OVERRUN_CHARS_PER_TOKEN * 1000 < streamed <= OVERRUN_CHARS_PER_TOKEN * 1000 + 4096


async def test_a_long_reply_within_the_limit_is_untouched(faux):
    model = msgspec.structs.replace(FAUX_MODELS[0], maxTokens=1000)
    text = "w" * (4 * 1000)  # as long as maxTokens allows
    faux.enqueue({"text": text, "chunkSize": 512})
    final = await complete(model, Context(messages=[UserMessage(content="go", timestamp=0)]), StreamOptions())
    assert final.stopReason == "stop" and final.content[0].text == text
