"""Deferred MCP tools: above a threshold of schema tokens, MCP tools stay out of the request behind one search tool.

When the MCP tools' names, descriptions and schemas together exceed ``threshold`` estimated tokens (4 characters
a token), the tools of every server without ``alwaysLoad`` are switched off and ``mcp_tool_search`` is switched on.
Its description lists the deferred tools by name with the first line of their description (cut at 80
characters); calling it with a query switches on the best matches (at most ``limit``) for the following requests
and returns their full descriptions and parameters. Stdlib only.
"""

from __future__ import annotations

import json
from typing import Any

from pisces.agent.types import AgentTool, AgentToolResult, ToolError
from pisces.ai.types import TextContent

NAME = "mcp_tool_search"
DEFAULT_THRESHOLD_TOKENS = 10_000
_MAX_LISTED = 400


def schema_tokens(tools: list[Any]) -> int:
    """Estimated tokens of what the tools put in a request (name, description, parameters)."""
    return sum(len(t.name) + len(t.description) + len(json.dumps(t.parameters)) for t in tools) // 4


def _short(tool: Any) -> str:
    first = (tool.description or "").strip().split("\n", 1)[0]
    return first if len(first) <= 80 else first[:77] + "..."


class ToolSearch(AgentTool):
    """The one tool the model sees in place of the deferred ones."""

    name = NAME
    label = "MCP tool search"
    approval_tier = "read"

    def __init__(self, deferred: list[Any], activate: Any, limit: int = 5) -> None:
        self.deferred = {t.name: t for t in deferred}
        self._activate = activate
        self.limit = limit
        listed = "\n".join(f"- {t.name}: {_short(t)}" for t in deferred[:_MAX_LISTED])
        more = f"\n(and {len(deferred) - _MAX_LISTED} more)" if len(deferred) > _MAX_LISTED else ""
        self.description = ("Load MCP tools before calling them. These tools exist but are not loaded; search by "
                            "words or give exact names (`select:name1,name2`), then call them in your next step:\n"
                            + listed + more)
        self.parameters = {"type": "object", "properties": {
            "query": {"type": "string", "description": "words to match, or select:<name>,<name>"}},
            "required": ["query"]}

    def match(self, query: str) -> list[Any]:
        query = query.strip()
        if query.startswith("select:"):
            names = [n.strip() for n in query[len("select:"):].split(",") if n.strip()]
            return [self.deferred[n] for n in names if n in self.deferred][: self.limit * 4]
        words = [w for w in query.lower().replace("_", " ").split() if w]
        scored = []
        for tool in self.deferred.values():
            hay_name = tool.name.lower().replace("_", " ")
            hay = f"{hay_name} {tool.description.lower()}"
            score = sum(3 if w in hay_name else 1 for w in words if w in hay)
            if score:
                scored.append((-score, tool.name, tool))
        return [t for _, _, t in sorted(scored)[: self.limit]]

    async def execute(self, tool_call_id: str, params: dict[str, Any], signal: Any, on_update: Any) -> Any:
        found = self.match(str(params.get("query", "")))
        if not found:
            raise ToolError(f"No deferred MCP tool matches {params.get('query')!r}; the list is in this tool's "
                            "description")
        self._activate([t.name for t in found])
        text = "\n\n".join(f"{t.name}: {t.description}\nparameters: {json.dumps(t.parameters)}" for t in found)
        return AgentToolResult(content=[TextContent(text="Loaded; call them in your next step.\n\n" + text)],
                               details={"loaded": [t.name for t in found]})
