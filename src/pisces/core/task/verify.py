"""Verification of isolated tasks: which checks a call asks for (``verify`` and ``task.verification.*``), and
one attempt of running them in the task's worktree.

Each command runs through the user's shell in its own process group, with its combined output going straight
to ``<artifacts>/<id>.verify.a<attempt>-<n>-<name>.log`` (removed again when the command printed nothing). A
command past its ``timeoutMs`` has its whole process group killed and counts as exit code 124; an abort kills
it the same way. Each command is confined by the session's OS sandbox (``AttemptContext.sandbox``) to the worktree
and a private temp dir; one the sandbox blocked is offered to the person to run outside (docs/approval.md).
"""

from __future__ import annotations

import asyncio
import os
import re
import signal as _signal
import time
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

from pisces.ai.abort import AbortSignal
from pisces.core.task import events

NEEDS_ISOLATION = "Verification requires isolated task execution. Pass isolated: true or disable verify."
NOTHING_TO_RUN = "Verification requested but no verification profile or commands were provided."
NO_LSP = "LSP-based task verification is not implemented yet. Use command checks for now."
NO_COMMANDS = ("Verification requires at least one command. Provide verify.commands or configure "
               "task.verification.profiles.")
TIMEOUT_EXIT_CODE = 124
FAILURE_POLICIES = ("return_failure", "retry_once", "discard_patch")


@dataclass
class Resolved:
    requested: bool
    profile: str | None = None
    commands: list[dict[str, Any]] = field(default_factory=list)
    max_retries: int = 1
    on_failure: str = "return_failure"
    error: str | None = None
    # where the commands come from: "model" (the call's verify.commands: approved like bash) or "settings" (a
    # profile of task.verification, which a project can only set when it is trusted)
    commands_from: str = "model"

    def result(self, status: str, attempts: list[dict[str, Any]], retries: int) -> dict[str, Any]:
        """A VerificationResult (seed 000)."""
        out: dict[str, Any] = {"requested": True}
        if self.profile is not None:
            out["profile"] = self.profile
        out.update(mode="command", status=status, attempts=attempts, retriesUsed=retries, onFailure=self.on_failure)
        return out


def _command(value: Any) -> dict[str, Any] | None:
    if not isinstance(value, dict):
        return None
    name = value["name"].strip() if isinstance(value.get("name"), str) else ""
    command = value["command"].strip() if isinstance(value.get("command"), str) else ""
    if not name or not command:
        return None
    out: dict[str, Any] = {"name": name, "command": command}
    timeout = value.get("timeoutMs")
    if isinstance(timeout, (int, float)) and not isinstance(timeout, bool) and timeout > 0:
        out["timeoutMs"] = timeout
    if value.get("optional") is True:
        out["optional"] = True
    return out


def _config(value: Any) -> dict[str, Any] | None:
    """A verify object or profile, with invalid fields dropped (None when it is not an object at all)."""
    if not isinstance(value, dict):
        return None
    out: dict[str, Any] = {}
    if isinstance(value.get("profile"), str) and value["profile"].strip():
        out["profile"] = value["profile"].strip()
    if value.get("mode") in ("none", "command", "lsp", "profile"):
        out["mode"] = value["mode"]
    if isinstance(value.get("commands"), list):
        out["commands"] = [c for c in map(_command, value["commands"]) if c is not None]
    if value.get("lspDiagnostics") is True:
        out["lspDiagnostics"] = True
    retries = value.get("maxRetries")
    if isinstance(retries, (int, float)) and not isinstance(retries, bool) and retries >= 0:
        out["maxRetries"] = int(retries)
    if value.get("onFailure") in FAILURE_POLICIES:
        out["onFailure"] = value["onFailure"]
    return out


def resolve(params: dict[str, Any], settings: dict[str, Any], isolated: bool) -> Resolved:
    """What ``params["verify"]`` asks for, given the ``task.verification`` settings."""
    verify = params.get("verify")
    enabled = settings.get("enabled") is True
    required = settings.get("requireForIsolated") is True
    default_value = settings.get("defaultProfile")
    default = default_value.strip() if isinstance(default_value, str) and default_value.strip() else None
    retries_value = settings.get("maxRetries")
    max_retries = int(retries_value) if isinstance(retries_value, (int, float)) and not isinstance(
        retries_value, bool) and retries_value >= 0 else 1
    off = Resolved(requested=False, max_retries=max_retries)
    if not isolated:
        if verify is not None and verify is not False:
            return Resolved(requested=False, error=NEEDS_ISOLATION)
        return off
    if verify is False:
        return off
    inline: dict[str, Any] | None = None
    if verify is None:
        if not (enabled and required):
            return off
        profile = default
    elif verify is True:
        profile = default
    elif isinstance(verify, str):
        profile = verify.strip() or default
    else:
        inline = _config(verify)
        profile = (inline or {}).get("profile") or default
    if not profile and not (inline or {}).get("commands"):
        return Resolved(requested=False, error=NOTHING_TO_RUN)
    base: dict[str, Any] = {}
    if profile:
        given = settings.get("profiles")
        profiles = given if isinstance(given, dict) else {}
        found = _config(profiles.get(profile))
        if found is None:
            return Resolved(requested=False, error=f'Unknown or invalid verification profile "{profile}".')
        base = found
    merged = {**base, **(inline or {})}
    if merged.get("mode") == "none":
        return off
    if merged.get("mode") in ("lsp", "profile") or merged.get("lspDiagnostics") is True:
        return Resolved(requested=False, error=NO_LSP)
    commands = merged.get("commands") or []
    if not commands:
        return Resolved(requested=False, error=NO_COMMANDS)
    return Resolved(requested=True, profile=profile, commands=commands,
                    max_retries=merged.get("maxRetries", max_retries),
                    on_failure=merged.get("onFailure", "return_failure"),
                    commands_from="model" if (inline or {}).get("commands") else "settings")


def failure_message(attempt: dict[str, Any] | None) -> str:
    if attempt is None:
        return "Verification failed."
    failed = [c["name"] for c in attempt["commandResults"] if c["exitCode"] != 0 and c.get("optional") is not True]
    if not failed:
        return attempt.get("error") or "Verification failed."
    return f"Verification failed: {', '.join(failed)}"


def failed_commands(attempt: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for c in attempt["commandResults"] if c["exitCode"] != 0 and c.get("optional") is not True]


def slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "check"


@dataclass
class AttemptContext:
    cwd: str  # the worktree
    artifacts_dir: str
    task_id: str
    emit: Callable[[dict[str, Any]], None]
    shell: tuple[str, list[str]]
    env: dict[str, str]
    signal: AbortSignal
    # the approval of one command: None to run it, else why it may not (the session's gate, see runner.py)
    check: Callable[[str], Awaitable[str | None]] | None = None
    # the OS sandbox (pisces.core.sandbox.launch.Sandbox, a session's child()): each command is confined to the
    # worktree and a private temp dir unless a person turned the sandbox off; None: unconfined
    sandbox: Any = None


async def run_attempt(resolved: Resolved, ctx: AttemptContext, number: int) -> dict[str, Any]:
    """Run every command once, in order, emitting the verification events of seed 000. An abort stops the
    attempt after killing the running command (the attempt then counts as failed)."""
    started = int(time.time() * 1000)
    ctx.emit(events.verification_start(ctx.task_id, number, resolved.profile))
    results: list[dict[str, Any]] = []
    failed = False
    for index, command in enumerate(resolved.commands):
        if ctx.signal.aborted:
            failed = True
            break
        ctx.emit(events.verification_command_start(ctx.task_id, number, command["name"]))
        log_name = f"{ctx.task_id}.verify.a{number}-{index + 1}-{slug(command['name'])}.log"
        log = os.path.join(ctx.artifacts_dir, log_name)
        t0 = time.monotonic()
        refused = await ctx.check(command["command"]) if ctx.check is not None else None
        if refused is not None:
            code, timed_out = await asyncio.to_thread(_refuse, log, refused)
        else:
            code, timed_out = await _run_command(command, ctx, log)
        duration = int((time.monotonic() - t0) * 1000)
        preview = await asyncio.to_thread(_finish_log, log)
        result: dict[str, Any] = {"name": command["name"], "command": command["command"], "exitCode": code,
                                  "durationMs": duration}
        if command.get("optional"):
            result["optional"] = True
        result["timedOut"] = timed_out
        if preview is not None:
            result["artifactPath"] = log
            result["outputPreview"] = preview
        results.append(result)
        ctx.emit(events.verification_command_end(ctx.task_id, number, command["name"], code, duration,
                                                 log if preview is not None else None))
        if code != 0 and not command.get("optional"):
            failed = True
    status = "failed" if failed else "passed"
    ctx.emit(events.verification_end(ctx.task_id, number, status))
    attempt: dict[str, Any] = {"attempt": number, "status": status, "startedAt": started,
                               "endedAt": int(time.time() * 1000), "commandResults": results}
    if failed:
        attempt["error"] = ("Verification was aborted." if ctx.signal.aborted
                            else "One or more verification commands failed.")
    return attempt


async def _run_command(command: dict[str, Any], ctx: AttemptContext, log: str) -> tuple[int, bool]:
    """Run one command (confined by ``ctx.sandbox``). When the sandbox blocked it, the person is asked through
    the sandbox's escalation whether to run it outside; approved, it runs again unconfined (its log then holds
    both runs), else the log says why it was not."""
    launch = None
    if ctx.sandbox is not None:
        try:
            launch = await asyncio.to_thread(ctx.sandbox.prepare, ctx.cwd, ctx.env)
        except OSError as exc:
            await asyncio.to_thread(_refuse, log, f"the sandbox could not be set up ({exc})")
            return REFUSED_EXIT_CODE, False
    code, timed_out = await _spawn(command, ctx, log, launch, append=False)
    if launch is None or code == 0 or timed_out or ctx.signal.aborted:
        return code, timed_out
    from pisces.core.sandbox.launch import blocked_by_sandbox, blocked_reason  # noqa: PLC0415 - loaded with the sandbox

    if not blocked_by_sandbox(await asyncio.to_thread(_tail, log), code, launch):
        return code, timed_out
    why = blocked_reason(launch)
    escalate = getattr(ctx.sandbox, "escalate", None)
    refused = (await escalate(command["command"], f"{ctx.task_id}.verify", why, ctx.signal) if escalate is not None
               else "nobody can be asked to run it outside the sandbox")
    if refused is not None:
        await asyncio.to_thread(_append, log, f"\npisces: the sandbox blocked this command ({launch.describe()}); "
                                              f"it was not run outside the sandbox: {refused}\n")
        return code, timed_out
    await asyncio.to_thread(_append, log, "\npisces: approved to run outside the sandbox; run again:\n")
    return await _spawn(command, ctx, log, None, append=True)


async def _spawn(command: dict[str, Any], ctx: AttemptContext, log: str, launch: Any, *, append: bool
                 ) -> tuple[int, bool]:
    shell, args = ctx.shell
    out = await asyncio.to_thread(_open_log, log, append)
    try:
        env, extra, argv = ctx.env, {}, [shell, *args, command["command"]]
        if launch is not None:
            env, extra, argv = launch.env, launch.popen_kwargs(), launch.wrap(argv)
        proc = await asyncio.create_subprocess_exec(
            *argv, cwd=ctx.cwd, env=env, stdin=asyncio.subprocess.DEVNULL,
            stdout=out, stderr=asyncio.subprocess.STDOUT, start_new_session=True, **extra)
    except OSError as exc:
        out.write(f"cannot start {shell}: {exc}\n".encode())
        out.close()
        return 127, False
    finally:
        if launch is not None:
            launch.close()
    out.close()  # the child holds its own copy

    def kill() -> None:
        try:
            os.killpg(proc.pid, _signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    remove = ctx.signal.add_listener(kill)
    timed_out = False
    try:
        timeout = command.get("timeoutMs")
        try:
            await asyncio.wait_for(asyncio.shield(proc.wait()), timeout / 1000 if timeout else None)
        except asyncio.TimeoutError:
            timed_out = True
            kill()
            await proc.wait()
    except asyncio.CancelledError:
        kill()
        raise
    finally:
        remove()
        kill()  # what the command left running in its group goes with it
    if timed_out:
        return TIMEOUT_EXIT_CODE, True
    code = proc.returncode if proc.returncode is not None else 1
    return (128 - code if code < 0 else code), False


def _tail(path: str) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(max(os.path.getsize(path) - 20000, 0))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def _append(path: str, text: str) -> None:
    with open(path, "ab") as f:
        f.write(text.encode())


REFUSED_EXIT_CODE = 126


def _refuse(log: str, why: str) -> tuple[int, bool]:
    """A command the approval refused: not run, exit code 126, the reason as its output."""
    with _open_log(log) as f:
        f.write(f"not run: {why}\n".encode())
    return REFUSED_EXIT_CODE, False


def _open_log(path: str, append: bool = False) -> Any:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    return open(path, "ab" if append else "wb")


def _finish_log(path: str) -> str | None:
    """The preview (last 20 lines, at most 4000 characters) of a log; an empty log is removed (None)."""
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            if size > 65536:
                f.seek(size - 65536)
            tail = f.read().decode("utf-8", "replace")
    except OSError:
        return None
    text = tail.strip()
    if not text:
        try:
            os.unlink(path)
        except OSError:
            pass
        return None
    return "\n".join(text.split("\n")[-20:])[-4000:]
