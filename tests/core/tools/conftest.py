import pytest

from pisces.agent.types import AgentToolResult
from pisces.ai.abort import AbortSignal


class Run:
    """Calls a tool and records its updates."""

    def __init__(self, tool):
        self.tool = tool
        self.updates: list[AgentToolResult] = []

    async def __call__(self, params, signal=None):
        return await self.tool.execute("call_1", params, signal or AbortSignal(), self.updates.append)


@pytest.fixture
def run():
    return Run
