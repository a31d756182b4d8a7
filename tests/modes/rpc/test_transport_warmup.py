"""When the RPC server starts loading the direct transport (``transport_warmup``): at once for a command that
leads to a model request, else only once no line has come and no command is in flight; never while a
command such as ``export_html`` still runs, and at most ``MAX_DELAY_S`` late."""

from __future__ import annotations

import asyncio
import threading

import pytest

from pisces.modes.rpc import transport_warmup


@pytest.fixture
def started(monkeypatch):
    """The APIs the warm-up thread was started for, and an event set when it is."""
    calls: list[str] = []
    done = threading.Event()

    def fake_prepare(api: str) -> None:
        calls.append(api)
        done.set()

    monkeypatch.setattr(transport_warmup, "prepare_transport", fake_prepare)
    return calls, done


async def _until(predicate, seconds: float = 10.0) -> bool:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while loop.time() < deadline:
        if predicate():
            return True
        await asyncio.sleep(0.005)
    return predicate()


@pytest.mark.parametrize("command", sorted(transport_warmup.MODEL_COMMANDS))
async def test_a_command_for_the_model_starts_it_at_once(started, command):
    calls, done = started
    warm = transport_warmup.TransportWarmUp(lambda: "openai-completions", lambda: True)
    warm.on_command(asyncio.get_running_loop(), {"type": "get_state"})
    assert not warm.started  # get_state alone: wait for the server to be idle
    warm.on_command(asyncio.get_running_loop(), {"type": command, "message": "hi"})
    assert warm.started  # before any timer could fire
    assert await asyncio.to_thread(done.wait, 10)
    assert calls == ["openai-completions"]


async def test_other_commands_wait_until_none_is_in_flight(started):
    calls, done = started
    busy = [True]
    warm = transport_warmup.TransportWarmUp(lambda: "anthropic-messages", lambda: busy[0])
    loop = asyncio.get_running_loop()
    warm.on_command(loop, {"type": "get_state"})
    warm.on_command(loop, {"type": "export_html"})
    await asyncio.sleep(transport_warmup.IDLE_S * 10)  # an export in flight: many idle checks, no start
    assert not warm.started and not calls
    busy[0] = False
    assert await _until(lambda: warm.started)
    assert await asyncio.to_thread(done.wait, 10)
    assert calls == ["anthropic-messages"]


async def test_a_command_in_flight_postpones_it_for_max_delay_at_most(started, monkeypatch):
    calls, done = started
    monkeypatch.setattr(transport_warmup, "MAX_DELAY_S", 0.2)
    warm = transport_warmup.TransportWarmUp(lambda: "openai-completions", lambda: True)
    warm.on_command(asyncio.get_running_loop(), {"type": "bash", "command": "sleep 100"})
    assert await _until(lambda: warm.started)
    assert await asyncio.to_thread(done.wait, 10)


async def test_an_api_that_goes_through_its_sdk_starts_no_thread(started):
    calls, _ = started
    warm = transport_warmup.TransportWarmUp(lambda: "faux", lambda: False)
    warm.on_command(asyncio.get_running_loop(), {"type": "prompt", "message": "hi"})
    assert warm.started
    await asyncio.sleep(0.05)
    assert calls == []
