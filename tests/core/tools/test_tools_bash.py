import asyncio
import os
import time

import msgspec
import pytest
from msgspec import UNSET
from tools_testutil import kill_group, live_group_members, text_of

from pisces.agent.types import ToolError
from pisces.ai.abort import AbortSignal
from pisces.core.tools.bash import BashTool


def encode(result) -> dict:
    return msgspec.json.decode(msgspec.json.encode(result))


async def test_echo_updates_and_result_shape(tmp_path, run):
    tool = run(BashTool(str(tmp_path)))
    r = await tool({"command": "echo hi"})
    assert encode(r) == {"content": [{"type": "text", "text": "hi\n"}]}  # no details key at all
    assert encode(tool.updates[0]) == {"content": []}
    assert encode(tool.updates[-1]) == {"content": [{"type": "text", "text": "hi\n"}], "details": {}}


async def test_no_output_and_cwd_and_stderr_merged(tmp_path, run):
    tool = run(BashTool(str(tmp_path)))
    assert text_of(await tool({"command": "true"})) == "(no output)"
    assert text_of(await tool({"command": "pwd"})) == f"{tmp_path}\n"
    assert text_of(await tool({"command": "echo out; echo err 1>&2"})) == "out\nerr\n"


async def test_nonzero_exit_is_an_error(tmp_path, run):
    with pytest.raises(ToolError) as err:
        await run(BashTool(str(tmp_path)))({"command": "echo out; echo err >&2; exit 3"})
    assert str(err.value) == "out\nerr\n\n\nCommand exited with code 3"
    with pytest.raises(ToolError) as err:
        await run(BashTool(str(tmp_path)))({"command": "exit 7"})
    assert str(err.value) == "(no output)\n\nCommand exited with code 7"


async def test_hundred_thousand_lines(tmp_path, run):
    tool = run(BashTool(str(tmp_path)))
    r = await tool({"command": "seq 1 100000"})
    text = text_of(r)
    path = r.details["fullOutputPath"]
    assert path.startswith("/tmp/pisces-bash-") and path.endswith(".log")
    assert text.startswith("98002\n")
    assert text.endswith(f"100000\n\n\n[Showing lines 98002-100001 of 100001. Full output: {path}]")
    with open(path) as f:
        assert f.read() == "".join(f"{i}\n" for i in range(1, 100001))
    t = r.details["truncation"]
    assert (t["truncated"], t["truncatedBy"], t["totalLines"], t["outputLines"]) == (True, "lines", 100001, 2000)
    assert t["totalBytes"] == os.path.getsize(path)
    os.unlink(path)
    assert tool.updates[0].details is UNSET
    assert all(u.details is not UNSET for u in tool.updates[1:])
    assert any("fullOutputPath" in u.details for u in tool.updates[1:])


async def test_byte_truncation_and_partial_line(tmp_path, run):
    tool = run(BashTool(str(tmp_path)))
    r = await tool({"command": "head -c 60000 /dev/zero | tr '\\0' x"})
    path = r.details["fullOutputPath"]
    assert text_of(r) == "x" * 51200 + f"\n\n[Showing last 50.0KB of line 1 (line is 58.6KB). Full output: {path}]"
    os.unlink(path)
    r = await tool({"command": "for i in $(seq 1 1000); do printf '%0100d\\n' 0; done"})
    path = r.details["fullOutputPath"]
    assert text_of(r).endswith(f"\n\n[Showing lines 495-1001 of 1001 (50.0KB limit). Full output: {path}]")
    os.unlink(path)


async def test_updates_are_throttled(tmp_path, run):
    tool = run(BashTool(str(tmp_path)))
    await tool({"command": "for i in $(seq 1 40); do echo line$i; sleep 0.01; done"})
    snapshots = tool.updates[1:]
    assert 1 <= len(snapshots) < 40  # 40 chunks over ~0.4 s give a handful of 100 ms snapshots
    assert text_of(snapshots[-1]) == "".join(f"line{i}\n" for i in range(1, 41))


async def test_background_child_does_not_block(tmp_path, run):
    pidfile = tmp_path / "pid"
    started = time.monotonic()
    r = await run(BashTool(str(tmp_path)))({"command": f"echo $$ > {pidfile}; echo hi; (sleep 30 &)"})
    elapsed = time.monotonic() - started
    try:
        assert text_of(r) == "hi\n"
        assert elapsed < 20  # well before the 30 s background sleep would end
    finally:
        kill_group(int(pidfile.read_text()))


async def test_abort_kills_the_process_group(tmp_path):
    pidfile = tmp_path / "pid"
    signal = AbortSignal()
    loop = asyncio.get_running_loop()

    def on_update(update):  # abort once the command has visibly started
        if "started" in text_of(update):
            loop.call_later(0.05, signal.abort)

    started = time.monotonic()
    with pytest.raises(ToolError) as err:
        await BashTool(str(tmp_path)).execute(
            "c1", {"command": f"echo $$ > {pidfile}; echo started; sleep 60 & sleep 60"}, signal, on_update)
    assert time.monotonic() - started < 2
    assert str(err.value) == "started\n\n\nCommand aborted"
    pgid = int(pidfile.read_text())
    for _ in range(100):  # reaping the orphans may take a moment
        if not live_group_members(pgid):
            break
        await asyncio.sleep(0.02)
    assert live_group_members(pgid) == []


async def test_abort_before_start(tmp_path, run):
    signal = AbortSignal()
    signal.abort()
    with pytest.raises(ToolError, match="^Command aborted$"):
        await run(BashTool(str(tmp_path)))({"command": f"touch {tmp_path}/ran"}, signal)
    assert not (tmp_path / "ran").exists()


async def test_timeout(tmp_path, run):
    pidfile = tmp_path / "pid"
    started = time.monotonic()
    with pytest.raises(ToolError) as err:
        await run(BashTool(str(tmp_path)))({"command": f"echo $$ > {pidfile}; sleep 30", "timeout": 0.5})
    assert time.monotonic() - started < 2
    assert str(err.value) == "Command timed out after 0.5 seconds"
    pgid = int(pidfile.read_text())
    for _ in range(100):
        if not live_group_members(pgid):
            break
        await asyncio.sleep(0.02)
    assert live_group_members(pgid) == []


async def test_missing_working_directory(tmp_path, run):
    with pytest.raises(ToolError) as err:
        await run(BashTool(str(tmp_path / "gone")))({"command": "echo hi"})
    assert str(err.value) == f"Working directory does not exist: {tmp_path}/gone\nCannot execute bash commands."


async def test_command_prefix_and_shell_path(tmp_path, run):
    tool = run(BashTool(str(tmp_path), command_prefix="X=prefixed", shell_path="/bin/sh"))
    assert text_of(await tool({"command": "echo $X"})) == "prefixed\n"
    with pytest.raises(ToolError, match="^Custom shell path not found: /no/such/shell$"):
        await run(BashTool(str(tmp_path), shell_path="/no/such/shell"))({"command": "echo hi"})


async def test_agent_bin_dir_is_first_on_path(tmp_path, run):
    r = await run(BashTool(str(tmp_path)))({"command": "echo $PATH"})
    first = text_of(r).split(":")[0]
    assert first == os.path.join(os.environ["PISCES_CODING_AGENT_DIR"], "bin")
