"""File and terminal backends served by the ACP client (see ``pisces.core.tools.backends``).

Built per session from what the client advertised in ``initialize``, never otherwise:

- files, when the client offers both ``fs.readTextFile`` and ``fs.writeTextFile``: ``read``, ``edit`` and
  ``write`` go through the editor, so they see (and change) unsaved buffers. With only one of the two,
  pisces stays local for both: reading a buffer and writing the disk file under it would lose the user's
  unsaved edits.
- shell, when the client offers ``terminal``: the bash tool's command runs in an editor terminal (the tool
  call shows that terminal); the output comes back through ``terminal/output`` and goes through the same
  truncation as a local command.

Every request to the client is bounded (``CLIENT_TIMEOUT``); waiting for a command's exit is bounded by the
tool's own timeout and by abort, as a local command is.
"""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable, TypeVar

from acp import RequestError
from acp.schema import EnvVariable

from pisces.core.tools.backends import BackendError
from pisces.core.tools.bash_exec import ProcessOutcome, get_shell_config

T = TypeVar("T")

CLIENT_TIMEOUT = 60.0          # seconds the client may take to answer one file or terminal request
KILL_WAIT = 10.0               # seconds to wait for a killed command to report its exit
OUTPUT_BYTE_LIMIT = 1 << 20    # the client keeps this much of a command's output (its tail)


class Binding:
    """What a backend learns once the session exists: its id, and where to report a terminal."""

    def __init__(self) -> None:
        self.session_id = ""
        self.on_terminal: Callable[[str, str], None] = lambda tool_call_id, terminal_id: None


async def _ask(what: str, request: Awaitable[T]) -> T:
    try:
        return await asyncio.wait_for(request, CLIENT_TIMEOUT)
    except asyncio.TimeoutError:
        raise BackendError(f"The editor did not answer ({what}) within {CLIENT_TIMEOUT:g} s") from None
    except RequestError as exc:
        detail = f": {exc.data}" if exc.data else ""
        raise BackendError(f"The editor refused {what}: {exc}{detail}") from None
    except ConnectionError:
        raise BackendError(f"The editor closed the connection ({what})") from None


class ClientFiles:
    def __init__(self, conn: Any, binding: Binding) -> None:
        self._conn = conn
        self._binding = binding

    async def read_text(self, path: str) -> str:
        response = await _ask(f"reading {path}", self._conn.read_text_file(session_id=self._binding.session_id,
                                                                           path=path))
        return response.content

    async def write_text(self, path: str, content: str) -> None:
        await _ask(f"writing {path}", self._conn.write_text_file(session_id=self._binding.session_id, path=path,
                                                                 content=content))


class ClientTerminal:
    def __init__(self, conn: Any, binding: Binding, shell_path: str | None = None) -> None:
        self._conn = conn
        self._binding = binding
        self._shell_path = shell_path

    async def run(self, command: str, cwd: str, *, on_data: Callable[[bytes], None], signal: Any,
                  timeout: float | None, env: dict[str, str] | None, tool_call_id: str | None) -> ProcessOutcome:
        sid = self._binding.session_id
        shell, args = get_shell_config(self._shell_path)
        variables = [EnvVariable(name=k, value=v) for k, v in (env or {}).items()] or None
        created = await _ask("creating a terminal", self._conn.create_terminal(
            session_id=sid, command=shell, args=[*args, command], cwd=cwd, env=variables,
            output_byte_limit=OUTPUT_BYTE_LIMIT))
        terminal = created.terminal_id
        if tool_call_id:
            self._binding.on_terminal(tool_call_id, terminal)
        try:
            exit_code, cancelled, timed_out = await self._wait(sid, terminal, signal, timeout)
            output = await _ask("reading terminal output", self._conn.terminal_output(session_id=sid,
                                                                                      terminal_id=terminal))
        finally:
            await self._release(sid, terminal)
        if output.output:
            on_data(output.output.encode("utf-8", "replace"))
        if exit_code is None and output.exit_status is not None and not (cancelled or timed_out):
            exit_code = output.exit_status.exit_code
        return ProcessOutcome(exit_code, cancelled, timed_out)

    async def _wait(self, sid: str, terminal: str, signal: Any, timeout: float | None
                    ) -> tuple[int | None, bool, bool]:
        exited = asyncio.ensure_future(self._conn.wait_for_terminal_exit(session_id=sid, terminal_id=terminal))
        aborted: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def abort() -> None:
            if not aborted.done():
                aborted.set_result(None)

        remove = signal.add_listener(abort) if signal else (lambda: None)
        try:
            await asyncio.wait({exited, aborted}, timeout=timeout if timeout and timeout > 0 else None,
                               return_when=asyncio.FIRST_COMPLETED)
        finally:
            remove()
            aborted.cancel()
        if exited.done():
            return _exit_code(exited), False, False
        cancelled = bool(signal is not None and signal.aborted)
        try:
            await _ask("killing a terminal command", self._conn.kill_terminal(session_id=sid, terminal_id=terminal))
            await asyncio.wait({exited}, timeout=KILL_WAIT)
        except BackendError:
            pass
        if not exited.done():
            exited.cancel()
        return None, cancelled, not cancelled

    async def _release(self, sid: str, terminal: str) -> None:
        try:
            await _ask("releasing a terminal", self._conn.release_terminal(session_id=sid, terminal_id=terminal))
        except BackendError:
            pass


def _exit_code(exited: asyncio.Future[Any]) -> int | None:
    error = None if exited.cancelled() else exited.exception()
    if error is not None:
        raise BackendError(f"The editor's terminal failed: {error}")
    return None if exited.cancelled() else exited.result().exit_code
