"""Skills: ``SKILL.md`` files the model reads on demand (pi's skills, the Agent Skills format).

Locations, in order (the first skill of a name wins):
- project: ``<cwd>/.pisces/skills/``, then ``.agents/skills/`` in ``cwd`` and its parents up to the git root;
- user: ``~/.pisces/agent/skills/``, then ``~/.agents/skills/``;
- settings ``skills`` (files or directories), ``--skill PATH`` and paths extensions add (``resources_discover``).
``--no-skills`` turns the first two off. In ``.pisces/skills`` and the agent dir's ``skills`` a ``*.md`` file
directly inside is a skill too; everywhere a directory holding ``SKILL.md`` is one (searched recursively).

A skill needs a ``description`` in its front matter; its name is ``name`` or the directory's name. The system
prompt lists the skills (unless ``disable-model-invocation: true``) as pi does; ``/skill:name args`` in a
prompt is replaced by the skill's text; ``get_commands`` lists them as ``skill:<name>``.
"""

from __future__ import annotations

import os
from typing import Any

from pisces.core.config.paths import agent_dir as default_agent_dir
from pisces.core.config.paths import dirs_to_root
from pisces.core.resources.templates import slash_command
from pisces.core.safe_open import TEXT_MAX_BYTES, read_text


class Skill:
    __slots__ = ("name", "description", "file_path", "base_dir", "scope", "hidden")

    def __init__(self, name: str, description: str, file_path: str, scope: str, hidden: bool) -> None:
        self.name, self.description, self.file_path = name, description, file_path
        self.base_dir = os.path.dirname(file_path)
        self.scope, self.hidden = scope, hidden


def parse_frontmatter(text: str) -> tuple[dict[str, Any], str]:
    """A ``---`` YAML-like header of ``key: value`` lines (quotes stripped, true/false read as booleans)."""
    if not text.startswith("---"):
        return {}, text
    end = text.find("\n---", 3)
    if end < 0:
        return {}, text
    meta: dict[str, Any] = {}
    key = None
    for line in text[3:end].splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if line[:1].isspace() and key is not None and isinstance(meta.get(key), str):
            meta[key] = (meta[key] + " " + line.strip()).strip()  # a folded continuation line
            continue
        if ":" not in line:
            continue
        key, _, value = line.partition(":")
        key, value = key.strip(), value.strip()
        if value in (">", "|", ">-", "|-"):
            value = ""
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        meta[key] = {"true": True, "false": False}.get(value.lower(), value) if value else value
    body = text[end + 4:]
    return meta, body[1:] if body.startswith("\n") else body


def _load_file(path: str, scope: str) -> Skill | None:
    try:
        meta, _ = parse_frontmatter(read_text(path, TEXT_MAX_BYTES, errors="replace"))  # a FIFO, /dev/zero: refused
    except OSError:
        return None
    description = meta.get("description")
    if not isinstance(description, str) or not description.strip():
        return None  # pi: a skill without a description is not loaded
    parent = os.path.basename(os.path.dirname(path))
    name = meta.get("name") if isinstance(meta.get("name"), str) and meta.get("name") else parent
    return Skill(str(name), description.strip(), path, scope, meta.get("disable-model-invocation") is True)


def _scan(directory: str, scope: str, root_files: bool, out: list[Skill], depth: int = 0) -> None:
    try:
        entries = sorted(os.scandir(directory), key=lambda e: e.name)
    except OSError:
        return
    skill_md = os.path.join(directory, "SKILL.md")
    if os.path.isfile(skill_md):
        skill = _load_file(skill_md, scope)
        if skill:
            out.append(skill)
        return
    for entry in entries:
        if entry.name.startswith(".") or entry.name == "node_modules":
            continue
        if entry.is_dir() and depth < 8:
            _scan(entry.path, scope, False, out, depth + 1)
        elif root_files and entry.name.endswith(".md") and entry.is_file():
            skill = _load_file(entry.path, scope)
            if skill:
                out.append(skill)


def _ancestor_dirs(cwd: str) -> list[str]:
    """``.agents/skills`` of ``cwd`` and of each parent up to the project root (the git root, else ``cwd``)."""
    return [os.path.join(d, ".agents", "skills") for d in dirs_to_root(cwd)]


def load_skills(cwd: str, *, agent_dir: str | None = None, defaults: bool = True,
                paths: list[str] | tuple[str, ...] = ()) -> list[Skill]:
    adir = agent_dir if agent_dir is not None else default_agent_dir()
    found: list[Skill] = []
    if defaults:
        user_agents = os.path.join(os.path.expanduser("~"), ".agents", "skills")
        _scan(os.path.join(cwd, ".pisces", "skills"), "project", True, found)
        for d in _ancestor_dirs(cwd):
            if os.path.abspath(d) != os.path.abspath(user_agents):
                _scan(d, "project", False, found)
        _scan(os.path.join(adir, "skills"), "user", True, found)
        _scan(user_agents, "user", False, found)
    for path in paths:
        path = os.path.abspath(os.path.expanduser(path))
        if os.path.isfile(path):
            skill = _load_file(path, "temporary")
            if skill:
                found.append(skill)
        else:
            _scan(path, "temporary", True, found)
    unique: dict[str, Skill] = {}
    seen_paths: set[str] = set()
    for skill in found:
        real = os.path.realpath(skill.file_path)
        if real in seen_paths or skill.name in unique:
            continue
        seen_paths.add(real)
        unique[skill.name] = skill
    return list(unique.values())


def session_skills(session: Any) -> list[Skill]:
    res = session.resources
    settings_paths = session.settings.get("skills")
    paths = [os.path.join(session.cwd, os.path.expanduser(p)) for p in settings_paths if isinstance(p, str)] \
        if isinstance(settings_paths, list) else []
    return load_skills(session.cwd, defaults=res.get("skills", True), paths=[*paths, *res.get("skillPaths", [])])


def _xml(text: str) -> str:
    return (text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")
            .replace("'", "&apos;"))


def format_skills_for_prompt(skills: list[Skill]) -> str:
    """pi's ``<available_skills>`` section (empty when no skill is visible to the model)."""
    visible = [s for s in skills if not s.hidden]
    if not visible:
        return ""
    lines = ["\n\nThe following skills provide specialized instructions for specific tasks.",
             "Use the read tool to load a skill's file when the task matches its description.",
             "When a skill file references a relative path, resolve it against the skill directory (parent of "
             "SKILL.md / dirname of the path) and use that absolute path in tool commands.", "", "<available_skills>"]
    for s in visible:
        lines += ["  <skill>", f"    <name>{_xml(s.name)}</name>",
                  f"    <description>{_xml(s.description)}</description>",
                  f"    <location>{_xml(s.file_path)}</location>", "  </skill>"]
    lines.append("</available_skills>")
    return "\n".join(lines)


def skill_commands(session: Any) -> list[dict[str, Any]]:
    if not session.settings.enable_skill_commands:
        return []

    return [slash_command(f"skill:{s.name}", "skill", s.description,
                          {"path": s.file_path, "source": "local", "scope": s.scope, "origin": "top-level",
                           "baseDir": s.base_dir})
            for s in session_skills(session)]


def expand_skill_command(session: Any, text: str) -> str:
    """``/skill:name args`` -> the skill's text in a ``<skill>`` block, the arguments after it (pi's form).
    An unknown skill leaves the text as it is; an unreadable file is reported and leaves it too."""
    head, _, args = text.partition(" ")
    name = head[len("/skill:"):]
    skill = next((s for s in session_skills(session) if s.name == name), None)
    if skill is None:
        return text
    try:
        _, body = parse_frontmatter(read_text(skill.file_path, TEXT_MAX_BYTES, errors="replace"))
    except OSError as exc:
        session.emit({"type": "extension_error", "extensionPath": skill.file_path, "hookPath": skill.file_path,
                      "event": "skill_expansion", "error": str(exc)})
        return text
    block = (f'<skill name="{skill.name}" location="{skill.file_path}">\nReferences are relative to '
             f"{skill.base_dir}.\n\n{body.strip()}\n</skill>")
    args = args.strip()
    return f"{block}\n\n{args}" if args else block
