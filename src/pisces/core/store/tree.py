"""The session as a tree of nodes, for tree views (pi's ``getTree``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Mapping

from .entries import SessionEntry
from .ids import iso_to_ms

__all__ = ["SessionTreeNode", "build_tree"]


@dataclass
class SessionTreeNode:
    entry: SessionEntry
    children: list["SessionTreeNode"] = field(default_factory=list)
    label: str | None = None  # the resolved label of this entry, if any


def build_tree(entries: Iterable[SessionEntry], labels: Mapping[str, str]) -> list[SessionTreeNode]:
    """Roots (normally one) with their children, each list ordered oldest first by timestamp.

    An entry whose parent is missing (a broken chain) or is itself becomes a root as well.
    """
    nodes: dict[str, SessionTreeNode] = {}
    order: list[SessionTreeNode] = []
    for entry in entries:
        node = SessionTreeNode(entry=entry, label=labels.get(entry.id))
        nodes[entry.id] = node
        order.append(node)
    roots: list[SessionTreeNode] = []
    for node in order:
        parent_id = node.entry.parentId
        parent = nodes.get(parent_id) if parent_id is not None and parent_id != node.entry.id else None
        if parent is None or parent is node:
            roots.append(node)
        else:
            parent.children.append(node)
    cache: dict[str, int] = {}

    def when(node: SessionTreeNode) -> int:
        ts = node.entry.timestamp
        ms = cache.get(ts)
        if ms is None:
            ms = cache[ts] = iso_to_ms(ts)
        return ms

    stack = list(roots)
    while stack:
        node = stack.pop()
        if len(node.children) > 1:
            node.children.sort(key=when)
        stack.extend(node.children)
    return roots
