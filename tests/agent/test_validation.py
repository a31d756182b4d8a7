"""Tool-argument validation: pi's error text, coercions, and the loop's use of it."""

from __future__ import annotations

import json

import pytest

from pisces.agent.agent import Agent
from pisces.agent.types import AgentTool, AgentToolResult, ToolExecutionEndEvent
from pisces.agent.validation import validate_tool_arguments
from pisces.ai.models import FAUX_MODELS
from pisces.ai.types import TextContent, UserMessage

READ_SCHEMA = {
    "type": "object",
    "properties": {"path": {"type": "string"}, "offset": {"type": "number"}, "limit": {"type": "number"}},
    "required": ["path"],
}


def errors_of(text: str) -> list[str]:
    """The ``  - ...`` lines of a validation message."""
    head, _, _ = text.partition("\n\nReceived arguments:\n")
    return [ln[4:] for ln in head.splitlines()[1:]]


def test_pi_exact_text_for_a_missing_required_property():
    args, err = validate_tool_arguments("read", READ_SCHEMA, {"nopath": 1})
    assert err == ('Validation failed for tool "read":\n  - path: must have required properties path\n\n'
                   'Received arguments:\n{\n  "nopath": 1\n}')
    assert args == {"nopath": 1}


def test_valid_arguments_pass_unchanged():
    given = {"path": "a.py", "offset": 3}
    args, err = validate_tool_arguments("read", READ_SCHEMA, given)
    assert err is None
    assert args == {"path": "a.py", "offset": 3}


def test_coercion_works_on_a_copy():
    given = {"path": 12, "offset": "5", "limit": "2.5"}
    args, err = validate_tool_arguments("read", READ_SCHEMA, given)
    assert err is None
    assert args == {"path": "12", "offset": 5, "limit": 2.5}
    assert given == {"path": 12, "offset": "5", "limit": "2.5"}  # the message's arguments are untouched


@pytest.mark.parametrize("prop_schema,value,expected", [
    ({"type": "integer"}, "7", 7),
    ({"type": "integer"}, 4.0, 4.0),
    ({"type": "boolean"}, "true", True),
    ({"type": "boolean"}, "false", False),
    ({"type": "number"}, "-1.5", -1.5),
    ({"type": "string"}, 3.5, "3.5"),
])
def test_simple_coercions(prop_schema, value, expected):
    schema = {"type": "object", "properties": {"v": prop_schema}}
    args, err = validate_tool_arguments("t", schema, {"v": value})
    assert err is None
    assert args["v"] == expected and type(args["v"]) is type(expected)


@pytest.mark.parametrize("prop_schema,value,line", [
    ({"type": "string"}, True, "v: must be string"),
    ({"type": "number"}, "abc", "v: must be number"),
    ({"type": "integer"}, 1.5, "v: must be integer"),
    ({"type": "boolean"}, "yes", "v: must be boolean"),
    ({"type": "boolean"}, 1, "v: must be boolean"),
    ({"type": "array"}, "x", "v: must be array"),
    ({"type": "object"}, [], "v: must be object"),
    ({"type": "null"}, 0, "v: must be null"),
    ({"enum": ["a", "b"]}, "c", "v: must be equal to one of the allowed values"),
    ({"const": 1}, 2, "v: must be equal to constant"),
    ({"type": "number", "minimum": 1}, 0, "v: must be >= 1"),
    ({"type": "number", "maximum": 10}, 11, "v: must be <= 10"),
    ({"type": "string", "minLength": 2}, "a", "v: must NOT have fewer than 2 characters"),
    ({"anyOf": [{"type": "string"}, {"type": "array"}]}, {}, "v: must match a schema in anyOf"),
])
def test_error_lines(prop_schema, value, line):
    schema = {"type": "object", "properties": {"v": prop_schema}}
    _, err = validate_tool_arguments("t", schema, {"v": value})
    assert err is not None
    assert errors_of(err) == [line]


def test_any_of_accepts_any_branch():
    schema = {"type": "object", "properties": {"v": {"anyOf": [{"type": "integer"}, {"type": "string"}]}}}
    assert validate_tool_arguments("t", schema, {"v": 3})[1] is None
    assert validate_tool_arguments("t", schema, {"v": "x"})[1] is None


def test_nested_paths_and_array_items():
    schema = {"type": "object", "properties": {
        "edits": {"type": "array", "items": {"type": "object", "properties": {
            "old": {"type": "string"}, "new": {"type": "string"}}, "required": ["old", "new"]}},
        "opts": {"type": "object", "properties": {"n": {"type": "number"}}},
        "tags": {"type": "array", "items": {"type": "string"}},
    }}
    _, err = validate_tool_arguments("edit", schema, {
        "edits": [{"old": "a", "new": "b"}, {"old": "c"}], "opts": {"n": "x"}, "tags": ["ok", None]})
    lines = errors_of(err)
    assert "edits/1/new: must have required properties new" in lines
    assert "opts/n: must be number" in lines
    assert "tags/1: must be string" in lines
    assert len(lines) == 3


def test_additional_properties_false():
    schema = {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": False}
    _, err = validate_tool_arguments("t", schema, {"a": "x", "b": 1})
    assert errors_of(err) == ["root: must NOT have additional properties"]


def test_several_errors_are_all_listed():
    _, err = validate_tool_arguments("read", READ_SCHEMA, {"offset": "x", "limit": []})
    assert errors_of(err) == ["path: must have required properties path", "offset: must be number",
                              "limit: must be number"]


def test_non_object_arguments():
    _, err = validate_tool_arguments("read", READ_SCHEMA, ["not", "an", "object"])
    assert errors_of(err) == ["root: must be object"]
    assert err.endswith('Received arguments:\n[\n  "not",\n  "an",\n  "object"\n]')


def test_received_arguments_keep_unicode():
    _, err = validate_tool_arguments("read", READ_SCHEMA, {"p": "héllo ✓"})
    assert '"p": "héllo ✓"' in err


def test_empty_schema_accepts_anything():
    args, err = validate_tool_arguments("t", {"type": "object", "properties": {}}, {"x": [1, {"y": 2}]})
    assert err is None and args == {"x": [1, {"y": 2}]}


# ---------------------------------------------------------------------------------------------
# Through the loop: a validation failure is the tool's result and the tool never runs
# ---------------------------------------------------------------------------------------------
class ReadTool(AgentTool):
    name = "read"
    description = "read a file"
    parameters = READ_SCHEMA

    def __init__(self) -> None:
        self.calls: list[dict] = []

    async def execute(self, tool_call_id, params, signal, on_update):
        self.calls.append(params)
        return AgentToolResult(content=[TextContent(text=f"read {params['path']} at {params.get('offset')}")])


async def test_loop_returns_validation_failure_as_error_result(faux):
    tool = ReadTool()
    faux.enqueue({"toolCalls": [{"name": "read", "arguments": {"nopath": 1}, "id": "c1"},
                                {"name": "read", "arguments": {"path": "a.py", "offset": "2"}, "id": "c2"}]},
                 {"text": "ok"})
    agent = Agent(model=FAUX_MODELS[0], tools=[tool])
    events = []
    agent.subscribe(events.append)
    await agent.prompt([UserMessage(content=[TextContent(text="read")])])
    # only the valid call ran, with coerced arguments
    assert tool.calls == [{"path": "a.py", "offset": 2}]
    ends = {e.toolCallId: e for e in events if isinstance(e, ToolExecutionEndEvent)}
    assert ends["c1"].isError is True
    assert ends["c1"].result.content[0].text == (
        'Validation failed for tool "read":\n  - path: must have required properties path\n\n'
        'Received arguments:\n{\n  "nopath": 1\n}')
    assert ends["c1"].result.details == {}
    assert ends["c2"].isError is False
    assert ends["c2"].result.content[0].text == "read a.py at 2"
    # the model sees both results, in call order, and the assistant message keeps the raw arguments
    req = faux.requests[1].messages
    assert [m.toolCallId for m in req[-2:]] == ["c1", "c2"]
    assert req[-2].isError and not req[-1].isError
    assert req[1].content[1].arguments == {"path": "a.py", "offset": "2"}
    assert json.loads(json.dumps(req[1].content[0].arguments)) == {"nopath": 1}
