"""Seed 003's older forms, as thin adapters over the same runner.

Hooks (``hooks/``): a module with ``register(pi)`` (or ``default``/``hook``), loaded like an extension; its
failures are reported as ``hook_error{hookPath, event, error}`` as well as ``extension_error``.

Custom tools (``tools/``): a module whose ``register(pi)`` (or ``tool``/``default``) *returns* a tool definition
or a list of them, with oh-my-pi's ``execute(tool_call_id, params, on_update, ctx, signal)`` argument order and
an optional ``on_session(event, ctx)`` called with ``reason`` "start", "switch", "branch", "tree" or "shutdown".
"""

from __future__ import annotations

import inspect
from typing import Any, Callable

from pisces.core.extensions.api import pick, positional_count

_SESSION_REASONS = {"startup": "start", "reload": "start", "new": "switch", "resume": "switch", "fork": "branch"}


def _adapt_execute(execute: Callable[..., Any]) -> Callable[..., Any]:
    n = positional_count(execute)

    async def run(tool_call_id: str, params: dict[str, Any], signal: Any, on_update: Any, ctx: Any) -> Any:
        result = execute(*(tool_call_id, params, on_update, ctx, signal)[:min(n, 5)])
        return await result if inspect.isawaitable(result) else result

    return run


def custom_tool_register(factory: Callable[..., Any]) -> Callable[..., Any]:
    """A register function that registers the tool(s) ``factory(pi)`` returns."""

    async def register(pi: Any) -> None:
        made = factory(pi)
        if inspect.isawaitable(made):
            made = await made
        specs = made if isinstance(made, (list, tuple)) else [made]
        for spec in specs:
            if spec is None:
                continue
            fields = dict(spec) if isinstance(spec, dict) else {k: getattr(spec, k) for k in dir(spec)
                                                               if not k.startswith("_")}
            execute = fields.get("execute")
            if not callable(execute):
                raise ValueError("a custom tool needs an 'execute' function")
            fields["execute"] = _adapt_execute(execute)
            on_session = pick(fields, "on_session", "onSession")
            fields.pop("on_session", None)
            fields.pop("onSession", None)
            pi.register_tool(fields)
            if callable(on_session):
                _forward_session_events(pi, on_session)

    return register


def _forward_session_events(pi: Any, on_session: Callable[..., Any]) -> None:
    async def call(reason: str, previous: Any, ctx: Any) -> None:
        result = on_session({"reason": reason, "previousSessionFile": previous}, ctx)
        if inspect.isawaitable(result):
            await result

    pi.on("session_start", lambda e, ctx: call(_SESSION_REASONS.get(e.reason, "start"), e.previousSessionFile, ctx))
    pi.on("session_tree", lambda e, ctx: call("tree", None, ctx))
    pi.on("session_shutdown", lambda e, ctx: call("shutdown", None, ctx))
