"""Drive the real ``pisces --mode acp`` through the SDK's own client side (``acp.spawn_agent_process``).

``Editor`` is the test's ACP client: it records every ``session/update`` (as the SDK parsed it, so an update
that does not validate against the schema never arrives) and every raw frame in wire order, serves
``fs/*`` from a dict of "unsaved buffers" over the real files, runs ``terminal/*`` commands as real local
processes, and answers permission requests as the test says. It advertises fs and terminal only when asked.
"""

from __future__ import annotations

import asyncio
import os
import sys
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator

from acp import RequestError, spawn_agent_process, text_block
from acp.schema import (
    AllowedOutcome,
    ClientCapabilities,
    CreateTerminalResponse,
    DeniedOutcome,
    FileSystemCapabilities,
    KillTerminalResponse,
    ReadTextFileResponse,
    ReleaseTerminalResponse,
    RequestPermissionResponse,
    TerminalExitStatus,
    TerminalOutputResponse,
    WaitForTerminalExitResponse,
    WriteTextFileResponse,
)
from e2eproc import Home

_BIN = os.path.dirname(sys.executable)
PISCES = os.path.join(_BIN, "pisces")
HANG = 30.0  # seconds: only bounds a hang, never a speed


class Editor:
    def __init__(self, *, fs: bool = False, terminal: bool = False, buffers: dict[str, str] | None = None,
                 permission: str = "allow-once") -> None:
        self.fs = fs
        self.terminal = terminal
        self.buffers = dict(buffers or {})  # path -> unsaved text
        self.permission = permission
        self.updates: list[tuple[str, Any]] = []
        self.wire: list[tuple[str, dict[str, Any]]] = []  # ("in"|"out", frame), in wire order
        self.calls: list[tuple[str, dict[str, Any]]] = []  # client methods the agent called
        self._terminals: dict[str, dict[str, Any]] = {}
        self.update_arrived = asyncio.Event()

    # -- what the agent sees of us -------------------------------------------------------------
    def capabilities(self) -> ClientCapabilities:
        return ClientCapabilities(fs=FileSystemCapabilities(read_text_file=self.fs, write_text_file=self.fs),
                                  terminal=self.terminal)

    def observe(self, event: Any) -> None:
        self.wire.append(("in" if event.direction.value == "incoming" else "out", event.message))

    # -- the Client interface ------------------------------------------------------------------
    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append((session_id, update))
        self.update_arrived.set()

    async def request_permission(self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any) -> Any:
        self.calls.append(("request_permission", {"tool_call": tool_call, "options": options}))
        if self.permission == "cancel":
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=self.permission))

    async def read_text_file(self, session_id: str, path: str, line: int | None = None, limit: int | None = None,
                             **kwargs: Any) -> ReadTextFileResponse:
        self.calls.append(("fs/read_text_file", {"path": path}))
        if path in self.buffers:
            return ReadTextFileResponse(content=self.buffers[path])
        try:
            with open(path, encoding="utf-8") as f:
                return ReadTextFileResponse(content=f.read())
        except OSError as exc:
            raise RequestError(-32002, f"Resource not found: {exc.strerror}", {"path": path}) from None

    async def write_text_file(self, session_id: str, path: str, content: str, **kwargs: Any) -> WriteTextFileResponse:
        self.calls.append(("fs/write_text_file", {"path": path, "content": content}))
        self.buffers[path] = content
        return WriteTextFileResponse()

    async def create_terminal(self, session_id: str, command: str, args: list[str] | None = None, env: Any = None,
                              cwd: str | None = None, output_byte_limit: int | None = None,
                              **kwargs: Any) -> CreateTerminalResponse:
        self.calls.append(("terminal/create", {"command": command, "args": args, "cwd": cwd}))
        proc = await asyncio.create_subprocess_exec(command, *(args or []), cwd=cwd, stdout=asyncio.subprocess.PIPE,
                                                    stderr=asyncio.subprocess.STDOUT, start_new_session=True)
        terminal_id = f"term-{len(self._terminals) + 1}"
        entry: dict[str, Any] = {"proc": proc, "output": bytearray()}

        async def pump() -> None:
            assert proc.stdout is not None
            while chunk := await proc.stdout.read(65536):
                entry["output"].extend(chunk)

        entry["pump"] = asyncio.ensure_future(pump())
        self._terminals[terminal_id] = entry
        return CreateTerminalResponse(terminal_id=terminal_id)

    async def wait_for_terminal_exit(self, session_id: str, terminal_id: str,
                                     **kwargs: Any) -> WaitForTerminalExitResponse:
        entry = self._terminals[terminal_id]
        code = await entry["proc"].wait()
        await entry["pump"]
        return WaitForTerminalExitResponse(exit_code=code if code >= 0 else None,
                                           signal=None if code >= 0 else f"signal {-code}")

    async def terminal_output(self, session_id: str, terminal_id: str, **kwargs: Any) -> TerminalOutputResponse:
        entry = self._terminals[terminal_id]
        code = entry["proc"].returncode
        status = None if code is None else TerminalExitStatus(exit_code=code if code >= 0 else None)
        return TerminalOutputResponse(output=entry["output"].decode("utf-8", "replace"), truncated=False,
                                      exit_status=status)

    async def kill_terminal(self, session_id: str, terminal_id: str, **kwargs: Any) -> KillTerminalResponse:
        self.calls.append(("terminal/kill", {"terminal_id": terminal_id}))
        proc = self._terminals[terminal_id]["proc"]
        if proc.returncode is None:
            os.killpg(proc.pid, 9)
        return KillTerminalResponse()

    async def release_terminal(self, session_id: str, terminal_id: str, **kwargs: Any) -> ReleaseTerminalResponse:
        self.calls.append(("terminal/release", {"terminal_id": terminal_id}))
        entry = self._terminals.pop(terminal_id, None)
        if entry is not None and entry["proc"].returncode is None:
            os.killpg(entry["proc"].pid, 9)
            await entry["proc"].wait()
        return ReleaseTerminalResponse()

    def on_connect(self, conn: Any) -> None:
        pass

    # -- reading what arrived ------------------------------------------------------------------
    def kinds(self, session_id: str | None = None) -> list[str]:
        return [u.session_update for sid, u in self.updates if session_id is None or sid == session_id]

    def of(self, kind: str, session_id: str | None = None) -> list[Any]:
        return [u for sid, u in self.updates
                if u.session_update == kind and (session_id is None or sid == session_id)]

    def text(self, kind: str = "agent_message_chunk") -> str:
        return "".join(u.content.text for u in self.of(kind) if getattr(u.content, "type", "") == "text")

    def methods_called(self) -> list[str]:
        return [name for name, _ in self.calls]

    async def wait_for(self, predicate: Any, timeout: float = HANG) -> None:
        async def loop() -> None:
            while not predicate():
                self.update_arrived.clear()
                await self.update_arrived.wait()
        await asyncio.wait_for(loop(), timeout)


@asynccontextmanager
async def running(home: Home, editor: Editor, *args: str, initialize: bool = True,
                  env: dict[str, str] | None = None) -> AsyncIterator[Any]:
    """The real ``pisces --mode acp`` with ``args``, connected to ``editor``; yields the SDK connection."""
    stderr_path = os.path.join(home.root, f"stderr-{len(os.listdir(home.root))}.log")
    with open(stderr_path, "wb") as stderr:
        async with spawn_agent_process(editor, PISCES, "--mode", "acp", *args, env=env or home.env(), cwd=home.cwd,
                                       transport_kwargs={"stderr": stderr, "shutdown_timeout": HANG},
                                       observers=[editor.observe]) as (conn, proc):
            conn.process = proc
            conn.stderr_path = stderr_path
            if initialize:
                await asyncio.wait_for(conn.initialize(protocol_version=1,
                                                       client_capabilities=editor.capabilities()), HANG)
            yield conn
    assert proc.returncode == 0, f"pisces exited with {proc.returncode}: {open(stderr_path).read()[-3000:]}"


def prompt_text(text: str) -> list[Any]:
    return [text_block(text)]
