"""Fixtures of the end-to-end tests: ``home`` (a throw-away HOME and agent dir) and ``spawn`` (start the real
``pisces --mode rpc``; every process is closed at teardown). See e2eproc.py."""

from e2eproc import home, spawn  # noqa: F401 - fixtures
