"""MCP prompts as commands and MCP resources addressed from a prompt. Stdlib only (the SDK objects are read by
attribute).

- ``get_commands`` lists every prompt of a connected server as ``mcp:<server>:<prompt>`` (source ``prompt``,
  ``sourceInfo.source`` ``mcp``, and the prompt's ``arguments``).
- ``/mcp:<server>:<prompt> args`` at the start of a prompt is replaced by the prompt the server renders: the
  arguments are split like a prompt template's (quotes group words), given to the prompt's arguments in their
  declared order (the last one takes the rest), or by name as ``name=value``; a missing required argument is a
  clear error naming it. The rendered messages become the user's text (a message of another role is labelled
  with it), images go with the prompt; the whole is capped at :data:`MAX_PROMPT_BYTES`.
- ``@mcp:<server>:<uri>`` anywhere in a prompt attaches the resource: the reference stays, and the resource's
  text follows the prompt in ``<mcp-resource server=.. uri=..>`` blocks, each capped at
  :data:`MAX_RESOURCE_BYTES`, at most :data:`MAX_RESOURCES` of them. A name that is no configured server is
  left as written; a resource that cannot be read is an error that names it (the prompt is not sent).
"""

from __future__ import annotations

import re
import shlex
from typing import Any

from pisces.ai.types import ImageContent, TextContent
from pisces.core.errors import SessionError
from pisces.core.mcp.tools import result_content

MAX_PROMPT_BYTES = 256 << 10
MAX_RESOURCE_BYTES = 50 << 10
MAX_RESOURCES = 10
_COMMAND = re.compile(r"^/mcp:([A-Za-z0-9_.-]{1,64}):(\S+)(?:[ \t]+(.*))?$", re.DOTALL)
_REF = re.compile(r"(?<![\w@])@mcp:([A-Za-z0-9_.-]{1,64}):(\S+)")
_TRAILING = ".,;:!?)]}'\"`>"


def _get(obj: Any, key: str) -> Any:
    return obj.get(key) if isinstance(obj, dict) else getattr(obj, key, None)


def commands(servers: dict[str, Any]) -> list[dict[str, Any]]:
    """The ``get_commands`` items of the servers' prompts."""
    from pisces.core.resources.templates import slash_command  # noqa: PLC0415 - only with MCP prompts

    out = []
    for name, server in servers.items():
        if server.session is None:
            continue
        scope = server.cfg.scope if server.cfg.scope in ("user", "project") else "temporary"
        for prompt in server.prompts:
            pname = str(_get(prompt, "name"))
            cmd = slash_command(f"mcp:{name}:{pname}", "prompt",
                                str(_get(prompt, "description") or f"MCP prompt {pname} of {name}")[:200],
                                {"path": f"mcp:{name}", "source": "mcp", "scope": scope, "origin": "top-level"})
            cmd["arguments"] = [{"name": str(_get(a, "name")), "description": _get(a, "description") or "",
                                 "required": bool(_get(a, "required"))} for a in (_get(prompt, "arguments") or [])]
            out.append(cmd)
    return out


def bind_arguments(declared: list[Any], rest: str, usage: str) -> dict[str, str]:
    """``rest`` (the text after the command) as the prompt's arguments; raises SessionError when a required one
    is missing."""
    names = [str(_get(a, "name")) for a in declared]
    try:
        words = shlex.split(rest)
    except ValueError:
        words = rest.split()
    out: dict[str, str] = {}
    positional = []
    for word in words:
        key, eq, value = word.partition("=")
        if eq and key in names and key not in out:
            out[key] = value
        else:
            positional.append(word)
    free = [n for n in names if n not in out]
    for i, word in enumerate(positional):
        if not free:
            break
        if i == len(free) - 1:
            out[free[i]] = " ".join(positional[i:])
            break
        out[free[i]] = word
    missing = [str(_get(a, "name")) for a in declared if _get(a, "required") and str(_get(a, "name")) not in out]
    if missing:
        raise SessionError(f"{usage} needs {', '.join(missing)}: {usage} "
                           + " ".join(f"<{n}>" for n in names) + " (or name=value)")
    return out


async def render(manager: Any, text: str) -> tuple[str, list[Any]] | None:
    """The rendered prompt for ``/mcp:<server>:<prompt> args``, or None when ``text`` is not such a command."""
    match = _COMMAND.match(text)
    if match is None:
        return None
    sname, pname, rest = match.group(1), match.group(2), match.group(3) or ""
    usage = f"/mcp:{sname}:{pname}"
    server = manager.servers.get(sname)
    if server is None:
        raise SessionError(f"{usage}: no MCP server named {sname!r} (mcp_status lists them)")
    try:
        session = await server.wait_ready()
    except Exception as exc:  # noqa: BLE001 - a ToolError: said to the person instead
        raise SessionError(f"{usage}: {exc}") from None
    prompt = next((p for p in server.prompts if str(_get(p, "name")) == pname), None)
    if prompt is None:
        known = ", ".join(f"mcp:{sname}:{_get(p, 'name')}" for p in server.prompts) or "none"
        raise SessionError(f"{usage}: the server has no prompt {pname!r} (its prompts: {known})")
    args = bind_arguments(list(_get(prompt, "arguments") or []), rest, usage)
    try:
        result = await session.get_prompt(pname, arguments=args or None)
    except Exception as exc:  # noqa: BLE001 - the server's error, for the person
        raise SessionError(f"{usage}: MCP error from {sname}: {exc}") from None
    messages = list(_get(result, "messages") or [])
    labelled = any(str(_get(m, "role")) != "user" for m in messages)
    parts: list[str] = []
    images: list[Any] = []
    for message in messages:
        content, _ = result_content([_get(message, "content")], max_bytes=MAX_PROMPT_BYTES)
        body = "\n".join(c.text for c in content if isinstance(c, TextContent))
        images.extend(c for c in content if isinstance(c, ImageContent))
        parts.append(f"[{_get(message, 'role')}]\n{body}" if labelled else body)
    rendered, _ = result_content([{"type": "text", "text": "\n\n".join(parts)}], max_bytes=MAX_PROMPT_BYTES)
    return (getattr(rendered[0], "text", "") if rendered else ""), images


def references(text: str, servers: dict[str, Any]) -> list[tuple[str, str]]:
    """``(server, uri)`` of each ``@mcp:<server>:<uri>`` naming a configured server, in order, once each."""
    seen: list[tuple[str, str]] = []
    for match in _REF.finditer(text):
        ref = (match.group(1), match.group(2).rstrip(_TRAILING))
        if ref[0] in servers and ref[1] and ref not in seen:
            seen.append(ref)
    return seen


async def attach_resources(manager: Any, text: str) -> str:
    refs = references(text, manager.servers)
    if not refs:
        return text
    if len(refs) > MAX_RESOURCES:
        raise SessionError(f"at most {MAX_RESOURCES} MCP resources can be attached to one prompt ({len(refs)} named)")
    blocks = []
    for sname, uri in refs:
        server = manager.servers[sname]
        try:
            session = await server.wait_ready()
            result = await session.read_resource(uri)
        except Exception as exc:  # noqa: BLE001 - the person is told which reference failed
            raise SessionError(f"@mcp:{sname}:{uri} could not be read: {exc}") from None
        pieces = []
        for item in _get(result, "contents") or []:
            body = _get(item, "text")
            if body is None:
                blob = _get(item, "blob") or ""
                body = f"[binary resource: {_get(item, 'mime_type') or '?'}, {len(blob) * 3 // 4} bytes]"
            pieces.append({"type": "text", "text": str(body)})
        content, _ = result_content(pieces, max_bytes=MAX_RESOURCE_BYTES)
        body = "\n".join(getattr(c, "text", "") for c in content)
        blocks.append(f'<mcp-resource server="{sname}" uri="{uri}">\n{body}\n</mcp-resource>')
    return text + "\n\n" + "\n\n".join(blocks)


async def expand_input(manager: Any, text: str) -> tuple[str, list[Any]]:
    """The prompt with an MCP prompt command rendered and ``@mcp:`` resources attached."""
    images: list[Any] = []
    rendered = await render(manager, text)
    if rendered is not None:
        text, images = rendered
    return await attach_resources(manager, text), images
