"""``mcp_read_resource``: the model reads a resource of a connected MCP server. Stdlib only.

Present while at least one connected server lists resources; its description names them (at most 100, with the
server, the URI and the name), and a result is text capped like any tool output (a binary resource is reported by
size and type, not inlined).
"""

from __future__ import annotations

from typing import Any

from pisces.agent.types import AgentTool, AgentToolResult, ToolError
from pisces.core.mcp.tools import result_content

NAME = "mcp_read_resource"
_MAX_LISTED = 100


class ReadResource(AgentTool):
    name = NAME
    label = "Read MCP resource"
    approval_tier = "read"

    def __init__(self, servers: dict[str, Any]) -> None:
        self.servers = servers
        listed = [f"- {name} {getattr(r, 'uri', '')}: {getattr(r, 'name', '') or ''}"
                  for name, server in servers.items() for r in server.resources]
        more = f"\n(and {len(listed) - _MAX_LISTED} more)" if len(listed) > _MAX_LISTED else ""
        self.description = ("Read a resource of a connected MCP server by its URI. Available:\n"
                            + "\n".join(listed[:_MAX_LISTED]) + more)
        self.parameters = {"type": "object", "properties": {
            "server": {"type": "string", "description": "the MCP server's name"},
            "uri": {"type": "string", "description": "the resource's URI"}}, "required": ["server", "uri"]}

    async def execute(self, tool_call_id: str, params: dict[str, Any], signal: Any, on_update: Any) -> Any:
        server = self.servers.get(str(params.get("server")))
        if server is None:
            raise ToolError(f"No MCP server named {params.get('server')!r}: one of {', '.join(self.servers)}")
        session = await server.wait_ready()
        try:
            result = await session.read_resource(str(params.get("uri", "")))
        except Exception as exc:  # noqa: BLE001 - the server's error, for the model
            raise ToolError(f"MCP error from {server.cfg.name}: {exc}") from None
        blocks = []
        for item in getattr(result, "contents", None) or []:
            text = getattr(item, "text", None)
            if text is None:
                blob = getattr(item, "blob", "") or ""
                text = f"[binary resource {getattr(item, 'uri', '')}: {getattr(item, 'mime_type', None) or '?'}, " \
                       f"{len(blob) * 3 // 4} bytes]"
            blocks.append({"type": "text", "text": text})
        content, truncated = result_content(blocks)
        return AgentToolResult(content=content, details={"server": server.cfg.name, "uri": params.get("uri"),
                                                         "truncated": truncated})
