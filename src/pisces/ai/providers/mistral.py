"""``mistral-conversations`` (the api pi 0.73.1 gives Mistral's models): served here through Mistral's
OpenAI-compatible Chat Completions endpoint (``https://api.mistral.ai/v1/chat/completions``) and the openai
SDK, with Mistral's quirks as compat flags (``openai_compat``): ``max_tokens``, no ``store`` or developer
role, tool results named, an assistant line after tool results, earlier thinking replayed as text, and tool
call ids of nine letters or digits. pi itself uses Mistral's own SDK and Conversations API; this module does
not, so that no further SDK is needed.
"""

from __future__ import annotations

from typing import Any, AsyncIterator

import msgspec

from pisces.ai.providers import openai_completions
from pisces.ai.types import Context, Model, StreamOptions


def as_completions(model: Model) -> Model:
    base = (model.baseUrl or "https://api.mistral.ai").rstrip("/")
    if not base.endswith("/v1"):
        base += "/v1"
    return msgspec.structs.replace(model, baseUrl=base)


async def stream(model: Model, context: Context, options: StreamOptions) -> AsyncIterator[Any]:
    async for event in openai_completions.stream(as_completions(model), context, options):
        yield event
