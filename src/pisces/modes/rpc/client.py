"""The documented import path of the Python RPC client, kept for published code: it lives in ``pisces.client``."""

from pisces.client.client import *  # noqa: F403 - this module is the old name of pisces.client.client
from pisces.client.client import __all__ as __all__
from pisces.client.types import *  # noqa: F403 - the TypedDicts were importable from here too
