"""The Ray executor (``pisces[ray]``): each item a Ray task on a worker of the cluster.

The worker clones the repository itself (a git URL, or a path that the worker can see) and hands the patch and
the session file back as data in the result, so no filesystem is shared with the coordinator. Ray's own task
retries apply to a worker that dies (``max_retries``); an item that fails on its own is not retried. Ray is
imported only when this executor is chosen.
"""

from __future__ import annotations

import asyncio
from typing import Any

from pisces.core.executor.spec import ItemSpec, RunDefaults


def _import_ray() -> Any:
    try:
        import ray  # noqa: PLC0415 - an optional extra, imported only for --executor ray
    except ImportError:
        raise RuntimeError("--executor ray needs Ray: pip install 'pisces-agent[ray]'") from None
    return ray


class RayExecutor:
    def __init__(self, parallel: int, *, address: str | None = None, max_retries: int = 2) -> None:
        ray = self._ray = _import_ray()
        if not ray.is_initialized():
            kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
            if address:
                kwargs["address"] = address
            else:
                kwargs["num_cpus"] = parallel
            ray.init(**kwargs)
        from pisces.core.executor.item import run_item_sync  # noqa: PLC0415 - shipped to the workers with the task

        self._remote = ray.remote(num_cpus=1, max_retries=max_retries)(run_item_sync)
        self._slots = asyncio.Semaphore(parallel)

    async def submit(self, spec: ItemSpec, defaults: RunDefaults) -> dict[str, Any]:
        async with self._slots:
            ref = self._remote.remote(spec, defaults)
            try:
                result: dict[str, Any] = await ref
            except asyncio.CancelledError:
                self._ray.cancel(ref, force=True)
                raise
            return result

    async def close(self) -> None:
        await asyncio.to_thread(self._ray.shutdown)
