import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(__file__))), "e2e"))


@pytest.fixture
def home(tmp_path):
    from acp_harness import Home

    return Home(str(tmp_path))
