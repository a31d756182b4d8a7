"""A batch manifest's line, checked: every mistake is a sentence naming the line and the field.

A line is ``{id, repo, prompt | prompt_file, commit?, base_patch?, model?, thinking?, tools?, budget?, verify?,
env?, timeout?}``. ``base_patch`` is a binary git patch applied on top of ``commit`` and committed as the item's
baseline (the task tool carries its caller's uncommitted changes this way, see core/task/headless.py).
``repo`` is a local path or a git URL; ``verify`` is a list of shell commands (or ``{"commands": [...]}``);
``budget`` holds the ``task.budget`` keys of docs/budgets.md; ``timeout`` is seconds.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from typing import Any

_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_KNOWN = {"id", "repo", "commit", "prompt", "prompt_file", "model", "thinking", "tools", "budget", "verify",
          "env", "timeout", "provider", "base_patch"}
_BUDGET_KEYS = {"maxWallTimeMs", "maxInputTokens", "maxOutputTokens", "maxTotalTokens", "maxCostUsd",
                "maxToolCalls", "maxSubagents", "warnAtRatio", "abortOnExceeded"}
_URL = re.compile(r"^(https?|ssh|git|file)://|^[\w.-]+@[\w.-]+:")


class ManifestError(ValueError):
    pass


@dataclass
class ItemSpec:
    id: str
    repo: str
    prompt: str
    commit: str | None = None
    base_patch: str | None = None  # applied on top of ``commit`` and committed: the item's baseline
    provider: str | None = None
    model: str | None = None
    thinking: str | None = None
    tools: str | None = None
    budget: dict[str, Any] | None = None
    verify: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    timeout: float | None = None
    index: int = 0  # the line's place among the manifest's items (Kubernetes' JOB_COMPLETION_INDEX)

    @property
    def is_url(self) -> bool:
        return bool(_URL.match(self.repo))


@dataclass
class RunDefaults:
    """What the batch command line says for every item (an item's own field wins)."""

    provider: str | None = None
    model: str | None = None
    thinking: str | None = None
    tools: str | None = None
    faux_script: str | None = None
    approval_mode: str | None = None
    timeout: float = 1800.0
    budget: dict[str, Any] | None = None
    python: str | None = None  # the interpreter that runs pisces (default: this one)
    agent_dir: str | None = None  # the user's agent dir, whose auth and models the items use
    sandbox: str | None = None  # --sandbox of every item's pisces (the OS sandbox of its commands)


def _fail(where: str, text: str) -> ManifestError:
    return ManifestError(f"{where}: {text}")


def parse_item(obj: Any, where: str, base_dir: str, index: int) -> ItemSpec:
    if not isinstance(obj, dict):
        raise _fail(where, "each line must be a JSON object")
    unknown = sorted(set(obj) - _KNOWN)
    if unknown:
        raise _fail(where, f"unknown field{'s' if len(unknown) > 1 else ''} {', '.join(unknown)} "
                           f"(known: {', '.join(sorted(_KNOWN))})")
    item_id = obj.get("id")
    if not isinstance(item_id, str) or not _ID.match(item_id):
        raise _fail(where, "id must be a string of letters, digits, '.', '_' or '-' (at most 128)")
    repo = obj.get("repo")
    if not isinstance(repo, str) or not repo:
        raise _fail(where, "repo must be a path or a git URL")
    if not _URL.match(repo):
        repo = os.path.normpath(os.path.join(base_dir, os.path.expanduser(repo)))
        if not os.path.isdir(repo):
            raise _fail(where, f"repo {repo} is not a directory")
    has_prompt, has_file = "prompt" in obj, "prompt_file" in obj
    if has_prompt == has_file:
        raise _fail(where, "give exactly one of prompt and prompt_file")
    if has_prompt:
        prompt = obj["prompt"]
        if not isinstance(prompt, str) or not prompt.strip():
            raise _fail(where, "prompt must be a non-empty string")
    else:
        path = obj["prompt_file"]
        if not isinstance(path, str):
            raise _fail(where, "prompt_file must be a path")
        path = os.path.join(base_dir, os.path.expanduser(path))
        try:
            with open(path, encoding="utf-8") as f:
                prompt = f.read(1_000_000 + 1)
        except OSError as exc:
            raise _fail(where, f"cannot read prompt_file {path}: {exc.strerror or exc}") from None
        if len(prompt) > 1_000_000 or not prompt.strip():
            raise _fail(where, f"prompt_file {path} must hold a prompt of at most 1,000,000 characters")
    spec = ItemSpec(id=item_id, repo=repo, prompt=prompt, index=index)
    for key in ("commit", "base_patch", "provider", "model", "thinking", "tools"):
        value = obj.get(key)
        if value is not None and not isinstance(value, str):
            raise _fail(where, f"{key} must be a string")
        setattr(spec, key, value)
    budget = obj.get("budget")
    if budget is not None:
        if not isinstance(budget, dict) or set(budget) - _BUDGET_KEYS:
            raise _fail(where, f"budget must be an object with keys among {', '.join(sorted(_BUDGET_KEYS))}")
        spec.budget = budget
    verify = obj.get("verify")
    if isinstance(verify, dict):
        verify = verify.get("commands")
    if verify is not None:
        if not isinstance(verify, list) or not all(isinstance(c, str) and c.strip() for c in verify):
            raise _fail(where, "verify must be a list of shell commands (or {\"commands\": [...]})")
        spec.verify = verify
    env = obj.get("env")
    if env is not None:
        if not isinstance(env, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
            raise _fail(where, "env must map names to strings")
        spec.env = env
    timeout = obj.get("timeout")
    if timeout is not None:
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
            raise _fail(where, "timeout must be a positive number of seconds")
        spec.timeout = float(timeout)
    return spec


def read_manifest(path: str) -> list[ItemSpec]:
    """Every item of the manifest at ``path``, in order; a ManifestError names the first bad line."""
    base = os.path.dirname(os.path.abspath(path))
    items: list[ItemSpec] = []
    seen: set[str] = set()
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as exc:
        raise ManifestError(f"cannot read the manifest {path}: {exc.strerror or exc}") from None
    for number, line in enumerate(lines, 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        where = f"{path}:{number}"
        try:
            obj = json.loads(line)
        except ValueError as exc:
            raise _fail(where, f"not JSON ({exc})") from None
        spec = parse_item(obj, where, base, len(items))
        if spec.id in seen:
            raise _fail(where, f"id {spec.id!r} appears twice")
        seen.add(spec.id)
        items.append(spec)
    if not items:
        raise ManifestError(f"the manifest {path} has no items")
    return items
