"""Every test of test_anthropic.py again, with the request sent by ``providers.direct`` (no SDK): the same
replies, events, errors, retries and bounds as through the SDK."""

from __future__ import annotations

import pytest
from test_anthropic import *  # noqa: F403 - the same tests, collected again under this module

pytestmark = pytest.mark.usefixtures("direct_transport")


@pytest.fixture
def direct_transport(monkeypatch):
    monkeypatch.setenv("PISCES_PROVIDER_TRANSPORT", "direct")
