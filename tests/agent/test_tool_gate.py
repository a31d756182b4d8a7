"""The tool-call gate of LoopConfig: before_tool_call blocks or rewrites a call, after_tool_call patches its
result; each call is prepared (start, validation, gate) in call order before any runs, as in pi."""

from __future__ import annotations

from agent_helpers import Recorder, label, user
from test_loop import MODEL, SleepTool

from pisces.agent.agent import Agent
from pisces.agent.types import GateDecision, ResultPatch, ToolExecutionEndEvent
from pisces.ai.types import TextContent


def calls(*pairs):
    return {"toolCalls": [{"name": "sleep", "arguments": {"ms": ms}, "id": cid} for cid, ms in pairs]}


async def test_a_blocked_call_ends_at_once_with_the_reason_and_never_runs(faux):
    log: list = []
    seen = []

    async def gate(info):
        seen.append((info.tool_call_id, info.tool_name, dict(info.args)))
        return GateDecision(block=True, reason="no sleeping") if info.tool_call_id == "b" else None

    faux.enqueue(calls(("a", 5), ("b", 5)), {"text": "done"})
    agent = Agent(model=MODEL, tools=[SleepTool(log)])
    agent.before_tool_call = gate
    rec = Recorder(agent)
    await agent.prompt([user("go")])
    tool_labels = [x for x in rec.labels() if x.startswith("tool_execution")]
    assert tool_labels == ["tool_execution_start:a", "tool_execution_start:b", "tool_execution_end:b",
                           "tool_execution_end:a"]
    ends = {e.toolCallId: e for e in rec.of(ToolExecutionEndEvent)}
    assert ends["b"].isError and ends["b"].result.content == [TextContent(text="no sleeping")]
    assert log == [("start", "a"), ("end", "a")]
    assert seen == [("a", "sleep", {"ms": 5}), ("b", "sleep", {"ms": 5})]


async def test_the_gate_may_replace_or_change_the_arguments(faux):
    log: list = []

    async def gate(info):
        if info.tool_call_id == "a":
            info.args["ms"] = 1  # in place
            return None
        return GateDecision(args={"ms": 2})  # replaced

    faux.enqueue(calls(("a", 500), ("b", 500)), {"text": "done"})
    agent = Agent(model=MODEL, tools=[SleepTool(log)])
    agent.before_tool_call = gate
    rec = Recorder(agent)
    await agent.prompt([user("go")])
    ends = {e.toolCallId: e.result.content[0].text for e in rec.of(ToolExecutionEndEvent)}
    assert ends == {"a": "slept 1", "b": "slept 2"}


async def test_a_gate_that_raises_blocks_the_call(faux):
    log: list = []

    async def gate(info):
        raise RuntimeError("policy unavailable")

    faux.enqueue(calls(("a", 5)), {"text": "done"})
    agent = Agent(model=MODEL, tools=[SleepTool(log)])
    agent.before_tool_call = gate
    rec = Recorder(agent)
    await agent.prompt([user("go")])
    end = rec.of(ToolExecutionEndEvent)[0]
    assert end.isError and end.result.content[0].text == "policy unavailable"
    assert log == []


async def test_after_tool_call_patches_only_what_it_returns(faux):
    log: list = []

    async def after(info, result, is_error):
        if info.tool_call_id == "a":
            return ResultPatch(isError=True)
        if info.tool_call_id == "b":
            return ResultPatch(content=[TextContent(text="rewritten")], details={"x": 1})
        raise ValueError("after hook broke")

    faux.enqueue(calls(("a", 1), ("b", 1), ("c", 1)), {"text": "done"})
    agent = Agent(model=MODEL, tools=[SleepTool(log)])
    agent.after_tool_call = after
    rec = Recorder(agent)
    await agent.prompt([user("go")])
    ends = {e.toolCallId: e for e in rec.of(ToolExecutionEndEvent)}
    assert ends["a"].isError and ends["a"].result.content[0].text == "slept 1"
    assert not ends["b"].isError and ends["b"].result.content[0].text == "rewritten"
    assert ends["b"].result.details == {"x": 1}
    assert ends["c"].isError and ends["c"].result.content[0].text == "after hook broke"
    assert [label(e) for e in rec.events].count("message_start:toolResult") == 3


async def test_a_gate_chain_runs_by_rank_first_block_wins_and_patches_chain(faux):
    from pisces.agent.gate import APPROVAL_RANK, BUDGET_RANK, EXTENSIONS_RANK, install

    log: list = []
    order: list = []
    agent = Agent(model=MODEL, tools=[SleepTool(log)])
    chain = install(agent)

    async def budget(info):
        order.append(("budget", info.args["ms"]))
        return GateDecision(block=True, reason="over budget") if info.tool_call_id == "b" else None

    async def extension(info):
        order.append(("extension", info.args["ms"]))
        return GateDecision(args={"ms": 1})

    async def approval(info):
        order.append(("approval", info.args["ms"]))
        return None

    async def patch_a(info, result, is_error):
        return ResultPatch(content=[TextContent(text=result.content[0].text + " +ext")])

    async def patch_b(info, result, is_error):
        return ResultPatch(content=[TextContent(text=result.content[0].text + " +approval")], isError=True)

    chain.add(BUDGET_RANK, before=budget)
    chain.add(APPROVAL_RANK, before=approval, after=patch_b)
    remove = chain.add(EXTENSIONS_RANK, before=extension, after=patch_a)
    faux.enqueue(calls(("a", 50), ("b", 50)), {"text": "done"}, calls(("c", 3)), {"text": "done"})
    rec = Recorder(agent)
    await agent.prompt([user("go")])
    assert order == [("extension", 50), ("approval", 1), ("budget", 1)] * 2
    ends = {e.toolCallId: e for e in rec.of(ToolExecutionEndEvent)}
    assert ends["a"].result.content[0].text == "slept 1 +ext +approval" and ends["a"].isError
    assert ends["b"].result.content[0].text == "over budget"
    remove()
    order.clear()
    await agent.prompt([user("again")])
    assert order == [("approval", 3), ("budget", 3)]
