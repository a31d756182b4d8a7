"""End to end with a published client: ``omp_rpc`` (python/omp-rpc in the pisces TypeScript project), unchanged,
drives the real ``pisces --mode rpc`` through the flows of its README and its typed command methods.

omp_rpc validates every frame it reads (``assistantMessageEvent.partial`` must be an object, the ready frame
must come first, ...): a shape it rejects stops its reader thread and fails every later call here.

omp_rpc is not on PyPI and its code is not copied into this repository, so the test looks for it as an
installed package, or under the directory ``$OMP_RPC_SRC`` names (a checkout's ``python/omp-rpc/src``), and
skips with the reason otherwise. Commands only the omp agent has (``set_todos``, host tools) are left out.
"""

from __future__ import annotations

import importlib
import os
import sys
import threading

import pytest
from e2eproc import PISCES


def _omp_rpc():
    src = os.environ.get("OMP_RPC_SRC")
    if src and os.path.isdir(os.path.join(src, "omp_rpc")) and src not in sys.path:
        sys.path.insert(0, src)
    try:
        return importlib.import_module("omp_rpc")
    except ImportError:
        pytest.skip("omp_rpc is not available: install it, or set OMP_RPC_SRC to python/omp-rpc/src of "
                    "usm-ricardoroche/pisces")


SCRIPT = {"responses": [{"text": "hello", "chunkSize": 2}], "loop": True}


@pytest.fixture
def client(home):
    omp = _omp_rpc()
    script = home.faux_script(SCRIPT)
    c = omp.RpcClient(command=[*PISCES, "--mode", "rpc", "--faux-script", script], cwd=home.cwd, env=home.env(),
                      startup_timeout=60, request_timeout=60)
    c.start()
    try:
        yield c
    finally:
        c.stop()


def test_readme_flows(client):
    omp = sys.modules["omp_rpc"]
    state = client.get_state()
    assert state.model is not None and state.model.provider == "faux" and state.session_id
    deltas: list[str] = []

    def on_update(event) -> None:
        # (the README tests ``ame.get("type")``, but omp_rpc builds its typed events without the ``type`` key,
        # whatever the agent sent; the delta is there)
        ame = event.assistant_message_event
        if "delta" in ame:
            deltas.append(ame["delta"])

    client.on_message_update(on_update)
    turn = client.prompt_and_wait("Reply with just the word hello", timeout=60)
    assert turn.require_assistant_text() == "hello"
    assert "".join(deltas) == "hello" and len(deltas) == 3  # streamed, validated frame by frame
    updates = [e for e in turn.events if isinstance(e, omp.MessageUpdateEvent)]
    assert updates and all(isinstance(e.assistant_message_event["partial"], dict) for e in updates)
    client.install_headless_ui()
    assert client.prompt_and_wait("again", timeout=60).assistant_text == "hello"
    assert client.protocol_errors == () and client.listener_errors == ()


def test_typed_commands(client, home):
    models = client.get_available_models()
    assert {m.id for m in models} >= {"faux", "faux-reasoning"}
    assert client.set_model("faux", "faux-reasoning").id == "faux-reasoning"
    client.set_thinking_level("high")
    assert client.get_state().thinking_level == "high"
    assert client.cycle_thinking_level() is not None
    assert client.cycle_model() is not None
    for setter, value in ((client.set_steering_mode, "all"), (client.set_follow_up_mode, "one-at-a-time"),
                          (client.set_interrupt_mode, "wait"), (client.set_auto_compaction, False),
                          (client.set_auto_retry, False)):
        setter(value)
    state = client.get_state()
    assert (state.steering_mode, state.interrupt_mode, state.auto_compaction_enabled) == ("all", "wait", False)

    result = client.bash("echo from-bash")
    assert result.output == "from-bash\n" and result.exit_code == 0 and not result.cancelled
    client.prompt_and_wait("first", timeout=60)
    client.prompt_and_wait("second", timeout=60)
    assert client.get_last_assistant_text() == "hello"
    stats = client.get_session_stats()
    assert stats.user_messages == 2 and stats.assistant_messages == 2
    assert [m.get("role") for m in client.get_messages()][-2:] == ["user", "assistant"]
    client.set_session_name("omp session")
    assert client.get_state().session_name == "omp session"
    html = client.export_html(os.path.join(home.root, "out.html"))
    assert os.path.isfile(html)

    branch_points = client.get_branch_messages()
    assert [m.text for m in branch_points] == ["first", "second"]
    first_file = client.get_state().session_file
    forked = client.branch(branch_points[1].entry_id)
    assert forked.text == "second" and forked.cancelled is False
    assert client.get_state().session_file != first_file
    assert client.switch_session(first_file).cancelled is False
    assert client.get_state().session_file == first_file
    compacted = client.compact()
    assert compacted.summary and compacted.tokens_before > 0
    assert client.new_session().cancelled is False
    assert client.get_state().message_count == 0
    assert client.protocol_errors == ()


def test_queue_and_abort(home):
    omp = _omp_rpc()
    script = home.faux_script({"responses": [{"text": "x" * 400, "chunkSize": 1, "delayMs": 5}], "loop": True})
    c = omp.RpcClient(command=[*PISCES, "--mode", "rpc", "--faux-script", script], cwd=home.cwd, env=home.env(),
                      startup_timeout=60, request_timeout=60)
    c.start()
    try:
        streaming = threading.Event()
        c.on_message_update(lambda e: streaming.set())
        c.prompt("long one")
        assert streaming.wait(30)
        c.steer("steer me")
        c.follow_up("and then this")
        c.abort()
        c.wait_for_idle(timeout=60)
        ended = [m for m in c.get_messages() if m.get("role") == "assistant"]
        assert ended and ended[0]["stopReason"] == "aborted"
        c.abort_and_prompt("fresh start")
        c.wait_for_idle(timeout=60)
        assert c.protocol_errors == ()
    finally:
        c.stop()
