"""Where the built-in tools read and write files and run commands.

By default the tools use the local file system and a local shell. A mode can hand a session's tools other
*backends*, for example an editor that serves files from its buffers (so unsaved changes are seen) and runs
commands in its own terminal. A backend is chosen per session when the tools are built
(``create_tools(..., backends=ToolBackends(files=..., shell=...))``); the tools keep every rule of their own
(path resolution, line windows, truncation, edit matching, diff, error texts) and only hand the I/O over.

- ``files`` serves ``read`` (text files; images are always read locally, since a text file API cannot carry
  them), ``edit`` (read, then write) and ``write``. ``grep``, ``find`` and ``ls`` walk directories, which a
  text-file API cannot do, so they stay local.
- ``shell`` runs the ``bash`` tool's command: it feeds the output bytes to ``on_data`` and says how the
  command ended. The output accumulator, truncation and the result texts stay in the tool.

A backend raises :class:`BackendError` (or an ``OSError``) with a sentence the model can read; the tool turns
it into an error result. Backends must honour ``signal`` (or let the tool abandon the call on abort) and
must not wait forever on their host: that is theirs to bound.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Protocol

if TYPE_CHECKING:
    from pisces.ai.abort import AbortSignal


@dataclass(slots=True)
class ProcessOutcome:
    """How a command ended: what ``run_process`` and every shell backend return."""

    exit_code: int | None     # None when killed by a signal (as Node reports it)
    cancelled: bool
    timed_out: bool


class BackendError(Exception):
    """A backend could not do what was asked; the message is for the model (and the user)."""


class FileBackend(Protocol):
    async def read_text(self, path: str) -> str:
        """The text of the file at absolute ``path`` (an editor's unsaved buffer when it has one)."""
        ...

    async def write_text(self, path: str, content: str) -> None:
        """Create or replace the file at absolute ``path`` with ``content``."""
        ...


class ShellBackend(Protocol):
    async def run(self, command: str, cwd: str, *, on_data: Callable[[bytes], None], signal: AbortSignal | None,
                  timeout: float | None, env: dict[str, str] | None, tool_call_id: str | None) -> ProcessOutcome:
        """Run ``command`` in ``cwd``; stdout and stderr go to ``on_data``. An abort of ``signal`` or the
        ``timeout`` (seconds) stops the command and is reported in the outcome. ``tool_call_id`` names the
        tool call the command belongs to, so that a host can show its output with it."""
        ...


@dataclass(frozen=True, slots=True)
class ToolBackends:
    """``None`` means local: the process's own file system, or a shell it starts itself."""

    files: FileBackend | None = None
    shell: ShellBackend | None = None


LOCAL = ToolBackends()

__all__ = ["BackendError", "FileBackend", "ShellBackend", "ToolBackends", "LOCAL"]
