import os

from pisces.ai.abort import AbortSignal
from pisces.core.tools.bash_exec import OutputAccumulator, get_shell_config, run_shell, sanitize_output


async def test_run_shell_result(tmp_path):
    chunks = []
    r = await run_shell("printf 'a\\nb\\n'; exit 4", str(tmp_path), on_chunk=chunks.append)
    assert (r.output, r.exit_code, r.cancelled, r.timed_out, r.truncated, r.full_output_path) == (
        "a\nb\n", 4, False, False, False, None)
    assert "".join(chunks) == "a\nb\n"


async def test_run_shell_cancel_and_timeout(tmp_path):
    signal = AbortSignal()
    signal.abort()
    r = await run_shell("echo never", str(tmp_path), signal=signal)
    assert r.cancelled and r.exit_code is None and r.output == ""
    r = await run_shell("echo before; sleep 10", str(tmp_path), timeout=0.3)
    assert r.timed_out and r.exit_code is None and r.output == "before\n"


async def test_run_shell_killed_by_signal_has_no_exit_code(tmp_path):
    r = await run_shell("kill -9 $$", str(tmp_path))
    assert r.exit_code is None and not r.cancelled


async def test_rpc_style_sanitising(tmp_path):
    r = await run_shell("printf '\\033[31mred\\033[0m\\r\\nbell\\007\\ttab\\n'", str(tmp_path), sanitize=True)
    assert r.output == "red\nbell\ttab\n"
    assert sanitize_output("\x1b]0;title\x07ok\x1b[2K") == "ok"


async def test_full_output_file_gets_sanitised_text_in_rpc_mode(tmp_path):
    r = await run_shell("for i in $(seq 1 3000); do printf '\\033[1m%d\\033[0m\\n' $i; done", str(tmp_path),
                        sanitize=True)
    assert r.truncated and r.output.startswith("1002\n")
    with open(r.full_output_path) as f:
        assert f.read() == "".join(f"{i}\n" for i in range(1, 3001))
    os.unlink(r.full_output_path)


def test_accumulator_decodes_split_characters_and_bounds_memory():
    acc = OutputAccumulator(max_lines=10, max_bytes=100)
    data = "é€😀\n".encode() * 200
    for i in range(0, len(data), 3):  # every multi-byte character gets split somewhere
        acc.append(data[i:i + 3])
    acc.finish()
    snap = acc.snapshot(persist_if_truncated=True)
    assert snap.truncation.truncated and snap.content == "é€😀\n" * 9
    assert snap.truncation.totalLines == 201 and snap.truncation.totalBytes == len(data)
    assert acc._tail_bytes <= 4 * 100  # the rolling tail stays small
    acc.close()
    with open(snap.full_output_path, "rb") as f:
        assert f.read() == data
    os.unlink(snap.full_output_path)


def test_accumulator_without_truncation_writes_no_file():
    acc = OutputAccumulator()
    acc.append(b"small\n")
    acc.finish()
    snap = acc.snapshot(persist_if_truncated=True)
    assert snap.full_output_path is None and snap.content == "small\n" and not snap.truncation.truncated


def test_shell_resolution():
    assert get_shell_config() == ("/bin/bash", ["-c"]) if os.path.exists("/bin/bash") else True
    assert get_shell_config("/bin/sh") == ("/bin/sh", ["-c"])
