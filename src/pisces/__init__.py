"""pisces: a coding agent whose headless RPC mode speaks pi's JSON-lines protocol."""

__version__ = "0.1.0"
