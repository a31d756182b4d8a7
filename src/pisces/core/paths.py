"""Where pisces keeps its configuration: the global agent dir and a project's ``.pisces`` dir."""

from __future__ import annotations

import os

AGENT_DIR_ENV = "PISCES_CODING_AGENT_DIR"
CONFIG_DIR_NAME = ".pisces"


def agent_dir() -> str:
    """``$PISCES_CODING_AGENT_DIR`` (with ``~`` expanded) or ``~/.pisces/agent``."""
    env = os.environ.get(AGENT_DIR_ENV)
    if env:
        return os.path.expanduser(env)
    return os.path.join(os.path.expanduser("~"), CONFIG_DIR_NAME, "agent")


def project_config_dir(cwd: str) -> str:
    """The per-project configuration directory, ``<cwd>/.pisces``."""
    return os.path.join(cwd, CONFIG_DIR_NAME)


def display_path(path: str) -> str:
    """``path`` with the home directory shortened to ``~``, for messages meant for people."""
    home = os.path.expanduser("~")
    if home and home != "/" and (path == home or path.startswith(home + os.sep)):
        return "~" + path[len(home):]
    return path


def docs_dir() -> str:
    """Absolute path of pisces' documentation directory (the ``docs`` folder next to ``src``)."""
    here = os.path.dirname(os.path.abspath(__file__))  # .../src/pisces/core
    return os.path.normpath(os.path.join(here, "..", "..", "..", "docs"))
