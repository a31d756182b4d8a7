"""settings.json, global and per project, in pi's format.

The global file is ``<agentDir>/settings.json``; the project file is ``<cwd>/.pisces/settings.json``. The
project file wins, with nested objects merged key by key. Setters change the global file only, as pi's RPC
setters do. They take the file's lock (pi's ``settings.json.lock``, see ``file_lock``), re-read the file,
change just the key being set and replace the file, so keys this version does not know about, and the
writes of other processes, survive. A file that cannot be parsed is reported once on stderr and treated as
empty; a broken global file is never overwritten. Project keys that run code or redirect writes apply only
in a trusted project (``pisces.core.config.trust``); the others apply everywhere.
"""

from __future__ import annotations

import copy
import json
import os
import sys
import threading
from typing import Any

from pisces.core.config import paths
from pisces.core.config.trust import DEFAULT_TRUST_KEY, is_project_trusted, split_project_settings
from pisces.core.safe_open import CONFIG_MAX_BYTES, read_text, write_atomic

DEFAULT_THINKING_LEVEL = "medium"

_MISSING = object()


# ---------------------------------------------------------------------------------------------
# Reading, merging, migrating
# ---------------------------------------------------------------------------------------------
def deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """A new dict: ``override`` wins, objects present on both sides are merged recursively."""
    out = dict(base)
    for key, value in override.items():
        prev = out.get(key)
        if isinstance(value, dict) and isinstance(prev, dict):
            out[key] = deep_merge(prev, value)
        else:
            out[key] = value
    return out


def migrate(data: dict[str, Any]) -> dict[str, Any]:
    """Rewrite legacy keys in place (and return ``data``)."""
    if "queueMode" in data:
        if "steeringMode" not in data:
            data["steeringMode"] = data["queueMode"]
        del data["queueMode"]
    if "transport" not in data and isinstance(data.get("websockets"), bool):
        data["transport"] = "websocket" if data["websockets"] else "sse"
        del data["websockets"]
    retry = data.get("retry")
    if isinstance(retry, dict) and "maxDelayMs" in retry:
        provider = retry.get("provider")
        if not isinstance(provider, dict):
            provider = {}
        if "maxRetryDelayMs" not in provider:
            provider["maxRetryDelayMs"] = retry["maxDelayMs"]
        retry["provider"] = provider
        del retry["maxDelayMs"]
    skills = data.get("skills")
    if isinstance(skills, dict):  # old {"enableSkillCommands", "customDirectories"} form
        if "enableSkillCommands" in skills and "enableSkillCommands" not in data:
            data["enableSkillCommands"] = skills["enableSkillCommands"]
        dirs = skills.get("customDirectories")
        if isinstance(dirs, list) and dirs:
            data["skills"] = dirs
        else:
            del data["skills"]
    return data


def _parse(text: str) -> dict[str, Any]:
    if not text.strip():
        return {}
    data = json.loads(text)
    if not isinstance(data, dict):
        raise ValueError("the top level must be a JSON object")
    return migrate(data)


# ---------------------------------------------------------------------------------------------
# Writing JSON the way JSON.stringify(value, null, 2) does
# ---------------------------------------------------------------------------------------------
def _js_number(x: float) -> str:
    """A float as JavaScript's Number#toString prints it."""
    if x != x or x in (float("inf"), float("-inf")):
        return "null"
    if x == 0:
        return "0"
    from decimal import Decimal  # noqa: PLC0415 - rarely needed; keep it off the startup path

    sign, digits, exp = Decimal(repr(x)).as_tuple()
    assert isinstance(exp, int)  # x is finite (NaN and the infinities returned above)
    ds = "".join(map(str, digits)).rstrip("0")
    exp += len(digits) - len(ds)
    k = len(ds)
    n = exp + k  # value = 0.ds * 10**n
    if k <= n <= 21:
        body = ds + "0" * (n - k)
    elif 0 < n <= 21:
        body = ds[:n] + "." + ds[n:]
    elif -6 < n <= 0:
        body = "0." + "0" * (-n) + ds
    else:
        e = n - 1
        body = ds[0] + ("." + ds[1:] if k > 1 else "") + "e" + ("+" if e >= 0 else "-") + str(abs(e))
    return ("-" if sign else "") + body


def dumps_js(value: Any, indent: int = 2, _level: int = 0) -> str:
    """``JSON.stringify(value, null, indent)``: same spacing, numbers and escapes, no trailing newline."""
    if value is None or value is True or value is False:
        return json.dumps(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _js_number(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    pad = " " * (indent * (_level + 1))
    end = " " * (indent * _level)
    if isinstance(value, dict):
        if not value:
            return "{}"
        items = [f"{pad}{json.dumps(str(k), ensure_ascii=False)}: {dumps_js(v, indent, _level + 1)}"
                 for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + end + "}"
    if isinstance(value, (list, tuple)):
        if not value:
            return "[]"
        items = [pad + dumps_js(v, indent, _level + 1) for v in value]
        return "[\n" + ",\n".join(items) + "\n" + end + "]"
    raise TypeError(f"cannot write {type(value).__name__} to settings.json")


def _save(path: str, text: str) -> None:
    """Replace the settings file at ``path`` atomically (readers see the old or the new file, never half of
    one; its mode is kept), creating its directory first."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    write_atomic(path, text.encode("utf-8"))


# ---------------------------------------------------------------------------------------------
# Settings
# ---------------------------------------------------------------------------------------------
class SettingsWriteError(OSError):
    """A change that must be saved (``update_global``) could not be: the text says which file and why."""


class Settings:
    """Merged view of the global and project settings files, with pi's defaults."""

    def __init__(self, agent_dir: str | None = None, cwd: str | None = None) -> None:
        self.agent_dir = agent_dir if agent_dir is not None else paths.agent_dir()
        self.cwd = cwd if cwd is not None else os.getcwd()
        self.global_path = os.path.join(self.agent_dir, "settings.json")
        self.project_path = os.path.join(paths.project_config_dir(self.cwd), "settings.json")
        self.errors: list[str] = []  # every load/write problem, in order; callers may drain it
        self._lock = threading.Lock()
        self._global: dict[str, Any] = {}
        self._project: dict[str, Any] = {}
        self._global_error: str | None = None
        self._project_error: str | None = None
        self._merged: dict[str, Any] = {}
        self._trusted: bool | None = None
        self._unsaved: list[tuple[str, str | None, Any]] = []  # global changes a failed write did not save
        self.gated_project_settings: list[str] = []  # project keys that need trust (see pisces.core.config.trust)
        self.ignored_project_settings: list[str] = []  # those of them ignored: the project is not trusted
        self.reload()

    # -- loading ---------------------------------------------------------------------------------
    def _load(self, path: str) -> tuple[dict[str, Any], str | None]:
        try:
            text = read_text(path, CONFIG_MAX_BYTES)  # a FIFO or /dev/zero is refused, never read
        except FileNotFoundError:
            return {}, None
        except (OSError, UnicodeDecodeError) as exc:
            return {}, self._warn(f"could not read {path}: {exc}")
        try:
            return _parse(text), None
        except ValueError as exc:
            return {}, self._warn(f"ignoring {path}, it is not valid settings JSON ({exc})")

    def _warn(self, message: str) -> str:
        self.errors.append(message)
        print(f"Warning: {message}", file=sys.stderr, flush=True)
        return message

    def reload(self) -> None:
        """Read both files again."""
        self._global, self._global_error = self._load(self.global_path)
        self._project, self._project_error = self._load(self.project_path)
        self._trusted = None
        self.gated_project_settings, self.ignored_project_settings = [], []
        if self._project:
            self._gate_project()
        self._merged = deep_merge(self._global, self._project)

    def _gate_project(self) -> None:
        """Drop the project keys that run code or redirect writes unless the project is trusted."""

        kept, gated = split_project_settings(self._project)
        self.gated_project_settings = gated
        if gated and not self.project_trusted:
            self._project = kept
            self.ignored_project_settings = gated

    @property
    def project_trusted(self) -> bool:
        """Whether this project's own settings (and extensions, hooks) may take effect; read once."""
        if self._trusted is None:
            self._trusted = is_project_trusted(self.cwd, self.agent_dir, default=self._global.get(DEFAULT_TRUST_KEY))
        return self._trusted

    def note_trust_saved(self, trusted: bool) -> bool:
        """After a decision was saved: True when this process runs with the other choice applied (the
        decision takes effect at the next start)."""
        was_trusted = not self.ignored_project_settings
        self._trusted = trusted
        return bool(self.gated_project_settings) and was_trusted != trusted

    @property
    def load_errors(self) -> list[str]:
        return [e for e in (self._global_error, self._project_error) if e]

    def as_dict(self) -> dict[str, Any]:
        """A copy of the merged settings."""
        return copy.deepcopy(self._merged)

    def merged_view(self) -> dict[str, Any]:
        """The merged settings themselves, for readers on a hot path (a setting looked up for every streamed
        event): no copy is made, so the caller must neither change what it gets nor keep it (read, then drop
        it: a later change of the settings may alter or replace it)."""
        return self._merged

    def global_settings(self) -> dict[str, Any]:
        return copy.deepcopy(self._global)

    def project_settings(self) -> dict[str, Any]:
        return copy.deepcopy(self._project)

    def get(self, key: str, default: Any = None) -> Any:
        """Raw merged value at a dotted path (``"retry.provider.timeoutMs"``), or ``default``."""
        node: Any = self._merged
        for part in key.split("."):
            if not isinstance(node, dict) or part not in node:
                return default
            node = node[part]
        return node

    def _typed(self, key: str, kinds: type | tuple[type, ...], default: Any) -> Any:
        value = self.get(key, _MISSING)
        if value is _MISSING or value is None:
            return default
        if isinstance(value, bool) and bool not in (kinds if isinstance(kinds, tuple) else (kinds,)):
            return default  # True is an int in Python, never a number in JSON
        return value if isinstance(value, kinds) else default

    def _int(self, key: str, default: Any) -> Any:
        value = self._typed(key, (int, float), default)
        if isinstance(value, float) and value.is_integer():
            return int(value)
        return value

    # -- getters ----------------------------------------------------------------------------------
    @property
    def default_provider(self) -> str | None:
        return self._typed("defaultProvider", str, None)

    @property
    def default_model(self) -> str | None:
        return self._typed("defaultModel", str, None)

    @property
    def default_thinking_level(self) -> str | None:
        """None when unset; callers then use ``DEFAULT_THINKING_LEVEL`` ("medium"), clamped to the model."""
        return self._typed("defaultThinkingLevel", str, None)

    @property
    def steering_mode(self) -> str:
        return self._typed("steeringMode", str, None) or "one-at-a-time"

    @property
    def follow_up_mode(self) -> str:
        return self._typed("followUpMode", str, None) or "one-at-a-time"

    @property
    def interrupt_mode(self) -> str:
        return self._typed("interruptMode", str, None) or "immediate"

    @property
    def transport(self) -> str:
        return self._typed("transport", str, "sse")

    @property
    def theme(self) -> str | None:
        return self._typed("theme", str, None)

    @property
    def compaction_enabled(self) -> bool:
        return self._typed("compaction.enabled", bool, True)

    @property
    def compaction_reserve_tokens(self) -> int:
        return self._int("compaction.reserveTokens", 16384)

    @property
    def compaction_keep_recent_tokens(self) -> int:
        return self._int("compaction.keepRecentTokens", 20000)

    @property
    def branch_summary_reserve_tokens(self) -> int:
        return self._int("branchSummary.reserveTokens", 16384)

    @property
    def branch_summary_skip_prompt(self) -> bool:
        return self._typed("branchSummary.skipPrompt", bool, False)

    @property
    def retry_enabled(self) -> bool:
        return self._typed("retry.enabled", bool, True)

    @property
    def retry_max_retries(self) -> int:
        return self._int("retry.maxRetries", 3)

    @property
    def retry_base_delay_ms(self) -> int:
        return self._int("retry.baseDelayMs", 2000)

    @property
    def retry_provider_timeout_ms(self) -> int | None:
        """None: leave the SDK's default."""
        return self._int("retry.provider.timeoutMs", None)

    @property
    def retry_provider_max_retries(self) -> int | None:
        """None: leave the SDK's default."""
        return self._int("retry.provider.maxRetries", None)

    @property
    def retry_provider_max_retry_delay_ms(self) -> int:
        return self._int("retry.provider.maxRetryDelayMs", 60000)

    @property
    def shell_path(self) -> str | None:
        return self._typed("shellPath", str, None)

    @property
    def shell_command_prefix(self) -> str | None:
        return self._typed("shellCommandPrefix", str, None)

    @property
    def session_dir(self) -> str | None:
        value = self._typed("sessionDir", str, None)
        return os.path.expanduser(value) if value else None

    @property
    def enabled_models(self) -> list[str] | None:
        value = self._typed("enabledModels", list, None)
        return [v for v in value if isinstance(v, str)] if value is not None else None

    @property
    def thinking_budgets(self) -> dict[str, int] | None:
        value = self._typed("thinkingBudgets", dict, None)
        if value is None:
            return None
        return {k: int(v) for k, v in value.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}

    @property
    def block_images(self) -> bool:
        return self._typed("images.blockImages", bool, False)

    @property
    def auto_resize_images(self) -> bool:
        return self._typed("images.autoResize", bool, True)

    @property
    def enable_skill_commands(self) -> bool:
        return self._typed("enableSkillCommands", bool, True)

    # -- setters (global file only) --------------------------------------------------------------
    def set_default_model(self, provider: str, model_id: str) -> None:
        self._set_global([("defaultProvider", None, provider), ("defaultModel", None, model_id)])

    def set_default_thinking_level(self, level: str) -> None:
        self._set_global([("defaultThinkingLevel", None, level)])

    def set_steering_mode(self, mode: str) -> None:
        self._set_global([("steeringMode", None, mode)])

    def set_follow_up_mode(self, mode: str) -> None:
        self._set_global([("followUpMode", None, mode)])

    def set_interrupt_mode(self, mode: str) -> None:
        self._set_global([("interruptMode", None, mode)])

    def set_compaction_enabled(self, enabled: bool) -> None:
        self._set_global([("compaction", "enabled", bool(enabled))])

    def set_retry_enabled(self, enabled: bool) -> None:
        self._set_global([("retry", "enabled", bool(enabled))])

    def set_enabled_models(self, patterns: list[str] | None) -> None:
        self._set_global([("enabledModels", None, list(patterns) if patterns is not None else None)])

    @staticmethod
    def _apply(target: dict[str, Any], changes: list[tuple[str, str | None, Any]]) -> None:
        for key, nested, value in changes:
            if nested is None:
                if value is None:
                    target.pop(key, None)
                else:
                    target[key] = value
            else:
                section = target.get(key)
                if not isinstance(section, dict):
                    section = {}
                    target[key] = section
                section[nested] = value

    def _global_on_disk(self) -> dict[str, Any]:
        """The global file as it is on disk now ({} when there is none); raises when it cannot be read or
        parsed. Callers hold the file's lock: they write back what they change."""
        try:
            return _parse(read_text(self.global_path, CONFIG_MAX_BYTES))
        except FileNotFoundError:
            return {}

    def update_global(self, key: str, nested: str | None, change: Any) -> Any:
        """Read-modify-write one global value under the file's lock: ``change(value on disk)`` (None when
        absent) returns the new value, or raises to change nothing. Unlike the setters, a file that cannot be
        read, parsed or written is an error (``SettingsWriteError``), never a change kept in memory only."""
        from pisces.core.config.file_lock import FileLock  # noqa: PLC0415 - not needed at start-up

        with self._lock:
            if self._global_error:
                raise SettingsWriteError(f"{self.global_path} cannot be used; fix it first ({self._global_error})")
            try:
                with FileLock(self.global_path):
                    try:
                        on_disk = self._global_on_disk()
                    except (OSError, UnicodeDecodeError, ValueError) as exc:
                        raise SettingsWriteError(f"could not read {self.global_path}: {exc}") from None
                    section = on_disk.get(key) if nested is not None else on_disk
                    name = nested if nested is not None else key
                    current = section.get(name) if isinstance(section, dict) else None
                    value = change(copy.deepcopy(current))  # may raise: nothing is written
                    self._apply(on_disk, [(key, nested, value)])
                    _save(self.global_path, dumps_js(on_disk))
            except SettingsWriteError:
                raise
            except (OSError, TypeError) as exc:
                raise SettingsWriteError(f"could not save {self.global_path}: {exc}") from None
            self._global = on_disk
            self._merged = deep_merge(self._global, self._project)
            return value

    def _set_global(self, changes: list[tuple[str, str | None, Any]]) -> None:
        with self._lock:
            self._apply(self._global, changes)
            self._merged = deep_merge(self._global, self._project)
            if self._global_error:
                return  # never overwrite a file the user has to repair; the change lives in memory
            from pisces.core.config.file_lock import FileLock  # noqa: PLC0415 - not needed at start-up

            unsaved = self._unsaved + changes  # a write that failed earlier is retried with this one
            try:
                # pi's protocol: lock, re-read, change only these keys, write; another process's keys survive
                with FileLock(self.global_path):
                    on_disk = self._global_on_disk()
                    self._apply(on_disk, unsaved)
                    _save(self.global_path, dumps_js(on_disk))
                self._unsaved = []
            except (OSError, ValueError, TypeError) as exc:
                self._unsaved = unsaved
                self._warn(f"could not save {self.global_path}: {exc}")
