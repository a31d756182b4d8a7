"""Which OS sandbox a command pisces runs on the model's behalf gets: the one place that decides it.

``SandboxPolicy``: ``mode`` (``read-only``: writes nowhere but the private temp dir; ``workspace-write``: the
workspace, the private temp dir and ``writable_roots``; ``off``: unconfined), ``network`` (non-Unix sockets
allowed or not) and where the mode comes from (``source``: cli, command, project, settings, default).

``resolve(settings, cli_mode, people_approve)``, by precedence: the ``--sandbox`` flag; the settings
(``sandbox.mode``, ``sandbox.network``, ``sandbox.writableRoots``; a trusted project's file wins over the
global one, an untrusted project's may only tighten: a stricter mode, ``network: false``, never a writable
root); last the default, ``workspace-write`` with the network on where a person approves (a typed RPC client,
ACP, the web UI), ``off`` elsewhere (pi's untyped clients, print mode), as pi has no sandbox.
``for_subagent`` and ``for_verification``: at least ``workspace-write`` unless a person set ``off`` (the flag or
the settings), whatever the front end.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from typing import Any

MODES = ("read-only", "workspace-write", "off")
STRICTNESS = {"off": 0, "workspace-write": 1, "read-only": 2}


@dataclass(frozen=True)
class SandboxPolicy:
    mode: str = "off"
    network: bool = True
    writable_roots: tuple[str, ...] = ()
    source: str = "default"
    warnings: tuple[str, ...] = field(default=(), compare=False)

    @property
    def confines(self) -> bool:
        return self.mode != "off"

    def writable(self, workspace: str, temp_dir: str) -> list[str]:
        """The directories a confined command may write beneath."""
        if self.mode == "read-only":
            return [temp_dir]
        roots = [workspace, temp_dir, *self.writable_roots]
        return [r for r in dict.fromkeys(os.path.realpath(r) for r in roots) if os.path.isdir(r)]

    def state(self) -> dict[str, Any]:
        """What ``get_state`` shows as ``sandbox`` (the launcher adds ``available``/``enforced``)."""
        return {"mode": self.mode, "modeSource": self.source, "network": self.network,
                "writableRoots": list(self.writable_roots)}

    def for_delegated(self) -> SandboxPolicy:
        """Subagents' and verification commands: confined unless a person turned the sandbox off."""
        if self.mode == "off" and self.source == "default":
            return replace(self, mode="workspace-write", source="default-delegated")
        return self


def check_mode(mode: Any) -> str:
    if mode not in MODES:
        shown = repr(mode) if isinstance(mode, str) else type(mode).__name__
        raise ValueError(f"Invalid sandbox mode {shown}: use 'read-only', 'workspace-write' or 'off'")
    return str(mode)


def _section(data: Any) -> dict[str, Any]:
    section = data.get("sandbox") if isinstance(data, dict) else None
    return section if isinstance(section, dict) else {}


def _roots(value: Any, where: str, warnings: list[str]) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        warnings.append(f"sandbox.writableRoots in {where} must be a list of paths; ignored")
        return ()
    return tuple(os.path.abspath(os.path.expanduser(v)) for v in value)


def resolve(settings: Any, cli_mode: str | None = None, *, people_approve: bool = False,
            command_mode: str | None = None) -> SandboxPolicy:
    """The policy now (see the module's docstring). Invalid settings are ignored with a warning."""
    warnings: list[str] = []
    g = _section(settings.global_settings()) if settings is not None else {}
    p = _section(settings.project_settings()) if settings is not None else {}
    trusted = bool(getattr(settings, "project_trusted", False))
    for name, sec in (("the global settings", g), ("the project settings", p)):
        if "mode" in sec and sec["mode"] not in MODES:
            warnings.append(f"sandbox.mode {sec['mode']!r} in {name} is not one of {', '.join(MODES)}; ignored")
        if "network" in sec and not isinstance(sec["network"], bool):
            warnings.append(f"sandbox.network in {name} must be true or false; ignored")
    default = "workspace-write" if people_approve else "off"
    mode, source = default, "default"
    if g.get("mode") in MODES:
        mode, source = g["mode"], "settings"
    pm = p.get("mode")
    if pm in MODES and (trusted or STRICTNESS[pm] > STRICTNESS[mode]):
        mode, source = pm, "project"
    if cli_mode is not None:
        mode, source = check_mode(cli_mode), "cli"
    if command_mode is not None:
        mode, source = check_mode(command_mode), "command"
    network = g["network"] if isinstance(g.get("network"), bool) else True
    if isinstance(p.get("network"), bool) and (trusted or p["network"] is False):
        network = p["network"]
    roots = _roots(g.get("writableRoots"), "the global settings", warnings)
    if trusted:
        roots += _roots(p.get("writableRoots"), "the project settings", warnings)
    return SandboxPolicy(mode, network, roots, source, tuple(warnings))


__all__ = ["SandboxPolicy", "MODES", "resolve", "check_mode"]
