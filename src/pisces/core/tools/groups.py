"""Tools that come and go as a group (extension tools, a host's tools) beside the built-in ones.

A group replaces its previous tools at once. A group tool with a built-in's name replaces the built-in (pi:
"Overriding Built-in Tools") unless the group is ``exclusive`` (host tools must not clash with an existing tool);
the built-in comes back when the group drops the name. New tool names are switched on unless listed in
``hidden``; names the group drops are switched off; the rest of the active set stays as it was.
"""

from __future__ import annotations

from typing import Any


class ToolConflict(ValueError):
    pass


def replace_tool_group(session: Any, owner: str, tools: list[Any], *, hidden: set[str] | frozenset = frozenset(),
                       exclusive: bool = False) -> list[str]:
    names = [t.name for t in tools]
    if len(set(names)) != len(names):
        raise ToolConflict(f"{owner} tool names must be unique")
    groups: dict[str, dict[str, Any]] = session.tool_groups
    old = groups.get(owner, {"names": [], "shadowed": {}})
    if exclusive:
        taken = {n for g, state in groups.items() if g != owner for n in state["names"]}
        for name in names:
            if (name in session.all_tools and name not in old["names"]) or name in taken:
                raise ToolConflict(f'{owner} tool "{name}" conflicts with an existing tool')
    active_before = [t.name for t in session.agent.tools]
    for name in old["names"]:
        if name in old["shadowed"]:
            session.all_tools[name] = old["shadowed"][name]
        else:
            session.all_tools.pop(name, None)
    shadowed = {}
    for tool in tools:
        if tool.name in session.all_tools:
            shadowed[tool.name] = session.all_tools[tool.name]
        session.all_tools[tool.name] = tool
    groups[owner] = {"names": names, "shadowed": shadowed}
    dropped = set(old["names"]) - set(names) - set(shadowed)
    active = [n for n in active_before if n not in dropped and n in session.all_tools]
    active += [n for n in names if n not in old["names"] and n not in hidden and n not in active]
    session.set_active_tools(active)
    return names


def tool_source_info(session: Any, tool: Any) -> dict[str, Any]:
    definition = getattr(tool, "definition", None)
    if definition is not None and hasattr(definition, "extension"):
        return dict(definition.extension.source_info)
    for owner, state in session.tool_groups.items():
        if tool.name in state["names"]:
            return {"path": f"<{owner}>", "source": owner, "scope": "temporary", "origin": "top-level"}
    return {"path": f"<builtin:{tool.name}>", "source": "builtin", "scope": "temporary", "origin": "top-level"}
