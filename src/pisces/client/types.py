"""The RPC client's errors and the TypedDicts describing the shapes of some command results.

Re-exported by :mod:`pisces.client.client`; import them from there.
"""

from __future__ import annotations

import signal
from typing import TypedDict

__all__ = [
    "RpcClientError", "RpcCommandError", "RpcProcessExited", "RpcTimeoutError",
    "ImageContent", "CancelledResult", "BashResult", "SessionState",
]


# -- errors -----------------------------------------------------------------------------------
class RpcClientError(Exception):
    """Anything that goes wrong on the client side: spawning, start-up, the process, timeouts."""


class RpcCommandError(RpcClientError):
    """The agent answered ``success:false``. ``error`` is its message, ``response`` the whole frame."""

    def __init__(self, command: str, error: str, response: dict | None = None) -> None:
        super().__init__(f"{command} failed: {error}")
        self.command = command
        self.error = error
        self.response = response or {}


class RpcProcessExited(RpcClientError):
    """The agent process is gone (or closed its stdout). ``returncode`` is None if it is still running."""

    def __init__(self, returncode: int | None, stderr_tail: str = "", *, stopped: bool = False,
                 command: list[str] | None = None) -> None:
        self.returncode = returncode
        self.stderr_tail = stderr_tail
        self.stopped = stopped
        self.command = command
        if stopped:
            what = "the agent process was stopped"
        elif returncode is None:
            what = "the agent process closed its stdout"
        elif returncode < 0:
            try:
                name = signal.Signals(-returncode).name
            except ValueError:
                name = f"signal {-returncode}"
            what = f"the agent process was killed by {name} (exit status {returncode})"
        else:
            what = f"the agent process exited with status {returncode}"
        if command:
            what += f" [{' '.join(command)}]"
        if stderr_tail.strip():
            what += f"; stderr ends with:\n{stderr_tail.rstrip()}"
        else:
            what += "; stderr was empty"
        super().__init__(what)


class RpcTimeoutError(RpcClientError, TimeoutError):
    """A call or wait did not finish within its timeout (the agent is still running)."""


# -- shapes, for documentation ---------------------------------------------------------------
class ImageContent(TypedDict):
    type: str  # "image"
    data: str  # base64
    mimeType: str


class CancelledResult(TypedDict):
    cancelled: bool


class BashResult(TypedDict, total=False):
    output: str
    exitCode: int
    cancelled: bool
    truncated: bool
    fullOutputPath: str


class SessionState(TypedDict, total=False):
    model: dict
    thinkingLevel: str
    isStreaming: bool
    isCompacting: bool
    steeringMode: str
    followUpMode: str
    sessionFile: str
    sessionId: str
    sessionName: str
    autoCompactionEnabled: bool
    autoRetryEnabled: bool
    messageCount: int
    pendingMessageCount: int
