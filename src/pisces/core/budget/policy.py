"""The limits of a budget: ``BudgetPolicy``, read from the ``task.budget.*`` settings or from ``set_budget``.

Settings are read from the global and the project file apart, so that the project rule can be applied:

* in a trusted project the project's keys win, as every other project setting does;
* in a project that is not trusted its budget keys may only make the budget stricter: a limit applies when the
  global file sets none or a higher one, ``warnAtRatio`` only when lower, ``abortOnExceeded`` only to turn it
  on. A budget only ever stops work, so a checked-out repository may ask for a tighter one; it can never
  loosen the cap the user set for themselves.

Both spellings of the task settings are read: nested (``{"task": {"budget": {"maxCostUsd": 1}}}``) and flat
(``{"task.budget.maxCostUsd": 1}``), the flat one winning within a file.
"""

from __future__ import annotations

import sys
from typing import Any

# The dimensions in their fixed order: (reason, limit setting, snapshot field)
DIMENSIONS: tuple[tuple[str, str, str], ...] = (
    ("wall_time", "maxWallTimeMs", "wallTimeMs"),
    ("input_tokens", "maxInputTokens", "inputTokens"),
    ("output_tokens", "maxOutputTokens", "outputTokens"),
    ("total_tokens", "maxTotalTokens", "totalTokens"),
    ("cost", "maxCostUsd", "costUsd"),
    ("tool_calls", "maxToolCalls", "toolCalls"),
    ("subagents", "maxSubagents", "subagents"),
)
LIMIT_KEYS = tuple(key for _, key, _ in DIMENSIONS)
OPTION_KEYS = ("warnAtRatio", "abortOnExceeded")
ALL_KEYS = LIMIT_KEYS + OPTION_KEYS
DEFAULT_WARN_AT_RATIO = 0.8
_PREFIX = "task.budget."


class BudgetPolicyError(ValueError):
    """A budget value that cannot be used; the text names the key and what it expects."""


class BudgetPolicy:
    """``limits`` maps a reason (``"cost"``) to its limit; a dimension without one is not limited."""

    __slots__ = ("limits", "warn_at_ratio", "abort_on_exceeded")

    def __init__(self, limits: dict[str, float] | None = None, warn_at_ratio: float = DEFAULT_WARN_AT_RATIO,
                 abort_on_exceeded: bool = False) -> None:
        self.limits = dict(limits or {})
        self.warn_at_ratio = warn_at_ratio
        self.abort_on_exceeded = abort_on_exceeded

    @property
    def has_limits(self) -> bool:
        return bool(self.limits)

    def to_wire(self) -> dict[str, Any]:
        """The policy in the settings' own names: the limits set, then warnAtRatio and abortOnExceeded."""
        out: dict[str, Any] = {key: self.limits[reason] for reason, key, _ in DIMENSIONS if reason in self.limits}
        out["warnAtRatio"] = self.warn_at_ratio
        out["abortOnExceeded"] = self.abort_on_exceeded
        return out

    @classmethod
    def from_values(cls, values: dict[str, Any]) -> "BudgetPolicy":
        """From settings-named values that were checked (``check_value``); absent or None: not set."""
        limits = {reason: values[key] for reason, key, _ in DIMENSIONS if values.get(key) is not None}
        ratio = values.get("warnAtRatio")
        return cls(limits, DEFAULT_WARN_AT_RATIO if ratio is None else ratio, bool(values.get("abortOnExceeded")))

    def __repr__(self) -> str:
        return f"BudgetPolicy({self.to_wire()!r})"


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {bool: "a boolean", int: "a number", float: "a number", str: "a string", list: "an array",
            dict: "an object"}.get(type(value), type(value).__name__)


def check_value(key: str, value: Any) -> Any:
    """``value`` for budget key ``key`` (None: not set), or BudgetPolicyError saying what is wrong."""
    if value is None:
        return None
    if key == "abortOnExceeded":
        if not isinstance(value, bool):
            raise BudgetPolicyError(f"{key} must be true or false, not {_kind(value)}")
        return value
    is_number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if key == "warnAtRatio":
        if not is_number or not (0 < value <= 1):
            raise BudgetPolicyError(f"{key} must be a number above 0 and at most 1, not {_describe(value)}")
        return value
    if key not in LIMIT_KEYS:
        raise BudgetPolicyError(f"unknown budget setting '{key}': use {', '.join(ALL_KEYS)}")
    if not is_number or value != value or value < 0 or value == float("inf"):
        raise BudgetPolicyError(f"{key} must be a number of at least 0, not {_describe(value)}")
    return int(value) if isinstance(value, float) and value.is_integer() else value


def _describe(value: Any) -> str:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return repr(value)
    return _kind(value)


def policy_from_request(values: Any) -> BudgetPolicy | None:
    """The ``budget`` object of the ``set_budget`` command, strictly: a bad or unknown key is an error.
    ``None`` or an object setting no limit clears the limits."""
    if values is None:
        return None
    if not isinstance(values, dict):
        raise BudgetPolicyError(f"budget must be an object of limits or null, not {_kind(values)}")
    checked = {key: check_value(key, value) for key, value in values.items()}
    policy = BudgetPolicy.from_values(checked)
    return policy if policy.has_limits else None


# ---------------------------------------------------------------------------------------------
# Settings
# ---------------------------------------------------------------------------------------------
def section(data: dict[str, Any]) -> dict[str, Any]:
    """The budget keys of one settings file (nested spelling, then the flat one over it)."""
    out: dict[str, Any] = {}
    task = data.get("task")
    nested = task.get("budget") if isinstance(task, dict) else None
    if isinstance(nested, dict):
        out.update(nested)
    for key, value in data.items():
        if key.startswith(_PREFIX):
            out[key[len(_PREFIX):]] = value
    return out


def _checked(values: dict[str, Any], origin: str, warn: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in values.items():
        if key not in ALL_KEYS:
            continue  # a setting of a later version, or a typo: ignored as pi ignores unknown settings
        try:
            checked = check_value(key, value)
        except BudgetPolicyError as exc:
            warn(f"ignoring task.budget.{key} in {origin}: {exc}")
            continue
        if checked is not None:
            out[key] = checked
    return out


def tighten(base: dict[str, Any], stricter: dict[str, Any]) -> dict[str, Any]:
    """``base`` with only those values of ``stricter`` that make the budget stricter."""
    out = dict(base)
    for key, value in stricter.items():
        if key == "abortOnExceeded":
            out[key] = bool(out.get(key)) or value
        elif key == "warnAtRatio":
            out[key] = min(out.get(key, DEFAULT_WARN_AT_RATIO), value)
        else:
            out[key] = value if out.get(key) is None else min(out[key], value)
    return out


def policy_from_settings(settings: Any, warn: Any = None) -> BudgetPolicy | None:
    """The session's policy from ``task.budget.*``; None when no limit is set (``warnAtRatio`` alone is not
    a budget). ``settings`` is a ``pisces.core.config.settings.Settings``; ``warn(text)`` reports ignored values."""
    say = warn or (lambda text: sys.stderr.write(f"pisces: {text}\n"))
    values = _checked(section(settings.global_settings()), settings.global_path, say)
    project = _checked(section(settings.project_settings()), settings.project_path, say)
    if project:
        values = {**values, **project} if settings.project_trusted else tighten(values, project)
    policy = BudgetPolicy.from_values(values)
    return policy if policy.has_limits else None

