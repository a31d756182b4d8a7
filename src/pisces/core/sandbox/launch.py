"""The one launcher that applies a ``SandboxPolicy`` to a command pisces starts on the model's behalf.

``Sandbox`` belongs to a session. ``prepare(workspace, env)`` returns a ``Launch`` (or None when the policy is
``off`` or the kernel cannot confine): ``popen_kwargs()`` go to ``subprocess``/``asyncio`` (``preexec_fn``
applies the Landlock ruleset in the child before ``exec``; the command does not inherit its descriptor), ``env`` points
``TMPDIR``/``TMP``/``TEMP`` at the session's private temp dir, and ``close()`` (right after the spawn) closes
the parent's copy of the ruleset. The child cannot run unconfined by mistake: when the ruleset cannot be
applied the spawn fails.

What is confined: writes (create, write, truncate, remove, rename, link, mknod) beneath anything but the
policy's writable directories; with ``network`` off, every socket but a Unix-domain one (a seccomp filter,
``seccomp.py``: TCP, UDP, raw, packet, netlink...; plus Landlock's TCP rules, ABI 4+, and its abstract
Unix-socket scope, ABI 6+). Reads and execution are not confined, nor Unix sockets bound to a path,
signals to other processes of the user, or ioctls on already open terminals. Where the kernel has no
Landlock the sandbox says so once on stderr and commands run with approvals alone (``state()["enforced"]``
is then False).

The policy is re-read from the settings each time (so a stricter setting applies at once), but a reload never
loosens it below what the session started with: loosening takes a person's action (``--sandbox``,
``set_sandbox``/``/sandbox``, an approved escalation of one command).
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import replace
from functools import cache
from typing import Any, Awaitable, Callable

from pisces.core.sandbox.policy import STRICTNESS, SandboxPolicy, check_mode, resolve


@cache
def _blocked_regexes() -> tuple[re.Pattern[str], re.Pattern[str]]:
    """(what a command prints when the kernel refused it something: EACCES, EPERM, EROFS, EXDEV of a refused
    rename; what it prints when the network was refused). Compiled on the first confined command that failed,
    not at start-up."""
    return (re.compile(r"Permission denied|Operation not permitted|Read-only file system|PermissionError|"
                       r"EACCES|EPERM|Invalid cross-device link"),
            re.compile(r"Could not resolve host|Temporary failure in name resolution|Name or service not known|"
                       r"Network is unreachable|getaddrinfo|nodename nor servname", re.I))

Escalate = Callable[[str, str, str, Any], Awaitable["str | None"]]


class Launch:
    """One confined spawn: pass ``popen_kwargs()`` and ``env`` to it, ``close()`` after it."""

    def __init__(self, ruleset: Any, env: dict[str, str], policy: SandboxPolicy, writable: list[str],
                 net_filter: Any = None, *, seatbelt: bool = False) -> None:
        self.ruleset = ruleset  # landlock.Ruleset on Linux; None under Seatbelt
        self.env = env
        self.policy = policy
        self.writable = writable
        self.net_filter = net_filter  # seccomp.Filter when the network is off
        self.seatbelt = seatbelt  # macOS: the command runs under sandbox-exec (``wrap``)

    def popen_kwargs(self) -> dict[str, Any]:
        # no pass_fds: the child applies the ruleset before subprocess closes the inherited descriptors, so the
        # command itself never holds it
        return {"preexec_fn": self.preexec} if self.ruleset is not None else {}

    def wrap(self, argv: list[str]) -> list[str]:
        """The argv to spawn: ``argv`` itself on Linux, under ``sandbox-exec`` with the policy's profile on
        macOS. Every spawn of a ``Launch`` passes through here."""
        if not self.seatbelt:
            return list(argv)
        from pisces.core.sandbox import seatbelt  # noqa: PLC0415 - macOS only

        return seatbelt.argv(list(argv), self.writable, network=self.policy.network)

    def preexec(self) -> None:
        """In the child: no_new_privs and the Landlock ruleset, then (network off) the seccomp filter. Any step
        that fails raises, and the spawn fails: the command never runs less confined than asked."""
        if self.ruleset is not None:
            self.ruleset.preexec()
        if self.net_filter is not None:
            self.net_filter.install()

    def close(self) -> None:
        if self.ruleset is not None:
            self.ruleset.close()

    def describe(self) -> str:
        where = " and ".join(self.writable) if self.writable else "nowhere"
        net = "" if self.policy.network else "; no network"
        return f"sandbox {self.policy.mode}: writes only beneath {where}{net}"


class Sandbox:
    """A session's sandbox: its policy (re-resolved, never looser than at the start), its private temp dir,
    and ``escalate`` (set by the approval gate: asks a person to run one blocked command unconfined)."""

    def __init__(self, settings: Any, cli_mode: str | None = None, *,
                 people_approve: Callable[[], bool] = lambda: False, delegated: bool = False,
                 parent: Sandbox | None = None) -> None:
        if cli_mode is not None:
            check_mode(cli_mode)
        self.settings = settings
        self.cli_mode = cli_mode
        self.command_mode: str | None = None
        self.command_network: bool | None = None  # a person's network switch (None: the settings' or default)
        self.changes: list[dict[str, Any]] = []  # the person's changes of this session (get_state shows them)
        self.people_approve = people_approve
        self.delegated = delegated
        self.escalate: Escalate | None = None
        self._parent = parent
        self._start = self._from_settings() if parent is None else None
        self._temp: str | None = None
        self._warned: set[str] = set()
        self.extra_roots: list[str] = []  # writable beside the policy's (a worktree's git directories)

    # -- the policy ---------------------------------------------------------------------------------
    def _from_settings(self) -> SandboxPolicy:
        return resolve(self.settings, None, people_approve=True)

    def policy(self) -> SandboxPolicy:
        if self._parent is not None:
            return self._parent.policy().for_delegated()
        now = resolve(self.settings, self.cli_mode, people_approve=self.people_approve(),
                      command_mode=self.command_mode)
        for warning in now.warnings:
            self._warn(warning)
        start = self._start
        if start is not None:
            # a reload may tighten, never loosen: the settings' mode (unless a person's flag or command chose
            # one), network and roots at the start hold
            mode = now.mode
            if now.source not in ("cli", "command") and start.source != "default" and \
                    STRICTNESS[now.mode] < STRICTNESS[start.mode]:
                mode = start.mode
            now = replace(now, mode=mode, network=now.network and start.network,
                          writable_roots=tuple(r for r in now.writable_roots if r in start.writable_roots))
        if self.command_network is not None:
            now = replace(now, network=self.command_network)
        if self.delegated:
            now = now.for_delegated()
        return now

    def set_mode(self, mode: str | None) -> dict[str, Any]:
        """A person's command (None: back to the flag, the settings or the default)."""
        self.command_mode = check_mode(mode) if mode is not None else None
        return self.state()

    def change(self, by: str, *, mode: str | None = None, network: bool | None = None, reset_mode: bool = False,
               reset_network: bool = False) -> dict[str, Any]:
        """A person's change at run time (``set_sandbox`` over RPC, ``/sandbox`` in the terminal UI): ``mode``
        and/or ``network`` (``reset_*``: back to the flag, the settings or the default). Only a front end a
        person drives calls this: no tool reaches it, so the model cannot. Tightening and loosening are both
        allowed; every change is recorded (``changes`` in ``state()``, and a line on stderr when it loosens, unless
        stderr is the terminal a UI draws on)."""
        if mode is not None:
            check_mode(mode)
        before = self.policy()
        if mode is not None or reset_mode:
            self.command_mode = mode
        if network is not None or reset_network:
            self.command_network = network
        after = self.policy()
        loosened = STRICTNESS[after.mode] < STRICTNESS[before.mode] or (after.network and not before.network)
        record = {"by": by, "at": _now(), "from": {"mode": before.mode, "network": before.network},
                  "to": {"mode": after.mode, "network": after.network}, "loosened": loosened}
        self.changes = [*self.changes[-19:], record]
        if loosened and not sys.stderr.isatty():  # a log; on a terminal the UI drawing there shows it instead
            sys.stderr.write(f"pisces: the sandbox was loosened by {by}: {before.mode} -> {after.mode}, network "
                             f"{'on' if before.network else 'off'} -> {'on' if after.network else 'off'}\n")
        return self.state()

    def child(self, worktree: str | None = None) -> Sandbox:
        """The sandbox of a subagent or of verification: the same settings and temp dir, confined by default,
        the same escalation (the same person is asked). For a git ``worktree``, its own git directory and the
        repository's object store are writable too (``git add``/``commit`` in a detached worktree write there);
        the repository's refs, configuration, hooks and working tree are not."""
        kid = Sandbox(self.settings, self.cli_mode, people_approve=self.people_approve, parent=self)
        kid.escalate = self.escalate
        kid._temp = self.temp_dir()
        kid.extra_roots = worktree_git_dirs(worktree) if worktree else []
        return kid

    # -- the kernel ----------------------------------------------------------------------------------
    def abi(self) -> int:
        if sys.platform == "darwin":
            return 0
        from pisces.core.sandbox import landlock  # noqa: PLC0415 - ctypes loads with the first confined command

        return landlock.available()

    def _seatbelt(self) -> bool:
        if sys.platform != "darwin":
            return False
        from pisces.core.sandbox import seatbelt  # noqa: PLC0415 - macOS only

        return seatbelt.available()

    def temp_dir(self) -> str:
        """The private temp dir (mode 0700) confined commands may write, removed when pisces exits."""
        if self._parent is not None:
            return self._parent.temp_dir()
        if self._temp is None or not os.path.isdir(self._temp):
            import atexit  # noqa: PLC0415 - only when a confined command runs
            import shutil  # noqa: PLC0415 - as atexit
            import tempfile  # noqa: PLC0415 - as atexit

            self._temp = tempfile.mkdtemp(prefix="pisces-sandbox-")

            atexit.register(shutil.rmtree, self._temp, True)
        return self._temp

    def prepare(self, workspace: str, env: dict[str, str] | None = None,
                policy: SandboxPolicy | None = None) -> Launch | None:
        """A ``Launch`` for one command in ``workspace`` (None: run it unconfined: the policy is off or the
        kernel cannot confine, said once). Raises ``OSError`` when the ruleset cannot be built."""
        policy = policy or self.policy()
        if not policy.confines:
            return None
        if sys.platform == "darwin":
            return self._prepare_seatbelt(workspace, env, policy)
        abi = self.abi()
        if abi <= 0:
            self._warn("this kernel has no Landlock (or it is not enabled): commands run without an OS sandbox, "
                       "confined by the approval policy alone")
            return None
        from pisces.core.sandbox import landlock  # noqa: PLC0415 - ctypes loads with the first confined command

        net_filter = None
        if not policy.network:
            from pisces.core.sandbox import seccomp  # noqa: PLC0415 - only when the network is off

            net_filter = seccomp.Filter()  # raises on an architecture it has no filter for: fail closed
        temp = self.temp_dir()
        writable = policy.writable(workspace, temp) + [r for r in self.extra_roots if os.path.isdir(r)]
        # Landlock's TCP rules too where the kernel has them (ABI 4+): a second lock on the same door
        ruleset = landlock.Ruleset.build(writable, network=policy.network or abi < 4)
        child_env = _child_env(env, temp)
        return Launch(ruleset, child_env, policy, writable, net_filter)

    def _prepare_seatbelt(self, workspace: str, env: dict[str, str] | None, policy: SandboxPolicy) -> Launch | None:
        """macOS: the command under ``sandbox-exec`` with the policy as a Seatbelt profile (untested on a Mac)."""
        if not self._seatbelt():
            self._warn("this Mac has no /usr/bin/sandbox-exec: commands run without an OS sandbox, confined by "
                       "the approval policy alone")
            return None
        temp = self.temp_dir()
        writable = policy.writable(workspace, temp) + [r for r in self.extra_roots if os.path.isdir(r)]
        return Launch(None, _child_env(env, temp), policy, writable, seatbelt=True)

    def _warn(self, text: str) -> None:
        root = self._parent or self
        if text not in root._warned:
            root._warned.add(text)
            sys.stderr.write(f"pisces: {text}\n")

    # -- what a front end shows -----------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        """``get_state``'s ``sandbox``: the policy, whether the kernel enforces it, and the delegated mode."""
        policy = self.policy()
        abi = self.abi() if policy.confines or policy.for_delegated().confines else 0
        out = policy.state()
        out["delegatedMode"] = policy.for_delegated().mode
        seatbelt = self._seatbelt()
        out["available"] = abi > 0 or seatbelt
        out["landlockAbi"] = abi
        out["enforced"] = policy.confines and (abi > 0 or seatbelt)
        out["mechanism"] = "seatbelt" if seatbelt else "landlock+seccomp" if abi > 0 else None
        out["networkSource"] = "command" if self.command_network is not None else "policy"
        out["changes"] = list(self.changes)
        return out


# pisces' own secrets, never given to a confined command (the web token would let it drive the session's
# server, whose set_sandbox and set_approval_mode loosen what confines it); bash_exec.PRIVATE_ENV likewise
_PRIVATE_ENV = frozenset({"PISCES_WEB_TOKEN"})


def _child_env(env: dict[str, str] | None, temp: str) -> dict[str, str]:
    child_env = {k: v for k, v in (os.environ if env is None else env).items() if k not in _PRIVATE_ENV}
    for key in ("TMPDIR", "TMP", "TEMP"):
        child_env[key] = temp
    return child_env


def _now() -> str:
    import datetime  # noqa: PLC0415 - only when a person changes the sandbox

    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def worktree_git_dirs(worktree: str) -> list[str]:
    """The git directory of a linked worktree (``.git`` is a file naming it) and its repository's object
    store; [] when ``worktree`` is not a linked worktree."""
    try:
        with open(os.path.join(worktree, ".git"), encoding="utf-8") as f:
            line = f.read(4096).strip()
    except OSError:
        return []
    if not line.startswith("gitdir:"):
        return []
    gitdir = os.path.normpath(os.path.join(worktree, line[len("gitdir:"):].strip()))
    try:
        with open(os.path.join(gitdir, "commondir"), encoding="utf-8") as f:
            common = os.path.normpath(os.path.join(gitdir, f.read(4096).strip()))
    except OSError:
        return [gitdir]
    return [gitdir, os.path.join(common, "objects")]


def blocked_by_sandbox(output: str, exit_code: int | None, launch: Launch | None = None) -> bool:
    """Whether a confined command's failure looks like the sandbox's doing (the kernel's refusal in its
    output): the cue for asking to run it outside. With the network off (``launch``'s policy), a failed name
    lookup counts too: resolvers report the refused socket as "could not resolve", not as a permission error."""
    if exit_code in (0, None):
        return False
    tail = output[-20000:]
    blocked, net_blocked = _blocked_regexes()
    if blocked.search(tail) is not None:
        return True
    return launch is not None and not launch.policy.network and net_blocked.search(tail) is not None


def blocked_reason(launch: Launch) -> str:
    return (f"the sandbox blocked this command ({launch.describe()}): it failed with a permission error; "
            "run it outside the sandbox?")


__all__ = ["Sandbox", "Launch", "blocked_by_sandbox", "blocked_reason"]
