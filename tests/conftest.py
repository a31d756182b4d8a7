import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))


@pytest.fixture
def server():
    from scripted_server import ScriptedServer

    with ScriptedServer() as srv:
        yield srv


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path_factory, monkeypatch):
    """Every test gets its own agent dir, so nothing reads or writes the developer's ~/.pisces."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("PISCES_CODING_AGENT_DIR", str(home / ".pisces" / "agent"))
    for key in list(os.environ):
        if key.endswith("_API_KEY"):
            monkeypatch.delenv(key, raising=False)
    yield


@pytest.fixture
def faux():
    from pisces.ai.providers.faux import SCRIPT

    SCRIPT.reset()
    yield SCRIPT
    SCRIPT.reset()

