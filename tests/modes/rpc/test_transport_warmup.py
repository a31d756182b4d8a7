"""When the RPC server starts loading the direct transport (``transport_warmup``): at once, before it runs,
for a command that leads to a model request; never beside another command such as ``export_html``."""

from __future__ import annotations

import threading

import pytest

from pisces.modes.rpc import transport_warmup


@pytest.fixture
def started(monkeypatch):
    """The APIs the warm-up thread was started for, and an event set when it is."""
    calls: list[str] = []
    done = threading.Event()

    def fake_prepare(api: str, base_url: str | None = None) -> None:
        calls.append(api if base_url is None else f"{api} {base_url}")
        done.set()

    monkeypatch.setattr(transport_warmup, "prepare_transport", fake_prepare)
    return calls, done


@pytest.mark.parametrize("command", sorted(transport_warmup.MODEL_COMMANDS))
def test_a_command_for_the_model_starts_it_once(started, command):
    calls, done = started
    warm = transport_warmup.TransportWarmUp(lambda: "openai-completions")
    for other in ("get_state", "switch_session", "export_html", "bash"):
        warm.on_command({"type": other})
    warm.on_command("not a command")
    assert not warm.started and not calls
    warm.on_command({"type": command, "message": "hi"})
    assert warm.started
    assert done.wait(10)
    warm.on_command({"type": command, "message": "again"})
    assert calls == ["openai-completions"]


def test_an_api_that_goes_through_its_sdk_starts_no_thread(started):
    calls, _ = started
    warm = transport_warmup.TransportWarmUp(lambda: "faux")
    warm.on_command({"type": "prompt", "message": "hi"})
    assert warm.started
    assert calls == []


def test_the_thread_is_told_the_models_base_url(started):
    # a plain-http server (a local model server) gets no TLS context built beside the next commands
    calls, done = started
    warm = transport_warmup.TransportWarmUp(lambda: "openai-completions", lambda: "http://127.0.0.1:8080/v1")
    warm.on_command({"type": "prompt", "message": "hi"})
    assert done.wait(10)
    assert calls == ["openai-completions http://127.0.0.1:8080/v1"]
