"""Prompt templates: ``prompts/*.md`` in the agent dir and in ``.pisces/prompts`` of the project.

``/name args`` at the start of a prompt is replaced by the template, with ``$1``..``$9`` and ``$@``
(all arguments) substituted. ``get_commands`` lists the templates.
"""

from __future__ import annotations

import os
import re
import shlex
import sys
from typing import Any

from pisces.core.config.paths import agent_dir, project_config_dir
from pisces.core.safe_open import TEXT_MAX_BYTES, read_text


def _template_dirs(cwd: str) -> list[tuple[str, str]]:
    return [(os.path.join(agent_dir(), "prompts"), "user"),
            (os.path.join(project_config_dir(cwd), "prompts"), "project")]


def _split_frontmatter(text: str) -> tuple[dict[str, str], str]:
    if not text.startswith("---\n"):
        return {}, text
    end = text.find("\n---", 4)
    if end < 0:
        return {}, text
    meta = {}
    for line in text[4:end].splitlines():
        if ":" in line:
            k, v = line.split(":", 1)
            meta[k.strip()] = v.strip().strip("'\"")
    body = text[end + 4:]
    return meta, body[1:] if body.startswith("\n") else body


def _sources(cwd: str, resources: dict[str, Any] | None) -> list[tuple[str, str, list[str]]]:
    """(directory, scope, file names) to read: the default directories (unless ``--no-prompt-templates``), then
    the paths of ``--prompt-template`` and extensions (a file or a directory of ``*.md`` files)."""
    out = []
    dirs = _template_dirs(cwd) if not resources or resources.get("promptTemplates", True) else []
    extra = [(p, "temporary") for p in (resources or {}).get("promptPaths", [])]
    for path, scope in [*dirs, *extra]:
        path = os.path.expanduser(path)
        if os.path.isfile(path):
            out.append((os.path.dirname(path), scope, [os.path.basename(path)]))
            continue
        try:
            out.append((path, scope, sorted(os.listdir(path))))
        except OSError:
            continue
    return out


def load_templates(cwd: str, resources: dict[str, Any] | None = None) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for directory, scope, names in _sources(cwd, resources):
        for fname in names:
            if not fname.endswith(".md"):
                continue
            path = os.path.join(directory, fname)
            try:
                meta, body = _split_frontmatter(read_text(path, TEXT_MAX_BYTES))  # a FIFO or /dev/zero: refused
            except (OSError, ValueError) as exc:
                print(f"Warning: skipping prompt template {path}: {exc}", file=sys.stderr, flush=True)
                continue
            first = next((ln.strip() for ln in body.splitlines() if ln.strip()), "")
            found[fname[:-3]] = {"path": path, "scope": scope, "body": body,
                                 "description": meta.get("description") or first[:80]}
    return found


def slash_command(name: str, source: str, description: str | None, source_info: dict[str, Any]) -> dict[str, Any]:
    """One ``get_commands`` item: pi 0.73.1's ``{name, description?, source, sourceInfo}`` with seed 002's
    ``location`` ("user" | "project" | "path") and ``path`` beside it. ``source`` is "prompt", "skill" or
    "extension"; ``source_info`` holds at least ``path`` and ``scope``."""
    cmd: dict[str, Any] = {"name": name}
    if description:
        cmd["description"] = description
    cmd["source"] = source
    cmd["sourceInfo"] = source_info
    cmd["location"] = source_info["scope"] if source_info["scope"] in ("user", "project") else "path"
    cmd["path"] = source_info["path"]
    return cmd


def list_prompt_commands(cwd: str, resources: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    return [slash_command(name, "prompt", t["description"],
                          {"path": t["path"], "source": "cli" if t["scope"] == "temporary" else "local",
                           "scope": t["scope"], "origin": "top-level"})
            for name, t in load_templates(cwd, resources).items()]


_ARG = re.compile(r"\$(@|\d)")


def expand_prompt_template(cwd: str, text: str, resources: dict[str, Any] | None = None) -> str:
    if not text.startswith("/"):
        return text
    head, _, rest = text[1:].partition(" ")
    templates = load_templates(cwd, resources) if head else {}
    template = templates.get(head)
    if template is None:
        return text
    try:
        args = shlex.split(rest)
    except ValueError:
        args = rest.split()

    def sub(m: re.Match) -> str:
        key = m.group(1)
        if key == "@":
            return " ".join(args)
        i = int(key) - 1
        return args[i] if 0 <= i < len(args) else ""

    return _ARG.sub(sub, template["body"])
