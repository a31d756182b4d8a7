"""Host tools: tools the client (the host) runs, declared with ``set_host_tools``.

When the model calls one, the server writes ``host_tool_call{id, toolCallId, toolName, arguments}`` and waits
for ``host_tool_update{id, partialResult}`` frames (progress) and one ``host_tool_result{id, result,
isError?}``. The wait ends without an answer when the call is aborted (the server then writes
``host_tool_cancel{id, targetId}``), when the tool's time runs out (``timeoutMs`` of the definition, else the
setting ``hostTools.timeoutMs``, else ten minutes; also followed by ``host_tool_cancel``) or when stdin ends.
Each of those ends the call with an error result the model can read.
"""

from __future__ import annotations

from typing import Any, Callable

from pisces.agent.types import AgentTool, AgentToolResult, ToolError
from pisces.ai.types import TextContent
from pisces.core.extensions.tools import to_result
from pisces.core.tools.groups import replace_tool_group
from pisces.modes.host.ui_requests import PendingRequests, answered, new_id

DEFAULT_TIMEOUT_MS = 600_000
GROUP = "host"


def _content(raw: Any) -> AgentToolResult:
    return to_result(raw)  # both callers hand it a dict


def normalize(tools: Any) -> list[dict[str, Any]]:
    """The definitions of ``set_host_tools``, checked; a bad one raises with a sentence saying which and why."""
    if not isinstance(tools, list):
        raise ValueError("set_host_tools needs 'tools': an array of tool definitions")
    out = []
    for i, tool in enumerate(tools):
        if not isinstance(tool, dict):
            raise ValueError(f"Host tool at index {i} must be an object")
        name = tool["name"].strip() if isinstance(tool.get("name"), str) else ""
        if not name:
            raise ValueError(f"Host tool at index {i} must provide a non-empty name")
        description = tool["description"].strip() if isinstance(tool.get("description"), str) else ""
        if not description:
            raise ValueError(f'Host tool "{name}" must provide a non-empty description')
        params = tool.get("parameters")
        if not isinstance(params, dict):
            raise ValueError(f'Host tool "{name}" must provide a JSON Schema object')
        label = tool["label"].strip() if isinstance(tool.get("label"), str) and tool["label"].strip() else name
        timeout = tool.get("timeoutMs")
        tier = tool.get("tier", "exec")
        if tier not in ("read", "write", "exec"):
            raise ValueError(f'Host tool "{name}": tier must be "read", "write" or "exec"')
        out.append({"name": name, "label": label, "description": description, "parameters": params,
                    "hidden": tool.get("hidden") is True,
                    "timeoutMs": int(timeout) if isinstance(timeout, (int, float)) and timeout > 0 else None,
                    "tier": tier})
    return out


class HostTool(AgentTool):
    def __init__(self, definition: dict[str, Any], bridge: "HostToolBridge") -> None:
        self.name = definition["name"]
        self.label = definition["label"]
        self.description = definition["description"]
        self.parameters = definition["parameters"]
        self.hidden = definition["hidden"]
        self.timeout_ms = definition["timeoutMs"]
        self.approval_tier = definition["tier"]  # what the approval policy sees (docs/approval.md)
        self._bridge = bridge

    async def execute(self, tool_call_id: str, params: dict[str, Any], signal: Any, on_update: Any) -> Any:
        return await self._bridge.call(self, tool_call_id, params, signal, on_update)


class HostToolBridge:
    def __init__(self, send: Callable[[dict[str, Any]], None], pending: PendingRequests,
                 default_timeout_ms: int = DEFAULT_TIMEOUT_MS) -> None:
        self.send = send
        self.pending = pending
        self.default_timeout_ms = default_timeout_ms

    def set_tools(self, session: Any, tools: Any) -> list[str]:
        defs = normalize(tools)
        made = [HostTool(d, self) for d in defs]
        return replace_tool_group(session, GROUP, made, hidden={t.name for t in made if t.hidden}, exclusive=True)

    async def call(self, tool: HostTool, tool_call_id: str, params: dict[str, Any], signal: Any, on_update: Any
                   ) -> AgentToolResult:
        request_id = new_id()
        frame = {"type": "host_tool_call", "id": request_id, "toolCallId": tool_call_id, "toolName": tool.name,
                 "arguments": params}

        def update(f: dict[str, Any]) -> None:
            if isinstance(f.get("partialResult"), dict):
                on_update(_content(f["partialResult"]))

        limit = tool.timeout_ms or self.default_timeout_ms
        try:
            outcome = await self.pending.wait(request_id, send=lambda: self.send(frame), timeout_ms=limit,
                                              signal=signal, on_update=update)
        except BaseException:
            self.send({"type": "host_tool_cancel", "id": new_id(), "targetId": request_id})
            raise
        if not answered(outcome):
            if not outcome.get("closed"):
                self.send({"type": "host_tool_cancel", "id": new_id(), "targetId": request_id})
            if outcome.get("timedOut"):
                raise ToolError(f'Host tool "{tool.name}" did not answer within {limit / 1000:g} s')
            if outcome.get("closed"):
                raise ToolError("RPC client disconnected before host tool execution completed")
            raise ToolError(f'Host tool "{tool.name}" was aborted')
        result = outcome.get("result")
        if not isinstance(result, dict) or not isinstance(result.get("content"), list):
            raise ToolError(f'Host tool "{tool.name}" answered without a result ({{"content": [...]}})')
        converted = _content(result)
        if outcome.get("isError") is True:
            text = "\n".join(b.text for b in converted.content if isinstance(b, TextContent)).strip()
            raise ToolError(text or "Host tool execution failed", converted.details)
        return converted
