"""Errors a user sees: their text is the RPC error string or the command line's message.

Every module imports them from here (the session, the build step, the extension binding, the task tool), so
that no collaborator has to import the session back to name an error."""

from __future__ import annotations


class SessionError(Exception):
    """A user-facing error (its text is the RPC error string)."""


class SessionConfigError(ValueError):
    """The flags or configuration cannot make a session; the text says what to change."""

    exit_code = 1


class UsageError(SessionConfigError):
    """A command-line mistake (an unknown flag): exit status 2, as argparse's own errors."""

    exit_code = 2
