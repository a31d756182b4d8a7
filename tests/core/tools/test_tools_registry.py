import json
import os

import pytest

from pisces.agent.types import AgentTool, ToolError
from pisces.ai.abort import AbortSignal
from pisces.core.tools import ALL_TOOL_NAMES, DEFAULT_TOOL_NAMES, create_tools
from shared_paths import SHARED

CONFORMANCE = os.path.join(SHARED, "conformance", "pi-0.73.1", "03_prompt_bash_tool", "llm_requests.jsonl")

# pi 0.73.1's grep/find/ls schemas (its default requests only carry read, bash, edit and write)
PI_EXTRA_SCHEMAS = {
    "grep": ["pattern", "path", "glob", "ignoreCase", "literal", "context", "limit"],
    "find": ["pattern", "path", "limit"],
    "ls": ["path", "limit"],
}


def test_create_tools():
    tools = create_tools("/tmp")
    assert list(tools) == ALL_TOOL_NAMES
    assert DEFAULT_TOOL_NAMES == ["read", "bash", "edit", "write"]
    for name, tool in tools.items():
        assert isinstance(tool, AgentTool) and tool.name == name == tool.label
        assert tool.description and tool.parameters["type"] == "object"
    for name, props in PI_EXTRA_SCHEMAS.items():
        assert list(tools[name].parameters["properties"]) == props
    assert tools["ls"].parameters.get("required") is None


@pytest.mark.skipif(not os.path.exists(CONFORMANCE), reason="conformance transcripts not available")
def test_schemas_and_descriptions_are_pis():
    with open(CONFORMANCE) as f:
        request = json.loads(f.readline())["request"]
    tools = create_tools("/tmp")
    for entry in request["tools"]:
        fn = entry["function"]
        ours = tools[fn["name"]]
        assert ours.description == fn["description"]
        assert json.dumps(ours.parameters, sort_keys=True) == json.dumps(fn["parameters"], sort_keys=True)


@pytest.mark.parametrize("name,params", [("grep", {"pattern": "x"}), ("find", {"pattern": "*"}), ("ls", {}),
                                         ("read", {"path": "f"}), ("edit", {"path": "f", "edits": [
                                             {"oldText": "a", "newText": "b"}]})])
async def test_every_tool_honours_an_aborted_signal(tmp_path, name, params):
    (tmp_path / "f").write_text("a")
    signal = AbortSignal()
    signal.abort()
    with pytest.raises(ToolError, match="^Operation aborted$"):
        await create_tools(str(tmp_path))[name].execute("c", params, signal, lambda u: None)
    assert (tmp_path / "f").read_text() == "a"
