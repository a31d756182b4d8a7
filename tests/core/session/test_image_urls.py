"""The time bound of an image fetched by URL: a server that never answers is given up on, with a sentence."""

from __future__ import annotations

import socket

import pytest

from pisces.core.session import image_urls


async def test_a_silent_server_is_given_up_on(monkeypatch):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)  # accepts the connection, never answers
    monkeypatch.setattr(image_urls, "FETCH_TIMEOUT_S", 0.5)
    try:
        url = f"http://127.0.0.1:{listener.getsockname()[1]}/slow.png"
        with pytest.raises(ValueError, match=r"images\[0\]: fetching .*slow.png took longer than 0.5 s"):
            await image_urls.fetch_images([image_urls.UrlImage(url, "images[0]")])
    finally:
        listener.close()
