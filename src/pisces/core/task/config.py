"""The ``task.*`` settings, read from settings.json as nested objects (``{"task": {"isolation": {"mode":
"worktree"}}}``) or as flat dotted keys (``{"task.isolation.mode": "worktree"}``, pisces' own spelling); a flat
key wins over the nested one. Values of the wrong type fall back to the default."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

_MISSING = object()

ISOLATION_MODES = ("none", "worktree", "fuse-overlay", "fuse-projfs")
MERGE_MODES = ("patch", "branch")
EXECUTORS = ("inprocess", "local", "ray")  # where isolated subagents run (core/task/headless.py)


def task_setting(settings: Any, key: str, default: Any = None) -> Any:
    """``task.<key>``: the flat spelling first, then the nested path."""
    merged = settings.as_dict() if hasattr(settings, "as_dict") else dict(settings)
    full = f"task.{key}"
    if full in merged:
        return merged[full]
    node: Any = merged
    for part in full.split("."):
        if not isinstance(node, dict) or part not in node:
            return default
        node = node[part]
    return node


def _num(value: Any, default: float | None, minimum: float = 0) -> Any:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < minimum:
        return default
    return int(value) if float(value).is_integer() else value


def _str(value: Any, default: str) -> str:
    return value if isinstance(value, str) else default


@dataclass(frozen=True)
class TaskConfig:
    isolation_mode: str = "none"
    merge_mode: str = "patch"
    max_concurrency: int = 32
    max_recursion_depth: int = 2
    disabled_agents: tuple[str, ...] = ()
    agent_model_overrides: dict[str, Any] | None = None
    verification: dict[str, Any] | None = None  # the raw task.verification object (resolved in verify.py)
    executor: Any = "inprocess"  # task.executor, checked where it is used (headless.py)
    executor_options: dict[str, Any] | None = None  # the raw task.executorOptions object

    @classmethod
    def from_settings(cls, settings: Any) -> "TaskConfig":
        merged = settings.as_dict()
        get = lambda key, default=None: task_setting(merged, key, default)  # noqa: E731
        disabled = get("disabledAgents", [])
        overrides = get("agentModelOverrides", {})
        verification: dict[str, Any] = {}
        for key in ("enabled", "defaultProfile", "requireForIsolated", "maxRetries", "failureContextLineLimit",
                    "profiles"):
            value = get(f"verification.{key}", _MISSING)
            if value is not _MISSING:
                verification[key] = value
        # seed 000's settings example turns verification on and never names task.isolation.mode, while its
        # verification only runs in isolated tasks: with task.verification.enabled and no mode set, isolated
        # tasks run in worktrees (an explicit "none" still turns isolation off)
        default_mode = "worktree" if verification.get("enabled") is True else "none"
        return cls(
            isolation_mode=_str(get("isolation.mode"), default_mode),
            merge_mode=_str(get("isolation.merge"), "patch"),
            max_concurrency=max(1, int(_num(get("maxConcurrency"), 32, 1))),
            max_recursion_depth=int(_num(get("maxRecursionDepth"), 2, -1)),
            disabled_agents=tuple(a for a in disabled if isinstance(a, str)) if isinstance(disabled, list) else (),
            agent_model_overrides=overrides if isinstance(overrides, dict) else {},
            verification=verification,
            executor=get("executor", "inprocess"),
            executor_options=opts if isinstance(opts := get("executorOptions", {}), dict) else {},
        )

    @property
    def isolation_enabled(self) -> bool:
        return self.isolation_mode != "none"
