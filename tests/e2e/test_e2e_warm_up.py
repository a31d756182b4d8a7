"""End to end, the idle warm-up: once no command has come for 0.1 s (or after 1 s of steady commands), the
process imports the SDK of the model in use when its requests go through the SDK, and again when set_model
picks a model of another API, so that the next prompt does not wait for it. An API whose requests go
without the SDK (``providers.direct``, the default for OpenAI's) never gets it imported.

What is observable from outside is the process's memory map: the openai SDK brings pydantic, whose compiled
core is a shared library; the faux model and the direct path need no SDK and never load it. The scheduling
tests run with ``PISCES_PROVIDER_TRANSPORT=sdk``, which puts OpenAI's requests back on the SDK.
"""

from __future__ import annotations

import time

from scripted_server import Reply


def _sdk_loaded(pid: int) -> bool:
    with open(f"/proc/{pid}/maps") as f:
        return any("pydantic_core" in line for line in f)


def _wait_loaded(pid: int, timeout: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _sdk_loaded(pid):
            return True
        time.sleep(0.05)
    return False


def _sdk_env(home):
    return home.env(PISCES_PROVIDER_TRANSPORT="sdk")


def test_a_direct_api_gets_no_sdk_while_idle_nor_for_its_prompts(home, spawn, server):
    home.scripted_provider(server.url + "/v1")
    env = {k: v for k, v in home.env().items() if k != "PISCES_PROVIDER_TRANSPORT"}
    p = spawn(env=env)
    assert p.ok({"id": "s", "type": "get_state"})["model"]["api"] == "openai-completions"
    time.sleep(1.5)  # well past the 0.1 s of quiet that starts the warm-up
    assert not _sdk_loaded(p.p.pid), "the warm-up imported the openai SDK for a direct API"
    server.push(Reply.sse([{"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "m",
                            "choices": [{"index": 0, "delta": {"content": "hello"}, "finish_reason": "stop"}]}],
                          done=True))
    p.ok({"id": "p", "type": "prompt", "message": "hi"})
    end = p.until_type("agent_end", 30)[-1]
    assert end["messages"][-1]["content"][0]["text"] == "hello"
    time.sleep(0.5)
    assert not _sdk_loaded(p.p.pid), "a prompt of a direct API imported the openai SDK"


def test_the_sdk_of_the_starting_model_is_imported_while_idle(home, spawn, server):
    home.scripted_provider(server.url + "/v1")
    p = spawn(env=_sdk_env(home))
    assert p.ok({"id": "s", "type": "get_state"})["model"]["api"] == "openai-completions"
    assert _wait_loaded(p.p.pid), "the openai SDK was not imported while the agent sat idle"


def test_set_model_to_another_api_imports_its_sdk_while_idle(home, spawn, server):
    home.scripted_provider(server.url + "/v1")
    p = spawn("--provider", "faux", env=_sdk_env(home))
    assert p.ok({"id": "s", "type": "get_state"})["model"]["api"] == "faux"
    time.sleep(1.0)  # the faux warm-up is done by now, and it loads no SDK
    assert not _sdk_loaded(p.p.pid)
    p.ok({"id": "m", "type": "set_model", "provider": "scripted", "modelId": "scripted-model"})
    assert _wait_loaded(p.p.pid), "set_model chose an openai-completions model, but its SDK was not imported"


def _poll_state(p, seconds: float, every: float = 0.02) -> bool:
    """Send get_state every ``every`` s for ``seconds`` (without waiting for the answers, so that a slow
    machine does not stretch the gaps between lines); True when the SDK got loaded meanwhile. Every line
    is answered in the end."""
    deadline = time.monotonic() + seconds
    n = 0
    loaded = False
    while time.monotonic() < deadline and not loaded:
        n += 1
        p.send({"id": f"poll{n}", "type": "get_state"})
        loaded = _sdk_loaded(p.p.pid)
        time.sleep(every)
    p.until(lambda f: f.get("id") == f"poll{n}", timeout=15)
    return loaded


def test_a_burst_of_commands_does_not_share_the_interpreter_with_the_import(home, spawn, server):
    home.scripted_provider(server.url + "/v1")
    p = spawn(env=_sdk_env(home))
    # a command every 20 ms: never 0.1 s of quiet, and well under the 1 s cap
    assert not _poll_state(p, 0.6), "the SDK import started while commands kept coming"
    assert _wait_loaded(p.p.pid), "the SDK was not imported once the commands stopped"


def test_a_steady_stream_of_commands_postpones_the_warm_up_by_one_second_at_most(home, spawn, server):
    home.scripted_provider(server.url + "/v1")
    p = spawn(env=_sdk_env(home))
    assert _poll_state(p, 10.0), "commands every 20 ms kept the warm-up from ever starting"
