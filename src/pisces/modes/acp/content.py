"""ACP prompt content -> the text and images of a pisces prompt.

Text blocks are joined as sent (an editor splits "look at @file please" into three blocks). A resource link
becomes a Markdown link in place; an embedded text resource (a file the editor attached, possibly unsaved)
is appended after the text as ``<context ref="uri">...</context>``, so the model sees what the user saw.
Images are passed on; audio and binary resources are not supported and leave a note in the text instead of
vanishing.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote, urlparse

from pisces.ai.types import ImageContent


def _uri_label(uri: str) -> str:
    parsed = urlparse(uri)
    return unquote(parsed.path) if parsed.scheme == "file" else uri


def prompt_from_blocks(blocks: list[Any]) -> tuple[str, list[ImageContent]]:
    parts: list[str] = []
    context: list[str] = []
    images: list[ImageContent] = []
    for block in blocks:
        kind = getattr(block, "type", None)
        if kind == "text":
            parts.append(block.text)
        elif kind == "image":
            images.append(ImageContent(data=block.data, mimeType=block.mime_type))
        elif kind == "resource_link":
            parts.append(f"[{block.name or _uri_label(block.uri)}]({block.uri})")
        elif kind == "resource":
            resource = block.resource
            text = getattr(resource, "text", None)
            if isinstance(text, str):
                context.append(f'<context ref="{resource.uri}">\n{text}\n</context>')
            else:
                parts.append(f"[binary resource {_uri_label(resource.uri)} not included: pisces reads text only]")
        elif kind == "audio":
            parts.append("[audio not included: pisces does not take audio]")
    text = "".join(parts)
    if context:
        text = "\n\n".join([text, *context]) if text else "\n\n".join(context)
    return text, images
