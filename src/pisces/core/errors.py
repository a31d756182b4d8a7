"""Errors a user sees: their text is the RPC error string. ``pisces.core.session`` re-exports ``SessionError``;
collaborators import it from here, so that none of them has to import the session module back."""

from __future__ import annotations


class SessionError(Exception):
    """A user-facing error (its text is the RPC error string)."""
