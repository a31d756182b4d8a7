"""``set_sandbox``: a person changes the OS sandbox of the running session (docs/security.md#changing-it-at-run-time).

``{"type":"set_sandbox","mode"?:"read-only"|"workspace-write"|"off"|null,"network"?:true|false|null}``; at least
one of the two; ``null`` goes back to the flag, the settings or the default. The answer is ``get_state``'s
``sandbox``. Commands come from the client, which is the person's front end (a typed client, the terminal UI,
the web UI), never from the model: no tool reaches this, so the model cannot loosen its own sandbox. Tightening
and loosening are both accepted here; every change is recorded in ``sandbox.changes`` and a loosening is also
written to stderr. A change applies from the next command (one already running keeps its confinement) and to
subagents and verification started after it.
"""

from __future__ import annotations

from typing import Any

from pisces.modes.host.commands import RpcError

_MODES = ("read-only", "workspace-write", "off")


def _kind(value: Any) -> str:
    return repr(value) if isinstance(value, str) else "null" if value is None else type(value).__name__


def set_sandbox(server: Any, cmd: dict[str, Any]) -> Any:
    sandbox = getattr(server.session, "sandbox", None)
    if sandbox is None:
        raise RpcError("This session has no OS sandbox to change")
    if "mode" not in cmd and "network" not in cmd:
        raise RpcError("set_sandbox needs 'mode' ('read-only', 'workspace-write', 'off' or null) and/or "
                       "'network' (true, false or null)")
    mode, network = cmd.get("mode"), cmd.get("network")
    if mode is not None and mode not in _MODES:
        raise RpcError(f"Invalid sandbox mode {_kind(mode)}: use 'read-only', 'workspace-write', 'off' or null")
    if network is not None and not isinstance(network, bool):
        raise RpcError(f"Invalid 'network': expected true, false or null, got {_kind(network)}")
    return sandbox.change("the client (set_sandbox)", mode=mode, network=network,
                          reset_mode="mode" in cmd and mode is None,
                          reset_network="network" in cmd and network is None)
