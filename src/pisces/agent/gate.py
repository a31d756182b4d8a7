"""GateChain: several collaborators sharing the loop's tool-call gate (LoopConfig.before_tool_call and
after_tool_call), each with a rank that fixes its turn.

Ranks: extensions 10, the approval policy 20, and 30 kept for a budget gate (budgets count from events
today). Before a call, the gates run by rank until one blocks; a gate's replacement arguments are what the
next gate sees and what the tool runs with. After a call, the patches apply by rank, each gate seeing the
result patched so far.
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable

from pisces.agent.types import AgentToolResult, GateDecision, ResultPatch, ToolCallInfo

Before = Callable[[ToolCallInfo], Awaitable[GateDecision | None]]
After = Callable[[ToolCallInfo, AgentToolResult, bool], Awaitable[ResultPatch | None]]

EXTENSIONS_RANK, APPROVAL_RANK, BUDGET_RANK = 10, 20, 30


class GateChain:
    def __init__(self) -> None:
        self._before: list[tuple[int, int, Before]] = []
        self._after: list[tuple[int, int, After]] = []
        self._n = 0

    def add(self, rank: int, before: Before | None = None, after: After | None = None) -> Callable[[], None]:
        """Join the chain; returns a function that leaves it."""
        self._n += 1
        entries: list[tuple[list[Any], tuple[int, int, Any]]] = []  # (chain, entry): a before or an after gate
        if before is not None:
            entries.append((self._before, (rank, self._n, before)))
        if after is not None:
            entries.append((self._after, (rank, self._n, after)))
        for target, entry in entries:
            target.append(entry)
            target.sort(key=lambda e: (e[0], e[1]))

        def remove() -> None:
            for target, entry in entries:
                if entry in target:
                    target.remove(entry)

        return remove

    async def before_tool_call(self, info: ToolCallInfo) -> GateDecision | None:
        replaced = None
        for _rank, _n, gate in list(self._before):
            decision = await gate(info)
            if decision is None:
                continue
            if decision.block:
                return decision
            if isinstance(decision.args, dict):
                info.args = replaced = decision.args
        return GateDecision(args=replaced) if replaced is not None else None

    async def after_tool_call(self, info: ToolCallInfo, result: AgentToolResult, is_error: bool
                              ) -> ResultPatch | None:
        changed = False
        for _rank, _n, gate in list(self._after):
            patch = await gate(info, result, is_error)
            if patch is None:
                continue
            changed = True
            result, is_error = patch.apply(result, is_error)
        return ResultPatch(content=result.content, details=result.details, isError=is_error) if changed else None


def install(agent: Any) -> GateChain:
    """The agent's gate chain, made and installed on first use."""
    chain = agent.gate_chain
    if chain is None:
        chain = agent.gate_chain = GateChain()
        agent.before_tool_call = chain.before_tool_call
        agent.after_tool_call = chain.after_tool_call
    return chain


__all__ = ["GateChain", "install", "EXTENSIONS_RANK", "APPROVAL_RANK", "BUDGET_RANK"]
