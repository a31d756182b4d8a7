"""Servers from other agents' configuration files, read when the setting ``mcp.importConfigs`` names them
(``["claude", "cursor"]``). Stdlib only; never written.

- ``claude``: ``~/.claude.json``, its ``mcpServers`` (Claude Code's user scope), then its
  ``projects[<cwd>].mcpServers`` (the local scope: the person's own file); scope user.
- ``cursor``: ``~/.cursor/mcp.json`` (scope user), then ``<project>/.cursor/mcp.json`` (scope project: it starts
  only in a trusted project).

(Claude Code's user scope), then its ``projects[<cwd>].mcpServers`` (the local scope: the person's own file) | user |
| ``cursor`` | ``~/.cursor/mcp.json`` | user |
|  | ``<project>/.cursor/mcp.json`` | project (starts only in a trusted project) |

(Claude Code's project scope is ``.mcp.json``, which pisces reads anyway.) Imported servers come before
pisces' own files, so a server pisces' files define wins over an imported one of the same name.
"""

from __future__ import annotations

import json
import os
from typing import Any

from pisces.core.safe_open import read_bytes

KNOWN = ("claude", "cursor")
_MAX = 64 << 20  # ~/.claude.json also holds Claude Code's history


def _load(path: str) -> Any:
    try:
        return json.loads(read_bytes(path, _MAX).decode("utf-8-sig"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, RecursionError) as exc:
        raise ValueError(f"cannot import {path}: {exc}") from None


def imported(cwd: str, names: Any) -> tuple[list[tuple[str, str, dict[str, Any]]], list[str]]:
    """``([(source, scope, {name: server})], errors)`` for the agents named in ``names``."""
    out: list[tuple[str, str, dict[str, Any]]] = []
    errors: list[str] = []
    if not isinstance(names, list):
        return out, ([f"mcp.importConfigs must be a list of names ({', '.join(KNOWN)})"] if names else [])
    home = os.path.expanduser("~")
    for name in names:
        if name not in KNOWN:
            errors.append(f"mcp.importConfigs: unknown agent {name!r} (known: {', '.join(KNOWN)})")
            continue
        try:
            if name == "claude":
                path = os.path.join(home, ".claude.json")
                data = _load(path)
                if isinstance(data, dict):
                    if isinstance(data.get("mcpServers"), dict):
                        out.append((path, "user", data["mcpServers"]))
                    project = (data.get("projects") or {}).get(os.path.realpath(cwd)) \
                        if isinstance(data.get("projects"), dict) else None
                    if isinstance(project, dict) and isinstance(project.get("mcpServers"), dict):
                        out.append((f"{path} (projects.{os.path.realpath(cwd)})", "user", project["mcpServers"]))
            else:
                for path, scope in ((os.path.join(home, ".cursor", "mcp.json"), "user"),
                                    (os.path.join(cwd, ".cursor", "mcp.json"), "project")):
                    data = _load(path)
                    if isinstance(data, dict) and isinstance(data.get("mcpServers"), dict):
                        out.append((path, scope, data["mcpServers"]))
        except ValueError as exc:
            errors.append(str(exc))
    return out, errors
