"""What the browser tests share: the skip when there is no Chromium, where screenshots go, and the page state
that means "connected and caught up"."""

from __future__ import annotations

import os

import pytest
from cdp import find_chromium

needs_chromium = pytest.mark.skipif(find_chromium() is None,
                                    reason="no chromium here (apt-get install chromium; .ci/run installs it)")
SHOTS = os.environ.get("PISCES_WEB_SCREENSHOTS")  # a directory: keep the screenshots the tests take
LIVE = "document.querySelector('#conn.live') && window.PiscesApp.state.lastSeq !== null"


def shot(page, name: str) -> None:
    """Save a screenshot of ``page`` as NAME.png when PISCES_WEB_SCREENSHOTS names a directory."""
    if SHOTS:
        os.makedirs(SHOTS, exist_ok=True)
        page.screenshot(os.path.join(SHOTS, name + ".png"))
