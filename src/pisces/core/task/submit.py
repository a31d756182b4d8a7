"""``submit_result``: how a subagent hands its result back, and the JTD check of that result.

A subagent finishes by calling ``submit_result`` with ``{"result": {"data": ...}}`` or, when it cannot do the
work, ``{"result": {"error": "..."}}``. When the agent definition or the task call gives an output schema (JSON
Type Definition, RFC 8927), ``data`` is checked against it; the first mismatch is sent back as an error so the
subagent can correct it, a second one is accepted with a note (a stubborn model must not fail the task).
"""

from __future__ import annotations

import json
from typing import Any

from pisces.agent.types import AgentTool, AgentToolResult, ToolError
from pisces.ai.types import TextContent

# -- JTD -------------------------------------------------------------------------------------------
_INT_RANGES = {"int8": (-128, 127), "uint8": (0, 255), "int16": (-32768, 32767), "uint16": (0, 65535),
               "int32": (-2**31, 2**31 - 1), "uint32": (0, 2**32 - 1)}


def jtd_errors(schema: Any, value: Any, definitions: dict[str, Any] | None = None, path: str = "") -> list[str]:
    """Where ``value`` breaks ``schema``, as ``path: message`` lines (empty when it conforms)."""
    if not isinstance(schema, dict):
        return []
    if definitions is None:
        given = schema.get("definitions")
        definitions = given if isinstance(given, dict) else {}
    where = path or "/"
    if value is None and schema.get("nullable") is True:
        return []
    if "ref" in schema:
        return jtd_errors(definitions.get(schema["ref"], {}), value, definitions, path)
    if "type" in schema:
        kind = schema["type"]
        ok = True
        if kind == "boolean":
            ok = isinstance(value, bool)
        elif kind in ("string", "timestamp"):
            ok = isinstance(value, str)
        elif kind in ("float32", "float64", "number"):
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        elif kind in _INT_RANGES:
            lo, hi = _INT_RANGES[kind]
            ok = (isinstance(value, (int, float)) and not isinstance(value, bool) and float(value).is_integer()
                  and lo <= value <= hi)
        return [] if ok else [f"{where}: must be {kind}"]
    if "enum" in schema:
        return [] if value in schema["enum"] else [f"{where}: must be one of {json.dumps(schema['enum'])}"]
    if "elements" in schema:
        if not isinstance(value, list):
            return [f"{where}: must be an array"]
        out: list[str] = []
        for i, item in enumerate(value):
            out += jtd_errors(schema["elements"], item, definitions, f"{path}/{i}")
        return out
    if "values" in schema:
        if not isinstance(value, dict):
            return [f"{where}: must be an object"]
        out = []
        for key, item in value.items():
            out += jtd_errors(schema["values"], item, definitions, f"{path}/{key}")
        return out
    if "discriminator" in schema:
        if not isinstance(value, dict):
            return [f"{where}: must be an object"]
        tag = schema["discriminator"]
        mapping = schema.get("mapping", {})
        if value.get(tag) not in mapping:
            return [f"{where}/{tag}: must be one of {json.dumps(sorted(mapping))}"]
        rest = {k: v for k, v in value.items() if k != tag}
        return jtd_errors(mapping[value[tag]], rest, definitions, path)
    if "properties" in schema or "optionalProperties" in schema:
        if not isinstance(value, dict):
            return [f"{where}: must be an object"]
        required = schema.get("properties", {}) or {}
        optional = schema.get("optionalProperties", {}) or {}
        out = []
        for key, sub in required.items():
            if key not in value:
                out.append(f"{where}: missing property '{key}'")
            else:
                out += jtd_errors(sub, value[key], definitions, f"{path}/{key}")
        for key, sub in optional.items():
            if key in value:
                out += jtd_errors(sub, value[key], definitions, f"{path}/{key}")
        if schema.get("additionalProperties") is not True:
            extra = [k for k in value if k not in required and k not in optional]
            out += [f"{where}: unexpected property '{k}'" for k in extra]
        return out
    return []


def normalize_schema(schema: Any) -> Any:
    """An output schema given as JSON text is parsed; anything else is used as given (None: no schema)."""
    if isinstance(schema, str):
        try:
            return json.loads(schema)
        except ValueError:
            return None
    return schema if isinstance(schema, dict) and schema else None


# -- the tool -------------------------------------------------------------------------------------
class SubmitResultTool(AgentTool):
    name = "submit_result"
    label = "Submit Result"
    description = ("Finish the task with structured JSON output. Call exactly once at the end of the task.\n\n"
                   "If you cannot complete the task, call with an error message payload.")

    def __init__(self, output_schema: Any = None) -> None:
        self.output_schema = normalize_schema(output_schema)
        hint = ("Structured output matching this JTD schema:\n" + json.dumps(self.output_schema, indent=2)
                if self.output_schema is not None else "Structured JSON output (no schema specified)")
        self.parameters = {
            "type": "object",
            "required": ["result"],
            "properties": {"result": {
                "description": "Submit either `data` for success or `error` for failure",
                "anyOf": [
                    {"type": "object", "required": ["data"], "description": "Successfully completed the task",
                     "properties": {"data": {"description": hint}}},
                    {"type": "object", "required": ["error"],
                     "properties": {"error": {"type": "string",
                                              "description": "Error message when the task cannot be completed"}}},
                ]}},
        }
        self._failures = 0

    async def execute(self, tool_call_id: str, params: dict[str, Any], signal: Any, on_update: Any
                      ) -> AgentToolResult:
        result = params.get("result")
        if not isinstance(result, dict):
            raise ToolError("result must be an object containing either data or error")
        error = result.get("error") if isinstance(result.get("error"), str) else None
        has_data = "data" in result
        if error is not None and has_data:
            raise ToolError("result cannot contain both data and error")
        if error is None and not has_data:
            raise ToolError("result must contain either data or error")
        if error is not None:
            return AgentToolResult(content=[TextContent(text=f"Task aborted: {error}")],
                                   details={"data": None, "status": "aborted", "error": error})
        data = result["data"]
        if data is None:
            raise ToolError("data is required when submit_result indicates success")
        text = "Result submitted."
        if self.output_schema is not None:
            problems = jtd_errors(self.output_schema, data)
            if problems:
                self._failures += 1
                if self._failures <= 1:
                    raise ToolError("Output does not match schema: " + "; ".join(problems[:20]))
                text = f"Result submitted (schema validation overridden after {self._failures} failed attempt(s))."
        return AgentToolResult(content=[TextContent(text=text)], details={"data": data, "status": "success"})
