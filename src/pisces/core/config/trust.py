"""Project trust: whether a repository's own configuration may run code or redirect writes.

A checked-out repository can ship ``.pisces/settings.json``. Most of its keys only tune pisces (queue
modes, compaction thresholds, retries). Others choose a program to run (``shellPath``,
``shellCommandPrefix``), where files go (``sessionDir``), or code and resources to load (``extensions``,
``hooks``, ``packages``, ``skills``, ``prompts``, ``themes``). Those take effect only in a project the user
trusts. The rule is an allowlist (:data:`SAFE_PROJECT_SETTINGS`): a key not on it, including any key added
later, needs trust, so a new setting that runs code cannot slip through. Project extensions, hooks and
custom tools load only where :func:`is_project_trusted` is true.

Whether ``cwd`` is trusted, by precedence:

1. this run's override, set from ``--approve`` (trust) or ``--no-approve`` (do not) with
   :func:`set_run_override`;
2. the decision saved for the real path of ``cwd`` or, failing that, of its nearest parent directory that
   has one, in ``<agentDir>/trust.json`` (``{"/real/path": true}``, pi's format), written by
   ``pisces --trust-project`` and the RPC command ``trust_project``;
3. the global setting ``defaultProjectTrust``: ``"always"`` trusts every project; ``"never"`` and
   ``"ask"`` (the default) do not. pisces has no prompt to ask in, so ``"ask"`` means "not until the user
   says so", as in pi's modes without a UI.

A project's own settings can never make it trusted: ``defaultProjectTrust`` is read from the global file
only. Everything here is cheap when unused: ``trust.json`` is read only when a project has a setting that
needs trust (or when a caller asks).
"""

from __future__ import annotations

import json
import os
from typing import Any

from pisces.core.safe_open import read_bytes

__all__ = [
    "SAFE_PROJECT_SETTINGS", "TRUST_FILE", "TrustStoreError", "split_project_settings", "canonical_path",
    "saved_decision", "is_project_trusted", "trust_project", "save_decision", "set_run_override", "run_override",
    "untrusted_notice", "project_trust_event",
]

TRUST_FILE = "trust.json"
DEFAULT_TRUST_KEY = "defaultProjectTrust"
_MAX_TRUST_FILE = 4 << 20

# Project keys that only tune pisces' own behaviour: no program, path, code or permission in them.
# ``True``: the whole value; a frozenset: only those nested keys (the rest of the object needs trust).
SAFE_PROJECT_SETTINGS: dict[str, Any] = {
    "defaultProvider": True, "defaultModel": True, "defaultThinkingLevel": True, "enabledModels": True,
    "steeringMode": True, "followUpMode": True, "interruptMode": True, "transport": True, "theme": True,
    "compaction": True, "branchSummary": True, "retry": True, "thinkingBudgets": True,
    "enableSkillCommands": True, "hideThinkingBlock": True, "quietStartup": True,
    "images": frozenset({"blockImages", "autoResize"}),
    # a budget only stops work; pisces.core.budget lets a project that is not trusted make it stricter only
    "task": frozenset({"budget"}),
    # approvals only stop work without trust: pisces.core.approval reads an untrusted project's mode and rules
    # stricter-only (its allow rules and a looser mode are ignored)
    "tools": frozenset({"approvalMode", "approvalRules"}),
    # the OS sandbox likewise: pisces.core.sandbox.policy reads an untrusted project's mode and network
    # stricter-only (a looser mode and network: true are ignored); writableRoots needs trust
    "sandbox": frozenset({"mode", "network"}),
}

_run_override: bool | None = None


class TrustStoreError(ValueError):
    """trust.json exists but cannot be read as pi's format; nothing is trusted from it."""


# ---------------------------------------------------------------------------------------------
# Which settings need trust
# ---------------------------------------------------------------------------------------------
def split_project_settings(project: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """``(the settings that apply without trust, the dotted names of those that need it)``."""
    kept: dict[str, Any] = {}
    gated: list[str] = []
    for key, value in project.items():
        rule = SAFE_PROJECT_SETTINGS.get(key)
        if rule is None and "." in key:  # the flat spelling of a nested key: "task.budget.maxCostUsd"
            head, _, rest = key.partition(".")
            outer = SAFE_PROJECT_SETTINGS.get(head)
            if outer is True or (isinstance(outer, frozenset) and rest.split(".", 1)[0] in outer):
                rule = True
        if rule is True:
            kept[key] = value
        elif isinstance(rule, frozenset) and isinstance(value, dict):
            inner = {k: v for k, v in value.items() if k in rule}
            gated.extend(f"{key}.{k}" for k in value if k not in rule)
            kept[key] = inner
        else:
            gated.append(key)
    return kept, gated


# ---------------------------------------------------------------------------------------------
# The decision
# ---------------------------------------------------------------------------------------------
def canonical_path(path: str) -> str:
    """The real absolute path (symlinks resolved): the key of a saved decision."""
    return os.path.realpath(os.path.abspath(os.path.expanduser(path)))


def set_run_override(value: bool | None) -> None:
    """``True``: trust the project for this run (``--approve``); ``False``: do not (``--no-approve``);
    ``None``: decide from trust.json and the settings."""
    global _run_override
    _run_override = value


def run_override() -> bool | None:
    return _run_override


def _trust_file(agent_dir: str) -> str:
    return os.path.join(agent_dir, TRUST_FILE)


def _read_store(path: str) -> dict[str, Any]:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise TrustStoreError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        import stat  # noqa: PLC0415 - not needed at start-up

        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise TrustStoreError(f"{path} is not a regular file")
        data = os.read(fd, _MAX_TRUST_FILE + 1)
    finally:
        os.close(fd)
    if len(data) > _MAX_TRUST_FILE:
        raise TrustStoreError(f"{path} is larger than {_MAX_TRUST_FILE} bytes")
    try:
        parsed = json.loads(data.decode("utf-8-sig")) if data.strip() else {}
    except (ValueError, RecursionError) as exc:
        raise TrustStoreError(f"{path} is not valid JSON ({exc})") from None
    if not isinstance(parsed, dict):
        raise TrustStoreError(f"{path} must hold a JSON object")
    for key, value in parsed.items():
        if value is not True and value is not False and value is not None:
            raise TrustStoreError(f"{path}: the value for {json.dumps(key)} must be true, false or null")
    return parsed


def saved_decision(cwd: str, agent_dir: str) -> tuple[str, bool] | None:
    """The nearest saved decision for ``cwd``: ``(the directory it was saved for, trusted?)``, or None.
    Raises :class:`TrustStoreError` when trust.json cannot be read."""
    data = _read_store(_trust_file(agent_dir))
    if not data:
        return None
    current = canonical_path(cwd)
    while True:
        value = data.get(current)
        if value is True or value is False:
            return current, value
        parent = os.path.dirname(current)
        if parent == current:
            return None
        current = parent


def _default_setting(agent_dir: str) -> Any:
    try:
        data = json.loads(read_bytes(os.path.join(agent_dir, "settings.json"), _MAX_TRUST_FILE) or b"{}")
    except (OSError, ValueError, RecursionError):
        return None
    return data.get(DEFAULT_TRUST_KEY) if isinstance(data, dict) else None


_UNREAD = object()


def is_project_trusted(cwd: str, agent_dir: str, *, default: Any = _UNREAD) -> bool:
    """Whether ``cwd``'s own settings, extensions and hooks may take effect (see the module docstring).
    ``default`` is the global ``defaultProjectTrust`` when the caller has already read it. An unreadable
    trust.json trusts nothing (and is reported on stderr)."""
    if _run_override is not None:
        return _run_override
    try:
        found = saved_decision(cwd, agent_dir)
    except TrustStoreError as exc:
        _warn(f"{exc}; no project is trusted until it is repaired")
        return False
    if found is not None:
        return found[1]
    if default is _UNREAD:
        default = _default_setting(agent_dir)
    return default == "always"


def trust_project(cwd: str, agent_dir: str, trusted: bool = True) -> str:
    """Save ``trusted`` for the real path of ``cwd`` in trust.json (under the file's lock, merged with what
    other processes saved). Returns the path the decision was saved for. Raises OSError or
    :class:`TrustStoreError` when it cannot be saved."""
    from pisces.core.config.file_lock import FileLock  # noqa: PLC0415 - not needed at start-up

    key = canonical_path(cwd)
    path = _trust_file(agent_dir)
    with FileLock(path):
        data = _read_store(path)
        data[key] = bool(trusted)
        ordered = {k: data[k] for k in sorted(data) if data[k] is not None}
        _write_private(path, _dump(ordered))
    return key


def _dump(data: dict[str, Any]) -> bytes:
    text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:  # a path that is not UTF-8: keep it exact as escapes
        return (json.dumps(data, indent=2) + "\n").encode("ascii")


def _write_private(path: str, data: bytes) -> None:
    """Replace ``path`` atomically with a file only its owner can read."""
    directory = os.path.dirname(path) or "."
    os.makedirs(directory, exist_ok=True)
    tmp = os.path.join(directory, f".{os.path.basename(path)}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    os.close(fd)
    os.replace(tmp, path)


def save_decision(settings: Any, trusted: bool) -> dict[str, Any]:
    """The RPC command ``trust_project``: save the decision for the settings' project. The process keeps
    the settings it started with; ``restartRequired`` says whether the next start applies others."""
    try:
        path = trust_project(settings.cwd, settings.agent_dir, trusted)
    except OSError as exc:
        raise TrustStoreError(f"cannot save the trust decision: {exc.strerror or exc}") from None
    return {"path": path, "trusted": trusted, "restartRequired": settings.note_trust_saved(trusted)}


# ---------------------------------------------------------------------------------------------
# Telling the user
# ---------------------------------------------------------------------------------------------
def untrusted_notice(settings_path: str, ignored: list[str]) -> str:
    """One line for stderr: what was ignored, and how to trust the project."""
    return (f"pisces: ignoring {', '.join(ignored)} in {settings_path}: this project is not trusted "
            "(trust it with 'pisces --trust-project' run in it, the RPC command trust_project, "
            "or --approve for one run)")


def project_trust_event(cwd: str, settings_path: str, ignored: list[str]) -> dict[str, Any]:
    """The ``project_trust`` event a host receives when project settings were ignored."""
    return {"type": "project_trust", "trusted": False, "cwd": canonical_path(cwd), "settingsPath": settings_path,
            "ignoredSettings": list(ignored), "message": untrusted_notice(settings_path, ignored)[len("pisces: "):]}


def _warn(message: str) -> None:
    import sys  # noqa: PLC0415 - not needed at start-up

    try:
        sys.stderr.write(f"pisces: {message}\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
