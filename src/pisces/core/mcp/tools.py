"""An MCP server's tools as agent tools: names, schemas any provider accepts, bounded results. Stdlib only.

Names are ``mcp__<server>__<tool>`` (Claude Code's convention) with characters outside ``[A-Za-z0-9_-]`` made
``_`` and at most 64 characters (the strictest provider limit); a longer one keeps its start and gains a short
hash so two long names stay apart. Schemas are rewritten to the subset every provider takes (Gemini rejects
``$ref``, ``additionalProperties``, ``$schema`` and more): local ``$ref`` inlined (bounded depth), the rest
dropped. Results are text capped like the built-in tools' output (``pisces.core.tools.truncate``).
"""

from __future__ import annotations

import hashlib
import re
from typing import Any, Callable

from pisces.agent.types import AgentTool, AgentToolResult, ToolError
from pisces.ai.types import ImageContent, TextContent
from pisces.core.tools.truncate import DEFAULT_MAX_BYTES, truncate_head

MAX_NAME = 64
_BAD = re.compile(r"[^A-Za-z0-9_-]")
_DROP = {"$schema", "$id", "$defs", "definitions", "additionalProperties", "patternProperties", "$comment",
         "unevaluatedProperties", "dependentSchemas", "dependentRequired", "propertyNames", "if", "then", "else",
         "examples", "readOnly", "writeOnly", "contentMediaType", "contentEncoding", "$anchor"}
_MAX_DEPTH = 12
_MAX_IMAGE_BYTES = 5 << 20


def tool_name(server: str, tool: str) -> str:
    name = f"mcp__{_BAD.sub('_', server)}__{_BAD.sub('_', tool)}"
    if len(name) <= MAX_NAME:
        return name
    digest = hashlib.sha1(f"{server}\0{tool}".encode()).hexdigest()[:8]
    return f"{name[:MAX_NAME - 9]}_{digest}"


def sanitize_schema(schema: Any) -> dict[str, Any]:
    """A JSON schema every provider accepts: local ``$ref`` inlined, keywords some reject removed, a
    ``type: [x, "null"]`` union reduced to ``x``, the top level always an object."""
    root = schema if isinstance(schema, dict) else {}
    defs: dict[str, Any] = {}
    for key in ("$defs", "definitions"):
        if isinstance(root.get(key), dict):
            defs.update({f"#/{key}/{k}": v for k, v in root[key].items()})

    def walk(node: Any, depth: int) -> Any:
        if isinstance(node, list):
            return [walk(n, depth) for n in node]
        if not isinstance(node, dict):
            return node
        if depth > _MAX_DEPTH:
            return {}
        if isinstance(node.get("$ref"), str):
            target = defs.get(node["$ref"])
            rest = {k: v for k, v in node.items() if k != "$ref"}
            return walk({**(target if isinstance(target, dict) else {}), **rest}, depth + 1)
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key in _DROP:
                continue
            if key == "const":
                out["enum"] = [value]
            elif key == "type" and isinstance(value, list):
                kinds = [v for v in value if v != "null"]
                out["type"] = kinds[0] if len(kinds) == 1 else (kinds or ["string"])[0]
            elif key == "properties" and isinstance(value, dict):
                out[key] = {k: walk(v, depth + 1) for k, v in value.items()}
            else:
                out[key] = walk(value, depth + 1)
        return out

    clean = walk(root, 0)
    if clean.get("type") != "object":
        clean = {"type": "object", "properties": clean.get("properties", {})}
    clean.setdefault("properties", {})
    if isinstance(clean.get("required"), list):
        clean["required"] = [r for r in clean["required"] if r in clean["properties"]]
    return clean


def result_content(blocks: list[Any], structured: Any = None,
                   max_bytes: int = DEFAULT_MAX_BYTES) -> tuple[list[Any], bool]:
    """MCP content blocks (SDK objects or dicts) as the agent's content, text capped at ``max_bytes``;
    returns ``(content, truncated)``."""
    texts: list[str] = []
    images: list[ImageContent] = []
    for block in blocks:
        get = block.get if isinstance(block, dict) else (lambda k, b=block: getattr(b, k, None))
        kind = get("type")
        if kind == "text":
            texts.append(str(get("text") or ""))
        elif kind == "image" and len(str(get("data") or "")) <= _MAX_IMAGE_BYTES:
            images.append(ImageContent(data=str(get("data")), mimeType=str(get("mimeType") or get("mime_type"))))
        elif kind == "resource":
            res = get("resource")
            rget = res.get if isinstance(res, dict) else (lambda k, r=res: getattr(r, k, None))
            texts.append(str(rget("text")) if rget("text") is not None else f"[resource {rget('uri')}]")
        elif kind == "resource_link":
            texts.append(f"[resource {get('uri')}] {get('name') or ''}".rstrip())
        else:
            texts.append(f"[{kind} content]")
    if not texts and structured is not None:
        import json  # noqa: PLC0415 - rare

        texts.append(json.dumps(structured, ensure_ascii=False)[: max_bytes * 2])
    text = "\n".join(texts)
    truncated = False
    if len(text.encode("utf-8", "replace")) > max_bytes:
        cut = truncate_head(text, max_bytes=max_bytes)
        kept = cut.content or text.encode("utf-8", "replace")[:max_bytes].decode("utf-8", "ignore")
        text = kept + f"\n\n[MCP result truncated: {len(text)} characters, {len(kept)} shown]"
        truncated = True
    content: list[Any] = [TextContent(text=text)] if text or not images else []
    return content + images, truncated


class McpTool(AgentTool):
    """One tool of one server. ``call(tool, args, signal)`` is the connection's; it waits for the server
    (bounded) and raises ToolError with the server's message on an error result."""

    def __init__(self, server: str, tool: Any, call: Callable[..., Any], tier: str) -> None:
        get = tool.get if isinstance(tool, dict) else (lambda k: getattr(tool, k, None))
        self.server = server
        self.mcp_name = str(get("name"))
        self.name = tool_name(server, self.mcp_name)
        self.label = f"{server}: {get('title') or self.mcp_name}"
        self.description = str(get("description") or "")[:4096] or f"The {self.mcp_name} tool of MCP server {server}"
        schema = get("inputSchema") if isinstance(tool, dict) else getattr(tool, "input_schema", None)
        self.parameters = sanitize_schema(schema)
        self.approval_tier = tier
        self._call = call

    async def execute(self, tool_call_id: str, params: dict[str, Any], signal: Any, on_update: Any) -> Any:
        blocks, structured, is_error = await self._call(self.mcp_name, params, signal)
        content, truncated = result_content(blocks, structured)
        if is_error:
            text = " ".join(getattr(c, "text", "") for c in content) or "the tool reported an error"
            raise ToolError(f"MCP error: {text}")
        return AgentToolResult(content=content, details={"server": self.server, "tool": self.mcp_name,
                                                         "truncated": truncated})
