"""Every test of test_google.py again through the google-genai SDK (``PISCES_PROVIDER_TRANSPORT=sdk``), which
Vertex's Gemini and a payload ``google_direct`` does not convert still use: both paths give the same events."""

from __future__ import annotations

import pytest
from test_google import *  # noqa: F403 - the same tests, collected again under this module

pytestmark = pytest.mark.usefixtures("sdk_transport")


@pytest.fixture
def sdk_transport(monkeypatch):
    monkeypatch.setenv("PISCES_PROVIDER_TRANSPORT", "sdk")
