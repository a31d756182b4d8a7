"""Abort always wins: an extension handler that never returns cannot hold an abort, the session or the next
prompt (DEVIATIONS item 3 in docs/rpc.md). Each hang is tried on the real process."""

from __future__ import annotations

import os
import time

import pytest
from test_e2e_extensions import write_ext

HANG = """
import asyncio

def register(pi):
    @pi.on("{event}")
    async def hang(event, ctx=None):
        open({marker!r}, "w").close()  # the test aborts once the handler is running
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            {on_cancel}
"""
# a handler that ignores the cancellation and keeps waiting: abort must not depend on its cooperation
STUBBORN = "await asyncio.sleep(3600)"
COOPERATIVE = "raise"


@pytest.mark.parametrize(("event", "on_cancel"), [("tool_call", STUBBORN), ("tool_call", COOPERATIVE),
                                                   ("tool_result", STUBBORN), ("context", STUBBORN),
                                                   ("turn_start", STUBBORN)])
def test_abort_is_answered_while_a_handler_hangs(home, spawn, event, on_cancel):
    marker = os.path.join(home.root, "entered")
    ext = write_ext(home, f"hang_{event}.py", HANG.format(event=event, on_cancel=on_cancel, marker=marker))
    script = home.faux_script([{"toolCalls": [{"name": "bash", "arguments": {"command": "echo hi"}}]},
                               {"toolCalls": [{"name": "bash", "arguments": {"command": "echo again"}}]},
                               {"text": "the answer"}])
    p = spawn("--faux-script", script, "-e", ext)
    for message in ("go", "again"):  # twice: an abandoned handler is not waited for by the next run either
        p.ok({"type": "prompt", "message": message})
        deadline = time.monotonic() + 30
        while not os.path.exists(marker) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert os.path.exists(marker), "the handler never ran"
        os.unlink(marker)
        p.send({"id": f"stop-{message}", "type": "abort"})
        frames = p.until(lambda f, m=message: f.get("id") == f"stop-{m}", 30)
        assert frames[-1]["success"] is True
        if not any(f.get("type") == "agent_settled" for f in frames):  # it may come before or after the answer
            p.until_type("agent_settled", 30)
        assert p.ok({"type": "get_state"})["isStreaming"] is False


def test_an_abandoned_handler_that_ignores_its_cancel_does_not_keep_the_process_alive(home, spawn):
    marker = os.path.join(home.root, "entered")
    ext = write_ext(home, "stubborn.py", HANG.format(event="tool_call", on_cancel=STUBBORN, marker=marker))
    script = home.faux_script([{"toolCalls": [{"name": "bash", "arguments": {"command": "echo hi"}}]},
                               {"text": "done"}])
    p = spawn("--faux-script", script, "-e", ext)
    p.ok({"type": "prompt", "message": "go"})
    deadline = time.monotonic() + 30
    while not os.path.exists(marker) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert os.path.exists(marker), "the handler never ran"
    p.send({"id": "stop", "type": "abort"})
    p.until(lambda f: f.get("id") == "stop", 30)
    p.p.stdin.close()  # the end of stdin ends the process, whatever the abandoned handler still does
    assert p.p.wait(timeout=60) == 0



STUBBORN_TOOL = """
import asyncio

def register(pi):
    async def execute(tool_call_id, params, signal, on_update, ctx=None):
        while True:  # ignores the abort and swallows its cancel: abandoned, never waited for
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                pass

    pi.register_tool(name="stuck", description="never returns", parameters={"type": "object"}, execute=execute)
"""


def test_abort_wins_over_a_tool_that_ignores_it(home, spawn):
    ext = write_ext(home, "stuck_tool.py", STUBBORN_TOOL)
    script = home.faux_script([{"toolCalls": [{"name": "stuck", "arguments": {}}]}, {"text": "next answer"}])
    p = spawn("--faux-script", script, "-e", ext)
    p.ok({"type": "prompt", "message": "go"})
    p.until(lambda f: f.get("type") == "tool_execution_start", 30)
    p.send({"id": "stop", "type": "abort"})
    frames = p.until(lambda f: f.get("id") == "stop", 30)
    ends = [f for f in frames if f.get("type") == "tool_execution_end"]
    if not ends:
        ends = [p.until(lambda f: f.get("type") == "tool_execution_end", 30)[-1]]
    assert ends[0]["isError"] is True and ends[0]["result"]["content"][0]["text"] == "Operation aborted"
    if not any(f.get("type") == "agent_settled" for f in frames):
        p.until_type("agent_settled", 30)
    assert p.ok({"type": "get_state"})["isStreaming"] is False
