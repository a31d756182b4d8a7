"""The ``bash`` tool: run a command, stream throttled snapshots of the output's tail, return the tail.

Updates: first ``{content: []}`` (no details), then at most one snapshot per 100 ms with
``details: {truncation?, fullOutputPath?}``. The result is the output (or ``(no output)``) plus a notice
when it was truncated; a non-zero exit, an abort and a timeout are error results with pi's texts. With a
``sandbox`` the local command is confined (docs/security.md#the-os-sandbox); when the sandbox blocked it, the
person is asked through the sandbox's ``escalate`` and, approved, the command runs again unconfined.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from pisces.agent.types import AgentTool, AgentToolResult, ToolError, ToolUpdate
from pisces.ai.abort import AbortSignal
from pisces.ai.types import TextContent
from pisces.core.tools.bash_exec import OutputAccumulator, OutputSnapshot, ShellError, get_shell_env, run_shell

from ._common import text_result
from .backends import BackendError, ShellBackend
from .descriptions import BASH_DESCRIPTION
from .schemas import BASH_SCHEMA
from .truncate import DEFAULT_MAX_BYTES, format_size, js_number

UPDATE_THROTTLE = 0.1  # seconds


def format_bash_output(snap: OutputSnapshot, last_line_bytes: int, empty_text: str = "(no output)"
                       ) -> tuple[str, dict[str, Any] | None]:
    """The result text (output + truncation notice) and details, as pi's bash tool builds them."""
    t = snap.truncation
    text = snap.content or empty_text
    if not t.truncated:
        return text, None
    details: dict[str, Any] = {"truncation": t.to_dict()}
    if snap.full_output_path is not None:
        details["fullOutputPath"] = snap.full_output_path
    if snap.full_output_error is not None:
        details["fullOutputError"] = snap.full_output_error
    start = t.totalLines - t.outputLines + 1
    end = t.totalLines
    path = snap.full_output_path
    if snap.full_output_error is not None:
        path = f"{path} ({snap.full_output_error})"
    if t.lastLinePartial:
        text += (f"\n\n[Showing last {format_size(t.outputBytes)} of line {end} (line is "
                 f"{format_size(last_line_bytes)}). Full output: {path}]")
    elif t.truncatedBy == "lines":
        text += f"\n\n[Showing lines {start}-{end} of {t.totalLines}. Full output: {path}]"
    else:
        text += (f"\n\n[Showing lines {start}-{end} of {t.totalLines} ({format_size(DEFAULT_MAX_BYTES)} limit). "
                 f"Full output: {path}]")
    return text, details


def _append_status(text: str, status: str) -> str:
    return f"{text}\n\n{status}" if text else status


class BashTool(AgentTool):
    name = "bash"
    label = "bash"
    description = BASH_DESCRIPTION
    parameters = BASH_SCHEMA

    def __init__(self, cwd: str, *, shell_path: str | None = None, command_prefix: str | None = None,
                 env: dict[str, str] | None = None, shell: ShellBackend | None = None, sandbox: Any = None) -> None:
        self.cwd = cwd
        self.shell_path = shell_path
        self.command_prefix = command_prefix
        self.env = env
        self.shell = shell  # None: a local process
        # pisces.core.sandbox.launch.Sandbox (None: unconfined); a host's terminal (``shell``) is never confined
        self.sandbox = sandbox

    async def execute(self, tool_call_id: str, params: dict[str, Any], signal: AbortSignal,
                      on_update: ToolUpdate) -> AgentToolResult:
        command = params.get("command")
        if not isinstance(command, str):
            command = "undefined" if command is None else str(command)  # pi runs `undefined` (exit 127)
        if self.command_prefix:
            command = f"{self.command_prefix}\n{command}"
        timeout = params.get("timeout")
        loop = asyncio.get_running_loop()
        acc = OutputAccumulator(temp_prefix="pisces-bash")
        throttle: dict[str, Any] = {"dirty": False, "last": 0.0, "timer": None}

        def emit() -> None:
            if not throttle["dirty"]:
                return
            throttle["dirty"] = False
            throttle["last"] = time.monotonic()
            snap = acc.snapshot(persist_if_truncated=True)
            details: dict[str, Any] = {}
            if snap.truncation.truncated:
                details["truncation"] = snap.truncation.to_dict()
            if snap.full_output_path is not None:
                details["fullOutputPath"] = snap.full_output_path
            if snap.full_output_error is not None:
                details["fullOutputError"] = snap.full_output_error
            on_update(AgentToolResult(content=[TextContent(text=snap.content)], details=details))

        def cancel_timer() -> None:
            if throttle["timer"] is not None:
                throttle["timer"].cancel()
                throttle["timer"] = None

        def fire() -> None:
            throttle["timer"] = None
            emit()

        def on_chunk(_text: str) -> None:
            throttle["dirty"] = True
            delay = UPDATE_THROTTLE - (time.monotonic() - throttle["last"])
            if delay <= 0:
                cancel_timer()
                emit()
            elif throttle["timer"] is None:
                throttle["timer"] = loop.call_later(delay, fire)

        on_update(AgentToolResult(content=[]))
        launch = None
        blocked_note = ""
        try:
            if self.sandbox is not None and self.shell is None:
                launch = await asyncio.to_thread(self._prepare)
            result = await run_shell(command, self.cwd, signal=signal,
                                     timeout=timeout if isinstance(timeout, (int, float)) else None,
                                     on_chunk=on_chunk, env=self.env, shell_path=self.shell_path, accumulator=acc,
                                     backend=self.shell, tool_call_id=tool_call_id, sandbox=launch)
            if launch is not None and not (result.cancelled or result.timed_out):
                from pisces.core.sandbox.launch import blocked_by_sandbox, blocked_reason  # noqa: PLC0415 - loaded with the sandbox

                if blocked_by_sandbox(result.output, result.exit_code, launch):
                    why = blocked_reason(launch)
                    escalate = getattr(self.sandbox, "escalate", None)
                    refused = (await escalate(command, tool_call_id, why, signal) if escalate is not None
                               else "nobody can be asked to run it outside the sandbox")
                    if refused is None:  # approved: the same command again, unconfined
                        cancel_timer()
                        acc = OutputAccumulator(temp_prefix="pisces-bash")
                        result = await run_shell(command, self.cwd, signal=signal,
                                                 timeout=timeout if isinstance(timeout, (int, float)) else None,
                                                 on_chunk=on_chunk, env=self.env, shell_path=self.shell_path,
                                                 accumulator=acc, tool_call_id=tool_call_id)
                    else:
                        blocked_note = (f"The sandbox blocked this command ({launch.describe()}); it was not run "
                                        f"outside the sandbox: {refused}")
        except (ShellError, BackendError, OSError) as exc:
            raise ToolError(str(exc)) from None
        finally:
            cancel_timer()
        emit()
        snap = OutputSnapshot(result.output, result.truncation, result.full_output_path, result.full_output_error)
        if result.cancelled or result.timed_out:
            text, _ = format_bash_output(snap, result.last_line_bytes, "")
            if result.cancelled:
                raise ToolError(_append_status(text, "Command aborted"))
            assert isinstance(timeout, (int, float))  # only a command given a timeout times out
            raise ToolError(_append_status(text, f"Command timed out after {js_number(timeout)} seconds"))
        text, details = format_bash_output(snap, result.last_line_bytes)
        if result.exit_code is not None and result.exit_code != 0:
            status = f"Command exited with code {result.exit_code}"
            raise ToolError(_append_status(text, f"{status}\n\n{blocked_note}" if blocked_note else status))
        return text_result(text, details)

    def _prepare(self) -> Any:
        """The sandbox's launch for this command (None: unconfined). The ruleset is built off the loop."""
        return self.sandbox.prepare(self.cwd, self.env if self.env is not None else get_shell_env())


__all__ = ["BashTool", "BASH_SCHEMA", "BASH_DESCRIPTION", "format_bash_output"]
