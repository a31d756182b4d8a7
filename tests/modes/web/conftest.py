"""Fixtures of the web mode tests: a throw-away home (``home``) and helpers to start the real process."""

import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "e2e"))

from e2eproc import Home  # noqa: E402


@pytest.fixture
def home(tmp_path):
    return Home(str(tmp_path))


@pytest.fixture(scope="module")
def browser():
    """One headless Chromium for a test module (skipped when it cannot start here)."""
    from cdp import Chromium

    try:
        b = Chromium.launch()
    except (OSError, RuntimeError) as exc:  # present but unable to start here
        pytest.skip(f"chromium cannot start: {exc}")
    yield b
    b.close()
