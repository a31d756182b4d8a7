"""What the web UI and the start-up lines show about where the agent works: the directory, its git branch
(read from ``.git/HEAD``, no git process), the model and whether its key is there. ``web_info`` answers it.

Guarantees: never raises for a missing or odd repository (no branch is ``None``); reads at most a few
small files; the key check only asks the registry (no network)."""

from __future__ import annotations

import os
from typing import Any

from pisces.core.config.models_registry import UNKNOWN_MODEL


def git_branch(cwd: str) -> str | None:
    """The branch checked out at ``cwd`` (or the first 8 hex of a detached HEAD); None outside a repository."""
    current = os.path.abspath(cwd)
    for _ in range(64):
        dot = os.path.join(current, ".git")
        try:
            if os.path.isfile(dot):  # a worktree or submodule: "gitdir: <path>"
                with open(dot, encoding="utf-8") as f:
                    line = f.read(4096).strip()
                if not line.startswith("gitdir:"):
                    return None
                dot = os.path.join(current, line[len("gitdir:"):].strip())
            if os.path.isdir(dot):
                with open(os.path.join(dot, "HEAD"), encoding="utf-8") as f:
                    head = f.read(4096).strip()
                if head.startswith("ref: "):
                    ref = head[5:]
                    return ref[len("refs/heads/"):] if ref.startswith("refs/heads/") else ref
                return head[:8] or None
        except (OSError, UnicodeDecodeError):
            return None
        parent = os.path.dirname(current)
        if parent == current:
            return None
        current = parent
    return None


def lan_address() -> str | None:
    """This machine's address on its LAN (the one a route to the outside would leave from: no packet is
    sent), or None when there is none."""
    import socket  # noqa: PLC0415 - only with --host 0.0.0.0

    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("192.0.2.1", 9))  # TEST-NET-1: never routed anywhere; connect() on UDP sends nothing
            address = s.getsockname()[0]
    except OSError:
        return None
    return None if address.startswith("127.") or address == "0.0.0.0" else address


def key_problem(session: Any) -> str | None:
    """Why a prompt would fail for want of a key, in one sentence; None when the model has one."""
    model = session.model
    if model is None or model is UNKNOWN_MODEL or getattr(model, "provider", "unknown") == "unknown":
        return "no model is selected: no provider has an API key (pisces --list-models shows which are set)"
    if not session.registry.has_auth(model):
        from pisces.core.config.auth import missing_key_message  # noqa: PLC0415 - only when a key is missing

        return missing_key_message(model.provider)
    return None


def web_info(session: Any) -> dict[str, Any]:
    """``{cwd, gitBranch?, home?, model?, keyProblem?}`` for the header and the start-up lines."""
    cwd = session.cwd
    out: dict[str, Any] = {"cwd": cwd}
    home = os.path.expanduser("~")
    if home and home != "/" and (cwd == home or cwd.startswith(home + os.sep)):
        out["cwdShort"] = "~" + cwd[len(home):]
    branch = git_branch(cwd)
    if branch:
        out["gitBranch"] = branch
    model = session.model
    if model is not None and model is not UNKNOWN_MODEL:
        out["model"] = f"{model.provider}/{model.id}"
    problem = key_problem(session)
    if problem:
        out["keyProblem"] = problem
    return out


def h_web_info(client: Any, cmd: dict) -> Any:
    """The working directory, its git branch, the model and any key problem (the UI's header)."""
    return web_info(client.host.session)
