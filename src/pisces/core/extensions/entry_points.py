"""Entry points of installed distributions, found without importing ``importlib.metadata`` (30-50 ms).

The ``*.dist-info``/``*.egg-info`` directories on ``sys.path`` are read directly, and the result is cached in
``<agent_dir>/cache/entry-points.json`` under a key made of those directories' modification times, which change
whenever a distribution is installed or removed. With the cache current, finding "no extensions installed" costs
a few ``stat`` calls and one small read.
"""

from __future__ import annotations

import json
import os
import sys

from pisces.core.safe_open import private_dir


def _dirs() -> list[str]:
    return [p for p in dict.fromkeys(sys.path) if p and os.path.isdir(p)]


def cache_key() -> list[list]:
    key = []
    for d in _dirs():
        try:
            key.append([d, os.stat(d).st_mtime_ns])
        except OSError:
            continue
    return key


def _cache_path(agent_dir: str) -> str:
    return os.path.join(agent_dir, "cache", "entry-points.json")


def cached(group: str, agent_dir: str) -> list[list[str]] | None:
    """The cached entries of ``group``, or None when the cache is missing or out of date."""
    try:
        with open(_cache_path(agent_dir), encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("key") != cache_key():
        return None
    groups = data.get("groups")
    if not isinstance(groups, dict) or not isinstance(groups.get(group), list):
        return None
    return groups[group]


def _parse(text: str) -> dict[str, list[list[str]]]:
    groups: dict[str, list[list[str]]] = {}
    section = None
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1].strip()
            continue
        if section is not None and "=" in line:
            name, _, value = line.partition("=")
            groups.setdefault(section, []).append([name.strip(), value.strip()])
    return groups


def scan() -> dict[str, list[list[str]]]:
    groups: dict[str, list[list[str]]] = {}
    for d in _dirs():
        try:
            names = os.listdir(d)
        except OSError:
            continue
        for name in sorted(names):
            if not name.endswith((".dist-info", ".egg-info")):
                continue
            try:
                with open(os.path.join(d, name, "entry_points.txt"), encoding="utf-8") as f:
                    text = f.read()
            except OSError:
                continue
            dist = name.rsplit(".", 1)[0].split("-", 1)[0]
            for group, entries in _parse(text).items():
                groups.setdefault(group, []).extend([n, v, dist] for n, v in entries)
    return groups


def entry_points(group: str, agent_dir: str) -> list[list[str]]:
    """[name, "module:attr", distribution] for each entry point of ``group``, in distribution name order."""
    hit = cached(group, agent_dir)
    if hit is not None:
        return hit
    key = cache_key()
    groups = scan()
    try:
        private_dir(os.path.dirname(_cache_path(agent_dir)))
        tmp = _cache_path(agent_dir) + f".{os.getpid()}.tmp"
        with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w", encoding="utf-8") as f:
            json.dump({"key": key, "groups": {group: groups.get(group, [])}}, f)
        os.replace(tmp, _cache_path(agent_dir))
    except OSError:
        pass
    return groups.get(group, [])
