"""Where a unit of agent work runs: one manifest item in, one result line out.

An *item* is one line of a batch manifest (``spec.py`` reads and checks it); running it (``item.py``) clones the
repository into a private directory, runs pisces headless there, takes the patch and the session file, runs the
item's verification and returns the result line with the patch and the session as data (no filesystem is
shared with whoever asked). An *executor* decides where that happens:

- ``local`` (``local.py``): processes on this machine, at most ``parallel`` at once;
- ``ray`` (``ray_backend.py``): each item a Ray task on a cluster's worker (``pisces[ray]``, imported only when
  chosen).

Kubernetes needs no executor here: ``pisces batch --emit k8s`` writes an Indexed Job whose pods each run one
item with ``pisces batch MANIFEST --index N``, and Kubernetes schedules and retries them.
"""

from __future__ import annotations

from typing import Any, Protocol

from pisces.core.executor.spec import ItemSpec, RunDefaults


class Executor(Protocol):
    """Runs items; ``submit`` returns the result line (with ``patch_text`` and ``session_text`` as data)."""

    async def submit(self, spec: ItemSpec, defaults: RunDefaults) -> dict[str, Any]: ...

    async def close(self) -> None: ...


def make_executor(name: str, *, parallel: int, ray_address: str | None = None) -> Executor:
    if name == "local":
        from pisces.core.executor.local import LocalExecutor  # noqa: PLC0415 - only the chosen backend is imported

        return LocalExecutor(parallel)
    if name == "ray":
        from pisces.core.executor.ray_backend import RayExecutor  # noqa: PLC0415 - Ray is an optional extra

        return RayExecutor(parallel, address=ray_address)
    raise ValueError(f"unknown executor {name!r}: choose local or ray")


__all__ = ["Executor", "ItemSpec", "RunDefaults", "make_executor"]
