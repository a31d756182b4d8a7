"""Agent definitions: markdown files with front matter, bundled with pisces and overridable per user and project.

Front matter fields: ``name`` and ``description`` (required), ``tools`` (a list or a comma-separated string;
absent means every built-in tool), ``spawns`` (``"*"``, a list or a comma-separated string of agents this one
may start; inferred ``"*"`` when ``tools`` names ``task``), ``model`` (a pattern or a list of patterns, tried
in order), ``thinking-level`` (also ``thinkingLevel`` or ``thinking``), ``output`` (a JTD schema the result
must match) and ``blocking``. The body is the agent's system prompt.

Discovery, first name wins: for each configuration family in the order pisces, pi, Claude, the project's
directory (the nearest ``.pisces/agents``, ``.pi/agents`` or ``.claude/agents`` walking up from the working
directory) and then the user's (``<agent dir>/agents``, ``~/.pi/agent/agents``, ``~/.claude/agents``); then the
bundled agents. Project agents choose tools and prompts, so they load only in a trusted project.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from typing import Any

from pisces.core.config.paths import dirs_to_root
from pisces.core.config.trust import is_project_trusted as trusted
from pisces.core.task.frontmatter import FrontmatterError, parse_frontmatter

BUNDLED_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bundled")

_THINKING_ALIASES = {"off": "off", "none": "off", "minimal": "minimal", "min": "minimal", "low": "low",
                     "medium": "medium", "med": "medium", "high": "high", "xhigh": "xhigh"}


class AgentParseError(ValueError):
    pass


@dataclass
class AgentDefinition:
    name: str
    description: str
    system_prompt: str
    source: str  # "bundled" | "user" | "project"
    tools: list[str] | None = None
    spawns: list[str] | str | None = None  # None: may not spawn; "*": any agent
    model: list[str] | None = None
    thinking_level: str | None = None
    output: Any = None
    blocking: bool = False
    file_path: str | None = None


@dataclass
class Discovery:
    agents: list[AgentDefinition]
    project_agents_dir: str | None
    skipped_untrusted: list[str] = field(default_factory=list)  # project dirs ignored: the project is not trusted

    def get(self, name: str) -> AgentDefinition | None:
        return next((a for a in self.agents if a.name == name), None)


def _names(value: Any, field_name: str, where: str) -> list[str] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return [p.strip() for p in value.split(",") if p.strip()]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return [v.strip() for v in value if v.strip()]
    raise AgentParseError(f"{where}: '{field_name}' must be a list or a comma-separated string")


def parse_agent(text: str, source: str, file_path: str | None = None) -> AgentDefinition:
    where = file_path or "agent"
    try:
        meta, body = parse_frontmatter(text)
    except FrontmatterError as exc:
        raise AgentParseError(f"{where}: {exc}") from None
    name, description = meta.get("name"), meta.get("description")
    if not isinstance(name, str) or not name.strip():
        raise AgentParseError(f"{where}: the front matter needs a 'name'")
    if not isinstance(description, str) or not description.strip():
        raise AgentParseError(f"{where}: the front matter needs a 'description'")
    tools = _names(meta.get("tools"), "tools", where)
    if tools is not None:
        tools = [t.lower() for t in tools]
    spawns_raw = meta.get("spawns")
    spawns: list[str] | str | None
    if spawns_raw == "*" or (isinstance(spawns_raw, list) and "*" in spawns_raw):
        spawns = "*"
    else:
        spawns = _names(spawns_raw, "spawns", where)
    if spawns is None and tools is not None and "task" in tools:
        spawns = "*"
    level_raw = next((meta[k] for k in ("thinking-level", "thinkingLevel", "thinking") if k in meta), None)
    level = None
    if level_raw is not None:
        level = _THINKING_ALIASES.get(str(level_raw).strip().lower())
        if level is None:
            raise AgentParseError(f"{where}: unknown thinking level {level_raw!r}")
    output = meta.get("output")
    if output is not None and not isinstance(output, dict):
        raise AgentParseError(f"{where}: 'output' must be a JTD schema (a mapping)")
    return AgentDefinition(
        name=name.strip(), description=description.strip(), system_prompt=body.strip(), source=source,
        tools=tools, spawns=spawns, model=_names(meta.get("model"), "model", where), thinking_level=level,
        output=output, blocking=meta.get("blocking") is True, file_path=file_path)


_bundled_cache: list[AgentDefinition] | None = None


def bundled_agents() -> list[AgentDefinition]:
    global _bundled_cache
    if _bundled_cache is None:
        agents = []
        for fname in sorted(os.listdir(BUNDLED_DIR)):
            if fname.endswith(".md"):
                path = os.path.join(BUNDLED_DIR, fname)
                with open(path, encoding="utf-8") as f:
                    agents.append(parse_agent(f.read(), "bundled", f"bundled:{fname}"))
        order = {"task": 0, "quick_task": 1, "explore": 2, "plan": 3, "reviewer": 4}
        _bundled_cache = sorted(agents, key=lambda a: (order.get(a.name, 99), a.name))
    return list(_bundled_cache)


_warned: set[str] = set()


def _warn_once(key: str, message: str) -> None:
    if key not in _warned:
        _warned.add(key)
        sys.stderr.write(f"pisces: {message}\n")


def _load_dir(directory: str, source: str) -> list[AgentDefinition]:
    try:
        names = sorted(n for n in os.listdir(directory) if n.endswith(".md"))
    except OSError:
        return []
    out = []
    for fname in names:
        path = os.path.join(directory, fname)
        if not os.path.isfile(path):
            continue
        try:
            with open(path, encoding="utf-8") as f:
                out.append(parse_agent(f.read(), source, path))
        except (OSError, UnicodeDecodeError, AgentParseError) as exc:
            _warn_once(path, f"skipping agent file {path}: {exc}")
    return out


_FAMILIES = (".pisces", ".pi", ".claude")


def _nearest_project_dirs(cwd: str) -> dict[str, str]:
    """The nearest ``<dir>/<family>/agents`` of each family, walking up from ``cwd`` to the project root (the
    git root, else ``cwd``: ``paths.project_root``), never into a shared parent directory."""
    found: dict[str, str] = {}
    home = os.path.abspath(os.path.expanduser("~"))
    for current in dirs_to_root(cwd):
        for family in _FAMILIES if current != home else ():  # the home directory holds the user's dirs
            candidate = os.path.join(current, family, "agents")
            if family not in found and os.path.isdir(candidate):
                found[family] = candidate
    return found


def _user_dirs(agent_dir: str) -> dict[str, str]:
    home = os.path.expanduser("~")
    return {".pisces": os.path.join(agent_dir, "agents"), ".pi": os.path.join(home, ".pi", "agent", "agents"),
            ".claude": os.path.join(home, ".claude", "agents")}


def discover_agents(cwd: str, agent_dir: str, *, project_trusted: bool) -> Discovery:
    """Blocking (it reads files): call it from a worker thread on a running event loop."""
    project = _nearest_project_dirs(cwd)
    user = _user_dirs(agent_dir)
    ordered: list[tuple[str, str]] = []
    skipped: list[str] = []
    for family in _FAMILIES:
        if family in project:
            if project_trusted:
                ordered.append((project[family], "project"))
            else:
                skipped.append(project[family])
        if os.path.abspath(user[family]) != os.path.abspath(project.get(family, "")):
            ordered.append((user[family], "user"))
    seen: set[str] = set()
    agents: list[AgentDefinition] = []
    for directory, source in ordered:
        for agent in _load_dir(directory, source):
            if agent.name not in seen:
                seen.add(agent.name)
                agents.append(agent)
    for agent in bundled_agents():
        if agent.name not in seen:
            seen.add(agent.name)
            agents.append(agent)
    project_dir = next((project[f] for f in _FAMILIES if f in project), None) if project_trusted else None
    for directory in skipped:
        _warn_once(f"untrusted:{directory}", f"project agents in {directory} are ignored: the project is not "
                                            "trusted")
    return Discovery(agents=agents, project_agents_dir=project_dir, skipped_untrusted=skipped)


def is_project_trusted(cwd: str, agent_dir: str) -> bool:
    """Whether ``cwd``'s own agent definitions may be used (the project is trusted: pisces.core.config.trust)."""

    return bool(trusted(cwd, agent_dir))
