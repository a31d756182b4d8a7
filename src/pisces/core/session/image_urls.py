"""Images a client gives by URL (seeds 001/003: "ImageContent format with base64 or URL source"), fetched
before the prompt is taken.

Accepted forms: ``{type:"image", source:{type:"url", url}}``, ``{type:"image", url}``, and ``data`` holding
an ``http(s)://`` URL. Guarantees: only ``http`` and ``https``; at most ``MAX_IMAGE_BYTES`` are read (a
larger body is refused, not read whole); the whole fetch, redirects included (at most 5), takes at most
``FETCH_TIMEOUT_S``; the bytes must be a png, jpeg, gif or webp image (by their first bytes, whatever the
server says). Any failure is one sentence naming the URL, and the prompt is refused before anything runs.
"""

from __future__ import annotations

import asyncio
import base64
from typing import Any

from pisces.ai.types import ImageContent

MAX_IMAGE_BYTES = 20 << 20
FETCH_TIMEOUT_S = 30.0


class UrlImage:
    """A placeholder for an image still to be fetched (what ``parse_images`` returns for a URL)."""

    __slots__ = ("url", "where")

    def __init__(self, url: str, where: str) -> None:
        self.url, self.where = url, where


def url_of(item: dict[str, Any]) -> str | None:
    source = item.get("source")
    if isinstance(source, dict) and source.get("type") == "url":
        url = source.get("url")
    else:
        url = item.get("url")
        data = item.get("data")
        if url is None and isinstance(data, str) and data.startswith(("http://", "https://")):
            url = data
    return url if isinstance(url, str) else None


def has_urls(blocks: list[Any] | None) -> bool:
    return any(isinstance(b, UrlImage) for b in blocks or [])


async def fetch_images(blocks: list[Any] | None) -> list[Any] | None:
    """``blocks`` with every UrlImage replaced by the fetched ImageContent; raises ValueError on a failure."""
    if not has_urls(blocks):
        return blocks
    assert blocks is not None
    return list(await asyncio.gather(*(_fetch(b) if isinstance(b, UrlImage) else _same(b) for b in blocks)))


async def _same(block: Any) -> Any:
    return block


async def _fetch(image: UrlImage) -> ImageContent:
    from pisces.core.tools.read import detect_image_mime  # noqa: PLC0415 - only when an image comes by URL

    url, where = image.url, image.where
    if not url.lower().startswith(("http://", "https://")):
        raise ValueError(f"{where}: only http and https image URLs can be fetched, not {url[:200]!r}")
    try:
        data = await asyncio.wait_for(_download(url), FETCH_TIMEOUT_S)
    except asyncio.TimeoutError:
        raise ValueError(f"{where}: fetching {url} took longer than {FETCH_TIMEOUT_S:g} s") from None
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None
    mime = detect_image_mime(data[:4096])
    if mime is None:
        raise ValueError(f"{where}: {url} is not a png, jpeg, gif or webp image")
    return ImageContent(data=base64.b64encode(data).decode("ascii"), mimeType=mime)


async def _download(url: str) -> bytes:
    import httpx2  # noqa: PLC0415 - the HTTP client the provider SDKs bring: only when an image comes by URL

    try:
        async with httpx2.AsyncClient(follow_redirects=True, max_redirects=5, timeout=FETCH_TIMEOUT_S) as client:
            async with client.stream("GET", url, headers={"Accept": "image/*"}) as response:
                if response.status_code >= 400:
                    raise ValueError(f"fetching {url} failed: HTTP {response.status_code}")
                declared = response.headers.get("content-length")
                if declared and declared.isdigit() and int(declared) > MAX_IMAGE_BYTES:
                    raise ValueError(f"{url} is larger than {MAX_IMAGE_BYTES >> 20} MB")
                chunks, total = [], 0
                async for chunk in response.aiter_bytes():
                    total += len(chunk)
                    if total > MAX_IMAGE_BYTES:
                        raise ValueError(f"{url} is larger than {MAX_IMAGE_BYTES >> 20} MB")
                    chunks.append(chunk)
                return b"".join(chunks)
    except httpx2.HTTPError as exc:
        raise ValueError(f"fetching {url} failed: {exc or type(exc).__name__}") from None
