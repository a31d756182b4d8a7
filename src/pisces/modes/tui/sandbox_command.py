"""``/sandbox``: the terminal UI's view and switch of the OS sandbox, through the host's ``set_sandbox``.

``/sandbox`` shows the mode, the network and the mechanism; ``/sandbox MODE`` (``read-only``,
``workspace-write``, ``off``, ``default``) sets the mode; ``/sandbox network on|off|default`` the network.
The person typed it, so loosening is allowed; the host records it (docs/security.md).
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable

MODES = ("read-only", "workspace-write", "off")
USAGE = "usage: /sandbox [read-only|workspace-write|off|default] | /sandbox network on|off|default"


def describe(state: dict[str, Any]) -> str:
    enforced = "enforced" if state.get("enforced") else "not enforced"
    return (f"sandbox: {state.get('mode')} ({state.get('modeSource')}), network "
            f"{'on' if state.get('network') else 'off'}, {enforced}"
            f"{' by ' + state['mechanism'] if state.get('mechanism') else ''}; subagents: {state.get('delegatedMode')}")


def parse(rest: str) -> dict[str, Any] | None:
    """The ``set_sandbox`` command for ``rest``; {} to only show; None when ``rest`` is not understood."""
    words = rest.split()
    if not words:
        return {}
    if len(words) == 1 and (words[0] in MODES or words[0] == "default"):
        return {"mode": None if words[0] == "default" else words[0]}
    if len(words) == 2 and words[0] == "network" and words[1] in ("on", "off", "default"):
        return {"network": None if words[1] == "default" else words[1] == "on"}
    return None


async def sandbox_command(ask: Callable[[dict[str, Any]], Awaitable[Any]], note: Callable[[str], None],
                          rest: str) -> None:
    change = parse(rest)
    if change is None:
        note(USAGE)
        return
    if change:
        state = await ask({"type": "set_sandbox", **change})
    else:
        state = (await ask({"type": "get_state"}) or {}).get("sandbox")
    note(describe(state) if isinstance(state, dict) else "this session has no OS sandbox")
