"""``pisces -p "msg"`` (print the final assistant text) and ``--mode json`` (every event as a JSON line).

``--mode json`` writes what pi writes: the session header line first (``{"type":"session","version":3,…}``),
then every event in pi's shape (``--stream-profile`` picks a leaner ``message_update``). Piped stdin is read
and joined to the prompt, as pi does. In both modes retries and compactions are reported on stderr as they
happen. Exit codes: 0 when the last reply succeeded, 1 when it ended in an error or was aborted (the error
goes to stderr), 2 for bad usage, 130/143/129 after SIGINT/SIGTERM/SIGHUP (the run is aborted, its tool
processes killed, the session closed: pisces.modes.signals).
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

from pisces.core.approval import UIApprover
from pisces.modes import signals
from pisces.modes.entry import open_session_or_report
from pisces.modes.file_args import FileArgError, process_file_args, split_file_args
from pisces.modes.rpc.output import FrameWriter
from pisces.modes.signals import exit_code, kill_tool_processes

SIGNAL_GRACE_S = 2.0  # after a signal, how long the aborted run may take to end before it is cancelled


def _read_piped_stdin() -> str | None:
    try:
        if sys.stdin is None or sys.stdin.isatty():
            return None
        data = sys.stdin.read()
    except (OSError, ValueError):
        return None
    return data if data.strip() else None


def collect_prompts(messages: list[str]) -> list[str]:
    prompts = list(messages)
    piped = _read_piped_stdin()
    if piped is not None:
        if prompts:
            prompts[0] = f"{piped.rstrip()}\n\n{prompts[0]}"
        else:
            prompts = [piped]
    return prompts


async def _run(args: Any, json_events: bool, received: list[int]) -> int:
    file_paths, messages = split_file_args(list(args.messages))
    prompts = collect_prompts(messages)
    first_images: list[Any] | None = None
    if file_paths:  # pi's @file arguments: their text (and images) go before the first message
        try:
            file_text, first_images = process_file_args(file_paths, os.getcwd())
        except FileArgError as exc:
            sys.stderr.write(f"{exc}\n")
            return 1
        prompts = [file_text + (prompts[0] if prompts else ""), *prompts[1:]]
    if not prompts:
        sys.stderr.write("pisces: no prompt given: pass it as an argument or pipe it on stdin\n")
        return 2
    session = await open_session_or_report(args)
    if isinstance(session, int):
        return session
    writer = FrameWriter.take_stdout() if json_events else None
    if writer is not None:
        writer.profile = getattr(args, "stream_profile", None) or writer.profile
        writer.write(session.store.get_header())
        session.subscribe(writer.write)
    session.subscribe(_report_progress, updates=False)  # dict events only
    budget_stop: list[str] = []  # what the session's budget_exceeded said, for the final line

    def on_budget(event: Any) -> None:
        if isinstance(event, dict) and event.get("type") == "budget_exceeded" and event.get("scope") == "session":
            budget_stop.append(_budget_text(event))

    session.subscribe(on_budget, updates=False)
    main = asyncio.current_task()
    assert main is not None
    loop = asyncio.get_running_loop()
    stopping: list[asyncio.Future] = []

    def on_signal(signum: int) -> None:
        """SIGINT/SIGTERM/SIGHUP: abort the run as the ``abort`` command does (the aborted reply is recorded,
        the tool processes killed); should it not end within SIGNAL_GRACE_S, cancel it outright."""
        received.append(signum)
        stopping.append(asyncio.ensure_future(session.abort()))
        loop.call_later(SIGNAL_GRACE_S, main.cancel)

    remove_signals = signals.install(loop, on_signal)
    if session.approval is not None:  # nobody to ask here: what needs approval is denied, and stderr says so

        where = "json mode" if json_events else "print mode (-p)"

        def notice(text: str) -> None:
            sys.stderr.write(f"pisces: {text}\n")

        session.approval.set_approver(UIApprover(lambda: session.ui, where, notice=notice))
    last_error: str | None = None
    try:
        await session.hooks.start("startup")  # extensions: no UI here, dialogs answer their defaults at once
        for index, text in enumerate(prompts):
            if received:
                break
            try:
                await session.prompt(text, images=first_images if index == 0 else None, source="interactive")
            except Exception as exc:  # noqa: BLE001 - preflight failures are user errors
                sys.stderr.write(f"pisces: {exc}\n")
                return 1
            last = session.last_assistant_message()
            last_error = None  # the last reply decides, as in pi
            if last is not None and last.stopReason in ("error", "aborted"):
                last_error = last.errorMessage if isinstance(last.errorMessage, str) else last.stopReason
                if last.stopReason == "aborted" and budget_stop:  # the budget stopped it: say which limit
                    last_error = f"stopped by the budget: {budget_stop[0]}"
        if not json_events and last_error is None and not received:  # a failed reply's text is not the answer
            text = session.last_assistant_text()
            if text:
                sys.stdout.write(text + "\n")
                sys.stdout.flush()
    finally:
        await session.shutdown()  # aborts the run (its tool processes are killed) and closes the session file
        remove_signals()
    if received:
        return signals.exit_code(received[0])
    if last_error is not None:
        sys.stderr.write(f"pisces: {last_error}\n")
        return 1
    return 0


def _budget_text(event: dict[str, Any]) -> str:
    """``maxCostUsd 1 (spent 1.02)``: the limit a budget_exceeded event names, in the settings' own words."""
    from pisces.core.budget.policy import DIMENSIONS  # noqa: PLC0415 - only when a budget ran out

    reason = (event.get("snapshot") or {}).get("reason") or "a limit"
    key = next((limit for dim, limit, _ in DIMENSIONS if dim == reason), reason)
    return f"{key} {event.get('budget')} (spent {event.get('spent')})"


def _report_progress(event: Any) -> None:
    """Retries and automatic compactions, one line each on stderr, while they happen."""
    if not isinstance(event, dict):
        return
    kind = event.get("type")
    if kind == "auto_retry_start":
        seconds = event.get("delayMs", 0) / 1000
        sys.stderr.write(f"pisces: {event.get('errorMessage')}; retrying in {seconds:g} s "
                         f"(attempt {event.get('attempt')} of {event.get('maxAttempts')})\n")
    elif kind == "budget_exceeded":
        sys.stderr.write(f"pisces: budget exceeded: {_budget_text(event)}\n")
    elif kind == "auto_compaction_start":
        sys.stderr.write(f"pisces: compacting the session ({event.get('reason')})\n")
    else:
        return
    sys.stderr.flush()


def run_print(args: Any, *, json_events: bool) -> int:
    received: list[int] = []
    try:
        return asyncio.run(_run(args, json_events, received))
    except KeyboardInterrupt:
        return 130
    except asyncio.CancelledError:
        if not received:
            raise
        return exit_code(received[0])
    finally:
        kill_tool_processes()  # whatever the shutdown could not stop in time (no-op when nothing runs)
