"""In-process fixtures of the task tool tests: a real git repository, settings in the test's agent dir, and a
session on the faux model with the task tool active."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
from task_util import git


@pytest.fixture(autouse=True)
def _own_tmp(tmp_path, monkeypatch):
    """Temporary artifacts and indexes go under the test's own directory, never the machine's /tmp."""
    import tempfile

    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))


@pytest.fixture
def agent_dir() -> str:
    path = os.environ["PISCES_CODING_AGENT_DIR"]
    os.makedirs(path, exist_ok=True)
    return path


@pytest.fixture
def repo(tmp_path: Any) -> str:
    path = str(tmp_path / "repo")
    os.makedirs(path)
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "user.email", "dev@example.com")
    git(path, "config", "user.name", "Dev")
    with open(os.path.join(path, "app.txt"), "w") as f:
        f.write("one\ntwo\nthree\nfour\nfive\nsix\nseven\n")
    git(path, "add", "-A")
    git(path, "commit", "-qm", "base")
    return path


@pytest.fixture
def task_settings(agent_dir: str):
    def write(task: dict[str, Any]) -> None:
        with open(os.path.join(agent_dir, "settings.json"), "w") as f:
            json.dump({"task": task}, f)
    return write


@pytest.fixture
def session(faux, repo):
    """``session(cwd=repo)``: an AgentSession on the faux model, task tool active, events recorded in
    ``session.events``."""
    from pisces.core.session.build import create_agent_session

    made = []

    def make(cwd: str | None = None) -> Any:
        s = create_agent_session(cwd=cwd or repo, provider="faux", no_session=True,
                                 tools=["read", "bash", "edit", "write", "task"])
        s.events = []
        s.subscribe(s.events.append)
        made.append(s)
        return s

    yield make
