"""A request that comes while the start-up thread (``direct.prepare``) is still building the HTTP client waits
for that client instead of building a second one beside it, keeps the event loop serving meanwhile, and builds
its own when the thread fails or takes longer than the bound."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from pisces.ai.providers import direct


@pytest.fixture
def builder(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    state: dict[str, Any] = {"built": [], "gate": threading.Event(), "fail": False}

    def new_client() -> Any:
        if threading.current_thread() is not threading.main_thread():
            assert state["gate"].wait(30), "the test never opened the gate"
            if state["fail"]:
                raise RuntimeError("the thread's build failed")
        client = object()
        state["built"].append((threading.current_thread().name, client))
        return client

    monkeypatch.setattr(direct, "_new_client", new_client)
    monkeypatch.setattr(direct, "_prebuilt", [])
    monkeypatch.setattr(direct, "_preparing", [])
    return state


def _start_prepare() -> threading.Thread:
    def run() -> None:
        try:
            direct.prepare()
        except RuntimeError:
            pass  # the failing case: prepare's caller ignores it (providers.prepare_transport)

    thread = threading.Thread(target=run, name="prepare-under-test", daemon=True)
    thread.start()
    return thread


def test_request_waits_for_the_client_being_prepared(builder: dict[str, Any]) -> None:
    thread = _start_prepare()

    async def main() -> Any:
        waiting = asyncio.ensure_future(direct._await_prepare())
        ticks = 0
        for _ in range(20):  # the loop keeps running other work while the request waits
            await asyncio.sleep(0.005)
            ticks += 1
        assert not waiting.done()
        builder["gate"].set()
        await asyncio.wait_for(waiting, 30)
        return ticks, direct._client()

    ticks, client = asyncio.run(main())
    thread.join(30)
    assert ticks == 20
    assert [name for name, _ in builder["built"]] == ["prepare-under-test"]  # one client, the thread's
    assert client is builder["built"][0][1]


def test_request_builds_its_own_when_prepare_fails(builder: dict[str, Any]) -> None:
    builder["fail"] = True
    thread = _start_prepare()

    async def main() -> Any:
        waiting = asyncio.ensure_future(direct._await_prepare())
        await asyncio.sleep(0.01)
        builder["gate"].set()
        await asyncio.wait_for(waiting, 30)
        return direct._client()

    client = asyncio.run(main())
    thread.join(30)
    assert [name for name, _ in builder["built"]] == ["MainThread"]
    assert client is builder["built"][0][1]


def test_wait_is_bounded(builder: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(direct, "PREPARE_WAIT_S", 0.05)
    thread = _start_prepare()

    async def main() -> Any:
        await asyncio.wait_for(direct._await_prepare(), 30)  # returns at the bound, the thread still building
        return direct._client()

    client = asyncio.run(main())
    builder["gate"].set()
    thread.join(30)
    assert builder["built"][0] == ("MainThread", client)


def test_no_wait_without_prepare(builder: dict[str, Any]) -> None:
    async def main() -> Any:
        await asyncio.wait_for(direct._await_prepare(), 1)
        return direct._client()

    assert asyncio.run(main()) is builder["built"][0][1]
