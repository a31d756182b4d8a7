"""Turning what a client sends with a prompt (images, legacy attachments) into content blocks."""

from __future__ import annotations

from typing import Any

from pisces.ai.types import ImageContent, TextContent


def _image(item: Any, where: str) -> Any:
    if not isinstance(item, dict):
        raise ValueError(f"{where} must be an object")
    from pisces.core.session.image_urls import UrlImage, url_of  # noqa: PLC0415 - only with images

    url = url_of(item)
    if url is not None:  # fetched before the prompt is taken (image_urls.fetch_images)
        return UrlImage(url, where)
    source = item.get("source")
    if isinstance(source, dict):  # {source: {type: "base64", mediaType, data}} (older docs)
        data, mime = source.get("data"), source.get("mediaType") or source.get("media_type")
    else:
        data, mime = item.get("data"), item.get("mimeType")
    if not isinstance(data, str) or not data:
        raise ValueError(f"{where} needs base64 'data' (or a URL: source {{type:'url', url}})")
    if not isinstance(mime, str) or not mime.startswith("image/"):
        raise ValueError(f"{where} needs an image 'mimeType' such as image/png")
    return ImageContent(data=data, mimeType=mime)


def parse_images(images: Any, attachments: Any = None) -> list[Any] | None:
    """``images`` ([{type:"image", data, mimeType}] or the ``source`` form) and the legacy ``attachments``
    ({type:"image", content, mimeType} or documents with ``extractedText``) as content blocks."""
    blocks: list[Any] = []
    if images is not None:
        if not isinstance(images, list):
            raise ValueError("Invalid 'images': expected an array of images")
        for i, item in enumerate(images):
            blocks.append(_image(item, f"images[{i}]"))
    if attachments is not None:
        if not isinstance(attachments, list):
            raise ValueError("Invalid 'attachments': expected an array")
        for i, att in enumerate(attachments):
            if not isinstance(att, dict):
                raise ValueError(f"attachments[{i}] must be an object")
            if att.get("type") == "image":
                blocks.append(_image({"data": att.get("content") or att.get("data"),
                                      "mimeType": att.get("mimeType")}, f"attachments[{i}]"))
            elif isinstance(att.get("extractedText"), str):
                name = att.get("fileName") or "document"
                blocks.append(TextContent(text=f'<file name="{name}">\n{att["extractedText"]}\n</file>'))
            else:
                raise ValueError(f"attachments[{i}]: only images and documents with extractedText are supported")
    return blocks or None
