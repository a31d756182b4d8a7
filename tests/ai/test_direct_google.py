"""Every test of test_google.py again, with the request sent by ``providers.google_direct`` (no SDK): the same
replies, events, errors and signatures as through google-genai."""

from __future__ import annotations

import pytest
from test_google import *  # noqa: F403 - the same tests, collected again under this module

pytestmark = pytest.mark.usefixtures("direct_transport")


@pytest.fixture
def direct_transport(monkeypatch):
    monkeypatch.setenv("PISCES_PROVIDER_TRANSPORT", "direct")
