"""pisces' Python RPC client: starts ``pisces --mode rpc`` (or any pi-compatible agent) and drives it.

It imports nothing else of pisces (only msgspec and the standard library), so a program can embed it without
the agent's own dependencies being loaded. ``RpcClient`` is asynchronous; ``SyncRpcClient`` blocks.
"""

from pisces.client.client import (
    DEFAULT_COMMAND,
    EventStream,
    RpcClient,
    RpcClientError,
    RpcCommandError,
    RpcProcessExited,
    RpcTimeoutError,
)
from pisces.client.sync import SyncRpcClient

__all__ = [
    "DEFAULT_COMMAND", "EventStream", "RpcClient", "RpcClientError", "RpcCommandError", "RpcProcessExited",
    "RpcTimeoutError", "SyncRpcClient",
]
