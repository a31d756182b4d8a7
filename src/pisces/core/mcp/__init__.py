"""MCP servers as tools of a session (docs/mcp.md).

:func:`attach` is what the session build calls. Without a configuration file (and without servers from a front
end) it costs three ``stat`` calls and imports nothing; the SDK (``pisces.core.mcp.manager``) is imported only when
a server will start. Project servers in an untrusted project are named on stderr and in ``mcp_status``, and start
no process.
"""

from __future__ import annotations

import sys
from typing import Any

from pisces.core.mcp.config import any_config_present, load_config, untrusted_message

__all__ = ["attach", "McpUnavailable"]


class McpUnavailable(RuntimeError):
    """No server can start here (none configured, or the ``mcp`` package is missing)."""


def attach(session: Any, *, extra: dict[str, Any] | None = None, start: bool = True) -> Any:
    """The session's :class:`~pisces.core.mcp.manager.McpManager` (also ``session.mcp``), or None when no
    server is configured. ``extra``: servers a front end passed for this session (ACP's ``mcpServers``).
    ``start``: connect now (needs a running event loop; otherwise call ``session.mcp.start()`` in one)."""
    imports = session.settings.get("mcp.importConfigs")  # other agents' files (pisces.core.mcp.imports)
    if not extra and not imports and not any_config_present(session.cwd, session.settings.agent_dir):
        return None
    if session.mcp is not None and extra:  # a front end adds its servers to those of the files
        from pisces.core.mcp.config import load_config as _load  # noqa: PLC0415 - same module, for clarity

        more = _load(session.cwd, session.settings.agent_dir, trusted=False, extra=extra, imports=None)
        for error in more.errors:
            sys.stderr.write(f"pisces: mcp: {error}\n")
        session.mcp.add([s for s in more.servers.values() if s.scope == "session"])
        return session.mcp
    config = load_config(session.cwd, session.settings.agent_dir, extra=extra, imports=imports)
    for error in config.errors:
        sys.stderr.write(f"pisces: mcp: {error}\n")
    if config.untrusted:
        sys.stderr.write(f"pisces: {untrusted_message(config.untrusted)}\n")
    if not config.servers and not config.untrusted:
        return None
    try:
        from pisces.core.mcp.manager import McpManager  # noqa: PLC0415 - the SDK loads only when a server is configured
    except ImportError as exc:
        sys.stderr.write(f"pisces: MCP servers are configured but the 'mcp' package is missing ({exc}): "
                         "pip install 'pisces[mcp]'\n")
        return None
    manager = McpManager(session, config)
    session.mcp = manager
    if start:
        try:
            manager.start()
        except RuntimeError:  # no running loop: the caller starts it
            pass
    return manager
