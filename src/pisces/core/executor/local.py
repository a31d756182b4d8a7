"""The local executor: items as processes on this machine, at most ``parallel`` at once."""

from __future__ import annotations

import asyncio
from typing import Any

from pisces.core.executor.item import run_item
from pisces.core.executor.spec import ItemSpec, RunDefaults


class LocalExecutor:
    def __init__(self, parallel: int) -> None:
        if parallel < 1:
            raise ValueError("--parallel must be at least 1")
        self._slots = asyncio.Semaphore(parallel)

    async def submit(self, spec: ItemSpec, defaults: RunDefaults) -> dict[str, Any]:
        async with self._slots:
            return await run_item(spec, defaults)

    async def close(self) -> None:
        return None
