"""The legacy single oldText/newText edit form goes through the whole loop (argument repair before validation)."""

from pisces.agent.agent import Agent
from pisces.ai.models import FAUX_MODELS
from pisces.ai.types import TextContent, ToolResultMessage, UserMessage
from pisces.core.tools import create_tools


async def test_legacy_edit_form_is_repaired_before_validation(tmp_path, faux):
    target = tmp_path / "a.txt"
    target.write_text("hello world\n")
    faux.enqueue({"toolCalls": [{"name": "edit", "arguments": {"path": "a.txt", "oldText": "world",
                                                                "newText": "pisces"}}]},
                 {"text": "done"})
    tools = create_tools(str(tmp_path))
    agent = Agent(model=FAUX_MODELS[0], tools=[tools["edit"]])
    await agent.prompt([UserMessage(content=[TextContent(text="edit it")])])
    results = [m for m in agent.messages if isinstance(m, ToolResultMessage)]
    assert len(results) == 1
    assert results[0].isError is False, results[0].content
    assert target.read_text() == "hello pisces\n"
