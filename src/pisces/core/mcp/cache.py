"""The tool definitions of each MCP server from its last connection, so that a session offers them before the
server has connected. Stdlib only.

One private file per server configuration in ``<agentDir>/mcp-cache/`` (directory 0700, files 0600, written
whole then renamed into place), named by a hash of what identifies the server (transport, command, args, env,
cwd, url, headers, as written: ``${VAR}`` references, not their values). A changed configuration is a new key,
so a stale list is never offered for another server. A file that is missing, too large or unreadable is no
cache (the server's tools then appear when it connects).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from typing import Any

from pisces.core.safe_open import read_bytes

MAX_FILE = 4 << 20
DIR = "mcp-cache"


def key(cfg: Any) -> str:
    ident = {"name": cfg.name, "transport": cfg.transport, "command": cfg.command, "args": cfg.args,
             "env": cfg.env, "cwd": cfg.cwd, "url": cfg.url, "headers": cfg.headers}
    return hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:32]


def path(agent_dir: str, cfg: Any) -> str:
    return os.path.join(agent_dir, DIR, f"{key(cfg)}.json")


def load(agent_dir: str, cfg: Any) -> list[dict[str, Any]] | None:
    """The cached tool definitions (``name``, ``title``, ``description``, ``inputSchema``), or None."""
    try:
        data = json.loads(read_bytes(path(agent_dir, cfg), MAX_FILE))
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or data.get("key") != key(cfg) or not isinstance(data.get("tools"), list):
        return None
    return [t for t in data["tools"] if isinstance(t, dict) and isinstance(t.get("name"), str)]


def definitions(tools: list[Any]) -> list[dict[str, Any]]:
    """SDK tool objects as the plain definitions the cache keeps."""
    out = []
    for t in tools:
        out.append({"name": str(t.name), "title": getattr(t, "title", None),
                    "description": getattr(t, "description", None),
                    "inputSchema": getattr(t, "input_schema", None) or {"type": "object"}})
    return out


def save(agent_dir: str, cfg: Any, tools: list[dict[str, Any]]) -> None:
    """Write the definitions (best effort: a read-only agent dir only loses the cache)."""
    target = path(agent_dir, cfg)
    body = json.dumps({"key": key(cfg), "server": cfg.name, "tools": tools}, ensure_ascii=False).encode()
    if len(body) > MAX_FILE:
        return
    with contextlib.suppress(OSError):
        os.makedirs(os.path.dirname(target), mode=0o700, exist_ok=True)
        tmp = f"{target}.{os.getpid()}.tmp"
        with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as f:
            f.write(body)
        os.replace(tmp, target)
