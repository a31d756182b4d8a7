"""Registered extension tools as agent tools, and ``pi.exec``.

An extension's ``execute`` may return an ``AgentToolResult``, a dict ``{"content": [...], "details": ...}``
(content blocks as pi writes them: ``{"type": "text", "text": ...}``, ``{"type": "image", "data", "mimeType"}``)
or a plain string. Raising is how a tool reports an error (``isError: true``), as in pi.
"""

from __future__ import annotations

import asyncio
import inspect
import os
from typing import Any, Callable

from pisces.agent.types import AgentTool, AgentToolResult
from pisces.ai.types import ImageContent, TextContent
from pisces.core.tools.bash_exec import PRIVATE_ENV, kill_process_group


def to_content(value: Any) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, str):
        return [TextContent(text=value)]
    out: list[Any] = []
    for block in value if isinstance(value, (list, tuple)) else [value]:
        if isinstance(block, (TextContent, ImageContent)):
            out.append(block)
        elif isinstance(block, str):
            out.append(TextContent(text=block))
        elif isinstance(block, dict) and block.get("type") == "image":
            out.append(ImageContent(data=str(block.get("data", "")), mimeType=str(block.get("mimeType", ""))))
        elif isinstance(block, dict):
            out.append(TextContent(text=str(block.get("text", ""))))
        else:
            out.append(TextContent(text=str(block)))
    return out


def to_result(value: Any) -> AgentToolResult:
    if isinstance(value, AgentToolResult):
        return value
    if isinstance(value, dict):
        details = value.get("details")
        return AgentToolResult(content=to_content(value.get("content")), details={} if details is None else details)
    return AgentToolResult(content=to_content(value), details={})


class ExtensionTool(AgentTool):
    """A ``ToolDefinition`` the agent can run; ``make_context()`` builds the ``ctx`` its execute receives."""

    def __init__(self, definition: Any, make_context: Callable[[], Any]) -> None:
        self.definition = definition
        self.name = definition.name
        self.label = definition.label
        self.description = definition.description
        self.parameters = definition.parameters
        self._make_context = make_context
        self.approval_tier = definition.tier if definition.tier is not None else "exec"
        if definition.prepare_arguments is not None:
            self.prepare_arguments = definition.prepare_arguments

    async def execute(self, tool_call_id: str, params: dict[str, Any], signal: Any, on_update: Any) -> Any:
        d = self.definition

        def update(partial: Any) -> None:
            on_update(to_result(partial))

        args = (tool_call_id, params, signal, update, self._make_context())
        result = d.execute(*args[:min(d.execute_args, 5)])
        if inspect.isawaitable(result):
            result = await result
        return to_result(result)


class ExecResult:
    """What ``pi.exec`` returns; also readable as a dict (``result["stdout"]``)."""

    __slots__ = ("stdout", "stderr", "code", "killed")

    def __init__(self, stdout: str, stderr: str, code: int | None, killed: bool) -> None:
        self.stdout, self.stderr, self.code, self.killed = stdout, stderr, code, killed

    def __getitem__(self, key: str) -> Any:
        return getattr(self, key)

    def __repr__(self) -> str:
        return f"ExecResult(code={self.code}, killed={self.killed}, stdout={self.stdout[:60]!r})"


async def run_exec(command: str, args: list[str], *, signal: Any = None, timeout_ms: Any = None,
                   cwd: str | None = None, sandbox: Any = None, workspace: str | None = None) -> ExecResult:
    """Run a program without a shell in its own process group; an abort or the timeout kills the group.
    ``sandbox`` (a session's ``pisces.core.sandbox.launch.Sandbox``) confines its writes to ``workspace`` (else
    ``cwd``) and the private temp dir, as the bash tool's; a ruleset that cannot be built fails the call."""
    launch = None
    try:
        extra: dict[str, Any] = {}
        env: dict[str, str] | None = {k: v for k, v in os.environ.items() if k not in PRIVATE_ENV}
        argv = [command, *[str(a) for a in args]]
        if sandbox is not None:
            launch = await asyncio.to_thread(sandbox.prepare, workspace or cwd or os.getcwd())
            if launch is not None:
                env, extra, argv = launch.env, launch.popen_kwargs(), launch.wrap(argv)
        proc = await asyncio.create_subprocess_exec(*argv, cwd=cwd, env=env,
                                                    stdin=asyncio.subprocess.DEVNULL,
                                                    stdout=asyncio.subprocess.PIPE,
                                                    stderr=asyncio.subprocess.PIPE, start_new_session=True, **extra)
    except OSError as exc:
        return ExecResult("", str(exc), 127 if isinstance(exc, FileNotFoundError) else 126, False)
    finally:
        if launch is not None:
            launch.close()
    killed = False

    def kill() -> None:
        nonlocal killed

        killed = True
        kill_process_group(proc.pid)

    remove = signal.add_listener(kill) if signal is not None else (lambda: None)
    limit = float(timeout_ms) / 1000 if isinstance(timeout_ms, (int, float)) and timeout_ms > 0 else None
    timer = asyncio.get_running_loop().call_later(limit, kill) if limit else None
    try:
        out, err = await proc.communicate()
    finally:
        remove()
        if timer is not None:
            timer.cancel()
    return ExecResult(out.decode("utf-8", "replace"), err.decode("utf-8", "replace"), proc.returncode, killed)
