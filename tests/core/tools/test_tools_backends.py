"""Tool backends: the file tools and bash with another file system and shell (an editor's buffers and
terminal), keeping every rule of their own. The backends here are plain in-memory fakes."""

from __future__ import annotations

import asyncio
import base64
import os

import pytest
from tools_testutil import text_of

from pisces.agent.types import ToolError
from pisces.ai.abort import AbortSignal
from pisces.core.tools import BashTool, EditTool, ReadTool, WriteTool, create_tools
from pisces.core.tools.backends import BackendError, ToolBackends
from pisces.core.tools.bash_exec import ProcessOutcome

PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==")


class Buffers:
    def __init__(self, files: dict[str, str] | None = None) -> None:
        self.files = dict(files or {})
        self.reads: list[str] = []
        self.writes: list[tuple[str, str]] = []
        self.hang = False
        self.reading = asyncio.Event()

    async def read_text(self, path: str) -> str:
        self.reads.append(path)
        self.reading.set()
        if self.hang:
            await asyncio.Event().wait()
        if path not in self.files:
            raise BackendError(f"The editor refused reading {path}: not found")
        return self.files[path]

    async def write_text(self, path: str, content: str) -> None:
        self.writes.append((path, content))
        self.files[path] = content


class Terminal:
    def __init__(self, output: bytes, outcome: ProcessOutcome) -> None:
        self.output, self.outcome = output, outcome
        self.seen: list[dict] = []

    async def run(self, command, cwd, *, on_data, signal, timeout, env, tool_call_id):
        self.seen.append({"command": command, "cwd": cwd, "timeout": timeout, "tool_call_id": tool_call_id})
        on_data(self.output)
        return self.outcome


async def test_read_goes_through_the_backend_with_the_tools_own_line_window(tmp_path, run):
    path = str(tmp_path / "a.txt")
    with open(path, "w") as f:
        f.write("on disk\n")
    files = Buffers({path: "".join(f"line {i}\n" for i in range(1, 11))})
    tool = run(ReadTool(str(tmp_path), files=files))
    result = await tool({"path": "a.txt", "offset": 3, "limit": 2})
    assert text_of(result) == "line 3\nline 4\n\n[7 more lines in file. Use offset=5 to continue.]"  # as pi counts: 11 lines
    assert files.reads == [path]


async def test_an_image_is_still_read_locally(tmp_path, run):
    (tmp_path / "dot.png").write_bytes(PNG)
    files = Buffers()
    result = await run(ReadTool(str(tmp_path), files=files))({"path": "dot.png"})
    assert result.content[1].mimeType == "image/png" and files.reads == []


async def test_a_backend_error_is_the_tools_error_and_abort_ends_a_hanging_call(tmp_path, run):
    files = Buffers()
    with pytest.raises(ToolError, match="not found"):
        await run(ReadTool(str(tmp_path), files=files))({"path": "missing.txt"})
    files.hang = True
    files.reading.clear()
    signal = AbortSignal()
    pending = asyncio.ensure_future(run(ReadTool(str(tmp_path), files=files))({"path": "x.txt"}, signal))
    await asyncio.wait_for(files.reading.wait(), 30)
    signal.abort()
    with pytest.raises(ToolError, match="Operation aborted"):
        await asyncio.wait_for(pending, 30)


async def test_edit_reads_and_writes_through_the_backend_keeping_bom_and_crlf(tmp_path, run):
    path = str(tmp_path / "w.txt")
    files = Buffers({path: "\ufeffone\r\ntwo\r\n"})
    result = await run(EditTool(str(tmp_path), files=files))(
        {"path": "w.txt", "edits": [{"oldText": "two", "newText": "2"}]})
    assert files.writes == [(path, "\ufeffone\r\n2\r\n")]
    assert result.details["firstChangedLine"] == 2 and "+2 2" in result.details["diff"]
    assert not os.path.exists(path)  # the backend owns the file


async def test_write_goes_through_the_backend(tmp_path, run):
    files = Buffers()
    result = await run(WriteTool(str(tmp_path), files=files))({"path": "d/n.txt", "content": "hi"})
    assert files.writes == [(str(tmp_path / "d" / "n.txt"), "hi")]
    assert text_of(result) == "Successfully wrote 2 bytes to d/n.txt" and not (tmp_path / "d").exists()


async def test_bash_through_a_shell_backend_keeps_its_result_texts(tmp_path, run):
    terminal = Terminal(b"hello\n", ProcessOutcome(0, False, False))
    result = await run(BashTool(str(tmp_path), shell=terminal))({"command": "echo hello", "timeout": 5})
    assert text_of(result) == "hello\n"
    assert terminal.seen == [{"command": "echo hello", "cwd": str(tmp_path), "timeout": 5, "tool_call_id": "call_1"}]
    failing = Terminal(b"boom\n", ProcessOutcome(2, False, False))
    with pytest.raises(ToolError, match="boom\n\n\nCommand exited with code 2"):
        await run(BashTool(str(tmp_path), shell=failing))({"command": "false"})
    slow = Terminal(b"", ProcessOutcome(None, False, True))
    with pytest.raises(ToolError, match="Command timed out after 1 seconds"):
        await run(BashTool(str(tmp_path), shell=slow))({"command": "sleep 9", "timeout": 1})
    many = Terminal(b"".join(b"%d\n" % i for i in range(3000)), ProcessOutcome(0, False, False))
    result = await run(BashTool(str(tmp_path), shell=many))({"command": "seq"})
    assert result.details["truncation"]["truncated"] and "[Showing lines 1002-3001 of 3001." in text_of(result)


def test_create_tools_hands_files_to_the_file_tools_and_the_shell_to_bash(tmp_path):
    files, shell = Buffers(), Terminal(b"", ProcessOutcome(0, False, False))
    tools = create_tools(str(tmp_path), backends=ToolBackends(files=files, shell=shell))
    assert all(tools[n].load().files is files for n in ("read", "edit", "write"))
    assert tools["bash"].load().shell is shell
    local = create_tools(str(tmp_path))
    assert local["read"].load().files is None and local["bash"].load().shell is None
