"""The RPC ``bash`` command: run a command for the user, record it as a ``bashExecution`` message.

The command runs with the user's shell in the session cwd (settings ``shellPath`` and
``shellCommandPrefix`` apply), stdout and stderr merged, ANSI codes and control characters stripped, the
output's tail kept within pi's limits with the full output in a temp file. ``abort_bash`` kills the
process group at once. The message reaches the model on the next prompt; while a run streams it is held
until then (as pi). It belongs to the session the command ran in: when ``new_session``, ``switch_session``,
``fork`` or ``clone`` replaced that session meanwhile, the result is appended to its file (as pi's old
session object does), or dropped when that session never reached the disk; never to the new session.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from pisces.ai.abort import AbortSignal
from pisces.ai.types import now_ms
from pisces.core.store import BashExecutionMessage, SessionManager
from pisces.core.tools.bash_exec import ShellError, run_shell

if TYPE_CHECKING:
    from pisces.core.session.agent_session import AgentSession


class BashRunner:
    """The RPC bash commands of one session; ``abort()`` cancels every one still running."""

    def __init__(self) -> None:
        self._signals: set[AbortSignal] = set()

    def abort(self) -> None:
        for signal in list(self._signals):
            signal.abort()

    async def run(self, session: AgentSession, command: str) -> dict[str, Any]:
        handled = await session.hooks.user_bash(command, session.cwd)
        if handled is not None:  # an extension ran it (user_bash with a result)
            message = BashExecutionMessage(command=command, output=handled["output"], cancelled=handled["cancelled"],
                                           truncated=handled["truncated"], timestamp=now_ms())
            if handled.get("exitCode") is not None:
                message.exitCode = handled["exitCode"]
            session.record_bash(message)
            return handled
        settings = session.settings
        prefix = settings.shell_command_prefix
        script = f"{prefix}\n{command}" if prefix else command
        origin_id, origin_file = session.store.get_session_id(), session.store.get_session_file()
        signal = AbortSignal()
        self._signals.add(signal)
        try:
            result = await run_shell(script, session.cwd, signal=signal, shell_path=settings.shell_path,
                                     sanitize=True)
        except ShellError as exc:
            raise RuntimeError(str(exc)) from None
        finally:
            self._signals.discard(signal)
        data: dict[str, Any] = {"output": result.output}
        if result.exit_code is not None:
            data["exitCode"] = result.exit_code
        data["cancelled"] = result.cancelled
        data["truncated"] = result.truncated
        if result.full_output_path:
            data["fullOutputPath"] = result.full_output_path
        if result.full_output_error:
            data["fullOutputError"] = result.full_output_error
        # fullOutputPath is null when there is no full-output file, as the seeds' BashExecutionMessage has it
        message = BashExecutionMessage(command=command, output=result.output, cancelled=result.cancelled,
                                       truncated=result.truncated, fullOutputPath=result.full_output_path or None,
                                       timestamp=now_ms())
        if result.exit_code is not None:
            message.exitCode = result.exit_code
        if session.store.get_session_id() == origin_id:
            session.record_bash(message)
        elif origin_file:
            await asyncio.to_thread(_record_in_file, origin_file, origin_id, message)
        return data


def _record_in_file(path: str, session_id: str, message: Any) -> None:
    """Append ``message`` to the session file it ran for, if that session is on disk."""

    try:
        store = SessionManager.open(path)
    except (OSError, ValueError):
        return
    with store:
        if store.is_on_disk() and store.get_session_id() == session_id:
            store.append_message(message)


async def run_rpc_bash(session: AgentSession, command: str) -> dict[str, Any]:
    if session.bash_runner is None:
        session.bash_runner = BashRunner()
    return await session.bash_runner.run(session, command)
