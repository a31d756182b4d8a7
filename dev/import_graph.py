"""The package graph of src/pisces, counting every import (function-level and TYPE_CHECKING ones too).

A node is a package (a folder) or a module file sitting directly in ``pisces/`` or ``pisces/core/``; an edge
A -> B means a module of A imports a module of B. Prints the cycles (strongly connected components larger than
one node) and the edges that point from a lower layer to a higher one, and exits 1 when there is either.

    python dev/import_graph.py            # check
    python dev/import_graph.py --edges    # also list every edge
"""

from __future__ import annotations

import ast
import os
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")
# layer of each top-level part: an import may only go to the same or a lower number
LAYERS = {"ai": 0, "agent": 1, "core": 2, "modes": 3, "cli": 4, "__main__": 5, "client": 0, "__init__": 5}
# a module file directly in one of these is a node of its own
LOOSE_PARENTS = ("pisces", "pisces.ai", "pisces.core", "pisces.modes")


def node_of(module: str) -> str:
    parts = module.split(".")
    for i in range(len(parts), 0, -1):
        prefix = ".".join(parts[:i])
        path = os.path.join(ROOT, *parts[:i])
        if os.path.isdir(path):
            # a package: itself a node unless it is pisces or pisces.core (their subpackages are nodes)
            if prefix in LOOSE_PARENTS and i < len(parts):
                return node_of_child(parts, i)
            return prefix
        if os.path.isfile(path + ".py"):
            parent = ".".join(parts[: i - 1])
            if parent in LOOSE_PARENTS:
                return prefix
            return node_of(parent)
    return module


def node_of_child(parts: list[str], i: int) -> str:
    child = ".".join(parts[: i + 1])
    if os.path.isdir(os.path.join(ROOT, *parts[: i + 1])):
        if child in LOOSE_PARENTS:
            return node_of(".".join(parts))
        return child
    return child


def modules() -> list[tuple[str, str]]:
    out = []
    for dirpath, _dirs, files in os.walk(os.path.join(ROOT, "pisces")):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")
                if rel.endswith(".__init__"):
                    rel = rel[: -len(".__init__")]
                out.append((rel, path))
    return out


def imports_of(module: str, path: str) -> set[str]:
    tree = ast.parse(open(path, encoding="utf-8").read(), path)
    is_pkg = path.endswith("__init__.py")
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("pisces"))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                base = base if is_pkg else base[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not target.startswith("pisces"):
                continue
            found.add(target)
            for a in node.names:  # ``from pisces.core import paths`` names a module
                sub = f"{target}.{a.name}"
                if os.path.isfile(os.path.join(ROOT, *sub.split(".")) + ".py") or os.path.isdir(
                        os.path.join(ROOT, *sub.split("."))):
                    found.add(sub)
    return found


# inside a layer, the order of its parts (lower numbers are imported by higher ones, never the reverse)
RANKS = {
    "pisces.core.errors": 0, "pisces.core.safe_open": 0, "pisces.core.config": 1, "pisces.core.store": 2,
    "pisces.core.sandbox": 2, "pisces.core.executor": 3,
    "pisces.core.resources": 3, "pisces.core.tools": 3, "pisces.core.approval": 3, "pisces.core.budget": 3,
    "pisces.core.compaction": 3, "pisces.core.export_html": 3, "pisces.core.extensions": 4, "pisces.core.task": 4,
    "pisces.core.planning": 4,
    "pisces.core.session": 5, "pisces.core.sdk": 6,
    "pisces.modes.signals": 0, "pisces.modes.host": 1, "pisces.modes.entry": 1, "pisces.modes.file_args": 1,
    "pisces.modes.web": 2,
    "pisces.modes.acp": 2, "pisces.modes.rpc": 3, "pisces.modes.print": 4,
}


def layer(node: str) -> float:
    parts = node.split(".")
    return LAYERS.get(parts[1] if len(parts) > 1 else "__init__", 5) + RANKS.get(node, 5) / 10


def main() -> int:
    edges: dict[str, set[str]] = {}
    for module, path in modules():
        src = node_of(module)
        for target in imports_of(module, path):
            dst = node_of(target)
            if dst != src and dst not in LOOSE_PARENTS and not (src.startswith(dst + ".") and dst == "pisces"):
                edges.setdefault(src, set()).add(dst)
    nodes = set(edges) | {d for ds in edges.values() for d in ds}
    # Tarjan's strongly connected components
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    sccs: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                sccs.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(nodes):
        if v not in index:
            visit(v)
    upward = sorted((a, b) for a, ds in edges.items() for b in ds if layer(b) > layer(a))
    # the Python client stands alone: published programs embed it without the agent
    upward += sorted((a, b) for a, ds in edges.items() for b in ds if a == "pisces.client")
    n_edges = sum(len(d) for d in edges.values())
    print(f"{len(nodes)} nodes, {n_edges} edges, {len(sccs)} cycles, {len(upward)} upward edges")
    for comp in sccs:
        print("cycle:", " <-> ".join(comp))
        for a in comp:
            for b in sorted(edges.get(a, ())):
                if b in comp:
                    print(f"    {a} -> {b}")
    for a, b in upward:
        print(f"upward: {a} -> {b}")
    if "--edges" in sys.argv:
        for a in sorted(edges):
            print(a, "->", ", ".join(sorted(edges[a])))
    return 1 if sccs or upward else 0


if __name__ == "__main__":
    raise SystemExit(main())
