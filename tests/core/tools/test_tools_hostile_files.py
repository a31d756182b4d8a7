"""The file tools against hostile paths and patterns: FIFOs, devices, huge sparse files, backtracking globs
and regexes, non-UTF-8 files, full disks, unreadable directories.

Scenarios that hang or allocate without bound when the guarantee is broken run in a child process with a
time-out and an address-space limit (tests/bounded.py), so that a regression is a failed assertion.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import threading

import pytest
from tools_testutil import text_of

from bounded import run_python
from pisces.agent.types import ToolError
from pisces.ai.abort import AbortSignal
from pisces.core.tools.edit import EditTool
from pisces.core.tools.grep import GrepTool, find_rg
from pisces.core.tools.read import ReadTool
from pisces.core.tools.write import WriteTool

RG = find_rg()
BACKTRACKING_GLOB = "*a*a*a*a*a*a*a*a*b"


# ---------------------------------------------------------------------------------------------
# Linear-time globs and regexes
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("lister", ["rg", "python"])
def test_find_with_a_backtracking_glob_finishes(tmp_path, lister):
    if lister == "rg" and RG is None:
        pytest.skip("ripgrep not installed")
    for i in range(20):
        (tmp_path / ("a" * 240 + f"{i:02d}")).write_text("x")
    (tmp_path / ("a" * 30 + "b")).write_text("x")
    out = run_python(f"""
        from pisces.core.tools.find import FindTool
        tool = FindTool({str(tmp_path)!r}, rg_path={'None' if lister == 'python' else repr(RG)})
        report(call(tool, {{"pattern": {BACKTRACKING_GLOB!r}}}))
        report(call(tool, {{"pattern": "**/" + {BACKTRACKING_GLOB!r}}}))
    """)
    r = out.check()
    assert r == {"ok": True, "text": "a" * 30 + "b", "details": None}
    assert ("a" * 30 + "b") in out.stdout.splitlines()[0]


def test_ignore_files_with_backtracking_globs_do_not_freeze_the_walk(tmp_path):
    (tmp_path / ".ignore").write_text(BACKTRACKING_GLOB + "\n")
    (tmp_path / ("a" * 250)).write_text("needle\n")
    (tmp_path / ("a" * 20 + "b")).write_text("needle\n")
    out = run_python(f"""
        from pisces.core.tools.grep import GrepTool
        report(call(GrepTool({str(tmp_path)!r}, rg_path=None), {{"pattern": "needle"}}))
    """)
    assert out.check() == {"ok": True, "text": "a" * 250 + ":1: needle", "details": None}


def test_grep_without_ripgrep_is_linear_on_a_catastrophic_regex(tmp_path):
    (tmp_path / "a.txt").write_text("a" * 200_000 + "\n" + "aac\n")
    out = run_python(f"""
        from pisces.core.tools.grep import GrepTool
        tool = GrepTool({str(tmp_path)!r}, rg_path=None)
        report(call(tool, {{"pattern": "(a|aa)*c"}}))
    """)
    assert out.check() == {"ok": True, "text": "a.txt:2: aac", "details": None}


async def test_grep_fallback_refuses_what_ripgrep_refuses(tmp_path, run):
    (tmp_path / "a.txt").write_text("abc\n")
    with pytest.raises(ToolError, match=r"^regex parse error:\n    \(\?=a\)b\nerror: "):
        await run(GrepTool(str(tmp_path), rg_path=None))({"pattern": "(?=a)b"})


async def test_grep_fallback_streams_a_file_with_an_endless_line(tmp_path, run):
    big = tmp_path / "big.txt"
    with open(big, "wb") as f:
        f.write(b"first needle\n")
        f.write(b"x" * (9 << 20))  # longer than LINE_CAP: searched in its head, the rest skipped
        f.write(b"\nlast needle\n")
    r = await run(GrepTool(str(tmp_path), rg_path=None))({"pattern": "needle", "path": "big.txt"})
    assert text_of(r) == "big.txt:1: first needle\nbig.txt:3: last needle"


# ---------------------------------------------------------------------------------------------
# FIFOs, devices, /dev/stdin, huge files
# ---------------------------------------------------------------------------------------------
SPECIAL = ["fifo", "/dev/zero", "/dev/urandom", "/dev/stdin", "link-to-zero"]


@pytest.mark.parametrize("target", SPECIAL)
@pytest.mark.parametrize("tool", ["read", "edit", "write", "grep-rg", "grep-python"])
def test_special_files_give_a_clear_error_at_once(tmp_path, tool, target):
    if tool == "grep-rg" and RG is None:
        pytest.skip("ripgrep not installed")
    os.mkfifo(tmp_path / "fifo")
    os.symlink("/dev/zero", tmp_path / "link-to-zero")
    calls = {
        "read": f"ReadTool(cwd), {{'path': {target!r}}}",
        "edit": f"EditTool(cwd), {{'path': {target!r}, 'edits': [{{'oldText': 'a', 'newText': 'b'}}]}}",
        "write": f"WriteTool(cwd), {{'path': {target!r}, 'content': 'x'}}",
        "grep-rg": f"GrepTool(cwd, rg_path={RG!r}), {{'pattern': 'x', 'path': {target!r}}}",
        "grep-python": f"GrepTool(cwd, rg_path=None), {{'pattern': 'x', 'path': {target!r}}}",
    }
    # stdin of the child is a pipe that stays open: a read of /dev/stdin would wait for ever
    out = run_python(f"""
        from pisces.core.tools.read import ReadTool
        from pisces.core.tools.edit import EditTool
        from pisces.core.tools.write import WriteTool
        from pisces.core.tools.grep import GrepTool
        cwd = {str(tmp_path)!r}
        report(call({calls[tool]}))
    """, stdin=None, memory=768 << 20)
    r = out.check()
    verb = {"read": "read", "edit": "edit", "write": "write"}.get(tool, "search")
    assert r["ok"] is False, r
    assert r["error"].startswith(f"Cannot {verb} {target}: it is a "), r
    assert "not a regular file" in r["error"]
    assert stat.S_ISFIFO(os.lstat(tmp_path / "fifo").st_mode)  # never replaced by a regular file
    assert os.readlink(tmp_path / "link-to-zero") == "/dev/zero"


def test_edit_of_a_huge_sparse_file_is_refused_without_loading_it(tmp_path):
    huge = tmp_path / "huge.txt"
    with open(huge, "wb") as f:
        f.truncate(2 << 30)
    out = run_python(f"""
        from pisces.core.tools.edit import EditTool
        report(call(EditTool({str(tmp_path)!r}), {{"path": "huge.txt", "edits": [{{"oldText": "a", "newText": "b"}}]}}))
    """, memory=768 << 20)
    r = out.check()
    assert r["ok"] is False
    assert r["error"].startswith("Cannot edit huge.txt: it is larger than 32 MiB")
    assert os.path.getsize(huge) == 2 << 30


def test_read_of_a_huge_sparse_file_is_bounded_in_memory(tmp_path):
    huge = tmp_path / "huge.txt"
    with open(huge, "wb") as f:
        f.write(b"line one\nline two\n")
        f.truncate(2 << 30)
    out = run_python(f"""
        from pisces.core.tools.read import ReadTool
        report(call(ReadTool({str(tmp_path)!r}), {{"path": "huge.txt", "limit": 2}}))
    """, memory=768 << 20, timeout=120)
    r = out.check()
    assert r == {"ok": True, "text": "line one\nline two\n\n[1 more lines in file. Use offset=3 to continue.]",
                 "details": None}


def _tool_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("pisces-tool")]


async def test_abort_stops_the_worker_of_a_long_read(tmp_path):
    """An abort ends the call at once and the worker thread itself stops soon after (it checks between
    chunks): nothing keeps scanning a 64 GiB sparse file in the background."""
    huge = tmp_path / "huge.txt"
    with open(huge, "wb") as f:
        f.truncate(64 << 30)
    before = set(threading.enumerate())
    signal = AbortSignal()
    import asyncio

    task = asyncio.ensure_future(ReadTool(str(tmp_path)).execute("c", {"path": "huge.txt"}, signal, lambda u: None))
    for _ in range(3000):  # bounded wait for the worker to start
        if _tool_threads() or task.done():
            break
        await asyncio.sleep(0.01)
    assert _tool_threads(), "the read's worker thread never started"
    signal.abort()
    with pytest.raises(ToolError, match="^Operation aborted$"):
        await asyncio.wait_for(task, 30)
    for _ in range(3000):
        if not (set(threading.enumerate()) - before):
            break
        await asyncio.sleep(0.01)
    assert not (set(threading.enumerate()) - before), "a worker thread outlived the aborted call"


def test_aborted_calls_on_fifos_never_exhaust_the_workers(tmp_path):
    """Twenty reads of FIFOs, each aborted, then a plain read: it still answers (the default executor has
    six threads on two cores; blocked workers used to take them all)."""
    for i in range(20):
        os.mkfifo(tmp_path / f"fifo{i}")
    (tmp_path / "plain.txt").write_text("still here\n")
    out = run_python(f"""
        from pisces.core.tools.read import ReadTool
        tool = ReadTool({str(tmp_path)!r})
        async def main():
            for i in range(20):
                signal = AbortSignal()
                task = asyncio.ensure_future(tool.execute("c", {{"path": f"fifo{{i}}"}}, signal, lambda u: None))
                await asyncio.sleep(0)
                signal.abort()
                try:
                    await task
                except Exception:
                    pass
            r = await tool.execute("c", {{"path": "plain.txt"}}, AbortSignal(), lambda u: None)
            return r.content[0].text
        report(asyncio.run(main()))
    """)
    assert out.check() == "still here\n"


# ---------------------------------------------------------------------------------------------
# Atomic writes, modes, encodings
# ---------------------------------------------------------------------------------------------
async def test_write_and_edit_keep_mode_and_symlink(tmp_path, run):
    target = tmp_path / "real.txt"
    target.write_text("one two\n")
    os.chmod(target, 0o640)
    os.symlink("real.txt", tmp_path / "link.txt")
    await run(EditTool(str(tmp_path)))({"path": "link.txt", "edits": [{"oldText": "two", "newText": "2"}]})
    assert os.path.islink(tmp_path / "link.txt")
    assert target.read_text() == "one 2\n"
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o640
    await run(WriteTool(str(tmp_path)))({"path": "link.txt", "content": "three\n"})
    assert os.path.islink(tmp_path / "link.txt") and target.read_text() == "three\n"
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o640
    assert sorted(os.listdir(tmp_path)) == ["link.txt", "real.txt"]  # no temporary file left


def test_write_still_refuses_a_read_only_file(tmp_path):
    """The atomic rename could replace a file its owner made read-only; it is refused as before (EACCES)."""
    f = tmp_path / "ro.txt"
    f.write_text("keep\n")
    os.chmod(f, 0o444)
    prefix = None
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("running as root without setpriv")
        prefix = ["setpriv", "--bounding-set=-dac_override,-dac_read_search"]
    out = run_python(f"""
        from pisces.core.tools.write import WriteTool
        report(call(WriteTool({str(tmp_path)!r}), {{"path": "ro.txt", "content": "x"}}))
    """, argv_prefix=prefix)
    r = out.check()
    assert r["ok"] is False and r["error"].startswith("EACCES: permission denied, open ")
    assert f.read_text() == "keep\n"


async def test_edit_of_a_latin1_file_keeps_every_byte_it_did_not_edit(tmp_path, run):
    original = "Café crème\nprix: 5 €\nfin\n".encode("cp1252") + b"\x81\xff\n"
    f = tmp_path / "latin1.txt"
    f.write_bytes(original)
    r = await run(EditTool(str(tmp_path)))({"path": "latin1.txt", "edits": [{"oldText": "prix: 5", "newText": "prix: 6"}]})
    assert f.read_bytes() == original.replace(b"prix: 5", b"prix: 6")
    assert text_of(r) == "Successfully replaced 1 block(s) in latin1.txt."
    assert "\ufffd" in r.details["diff"] and "\udce9" not in r.details["diff"]
    r = await run(EditTool(str(tmp_path)))({"path": "latin1.txt", "edits": [{"oldText": "fin", "newText": "fín"}]})
    assert f.read_bytes() == original.replace(b"prix: 5", b"prix: 6").replace(b"fin", "fín".encode("utf-8"))
    assert "is not valid UTF-8" in text_of(r) and "mixes two encodings" in text_of(r)
    with pytest.raises(ToolError, match="not valid UTF-8"):
        await run(EditTool(str(tmp_path)))({"path": "latin1.txt", "edits": [{"oldText": "Caf\ufffd", "newText": "x"}]})


def _fill_errno(code: int):
    """An ``os.write`` that fails with ``code`` for files under a directory, as a full disk would."""
    real_write = os.write

    def write(fd, data):
        try:
            where = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            where = ""
        if where.startswith(_fill_errno.root) and len(data) > 0:
            raise OSError(code, os.strerror(code))
        return real_write(fd, data)
    return write


@pytest.mark.parametrize("tool", ["write", "edit"])
async def test_a_failing_write_leaves_the_original_intact_injected(tmp_path, run, monkeypatch, tool):
    f = tmp_path / "keep.txt"
    f.write_text("head\n" + "precious\n" * 100)
    _fill_errno.root = str(tmp_path)
    monkeypatch.setattr(os, "write", _fill_errno(errno.ENOSPC))
    params = {"path": "keep.txt", "content": "new\n" * 1000} if tool == "write" else \
        {"path": "keep.txt", "edits": [{"oldText": "head", "newText": "x" * 5000}]}
    cls = WriteTool if tool == "write" else EditTool
    with pytest.raises(ToolError, match=r"^ENOSPC: no space left on device, write '.*keep\.txt' \(the file was left "
                                        r"as it was\)$"):
        await run(cls(str(tmp_path)))(params)
    monkeypatch.undo()
    assert f.read_text() == "head\n" + "precious\n" * 100
    assert os.listdir(tmp_path) == ["keep.txt"]


def _unshare_prefix() -> list[str] | None:
    """A wrapper that gives the child its own mount namespace (root, or an unprivileged user namespace)."""
    if shutil.which("unshare") is None or not sys.platform.startswith("linux"):
        return None
    for prefix in (["unshare", "--mount"], ["unshare", "--user", "--map-root-user", "--mount"]):
        probe = subprocess.run([*prefix, "true"], capture_output=True)
        if probe.returncode == 0:
            return prefix
    return None


@pytest.mark.parametrize("tool", ["write", "edit"])
def test_a_full_disk_leaves_the_original_intact_on_a_real_tmpfs(tool):
    prefix = _unshare_prefix()
    if prefix is None:
        pytest.skip("no mount namespace available here (unshare); the injected-ENOSPC test covers this")
    mnt = tempfile.mkdtemp(prefix="pisces-full-disk-")
    try:
        out = run_python(f"""
            import subprocess
            mnt = {mnt!r}
            subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", mnt], check=True)
            from pisces.core.tools.write import WriteTool
            from pisces.core.tools.edit import EditTool
            path = os.path.join(mnt, "keep.txt")
            with open(path, "w") as f:
                f.write("head\\n" + "precious\\n" * 4000)      # 36 KB
            st = os.statvfs(mnt)
            fd = os.open(os.path.join(mnt, "filler"), os.O_WRONLY | os.O_CREAT)
            os.write(fd, b"x" * (st.f_bavail * st.f_frsize - 65536))  # leave 64 KB: less than the new content
            os.close(fd)
            if {tool!r} == "write":
                r = call(WriteTool(mnt), {{"path": "keep.txt", "content": "new content\\n" * 20000}})
            else:
                r = call(EditTool(mnt), {{"path": "keep.txt",
                                          "edits": [{{"oldText": "head", "newText": "y" * 200000}}]}})
            with open(path) as f:
                intact = f.read() == "head\\n" + "precious\\n" * 4000
            report({{"result": r, "intact": intact, "files": sorted(os.listdir(mnt))}})
        """, argv_prefix=prefix)
        r = out.check()
    finally:
        os.rmdir(mnt)
    assert r["result"]["ok"] is False
    assert r["result"]["error"].startswith("ENOSPC: no space left on device, write ")
    assert r["intact"] is True
    assert r["files"] == ["filler", "keep.txt"]


# ---------------------------------------------------------------------------------------------
# Unreadable directories (ripgrep and the fallback)
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("backend", ["rg", "python"])
def test_one_unreadable_directory_does_not_discard_the_matches(backend):
    if backend == "rg" and RG is None:
        pytest.skip("ripgrep not installed")
    root = tempfile.mkdtemp(prefix="pisces-unreadable-")
    try:
        os.chmod(root, 0o755)
        for name in ("a", "b", "c"):
            os.makedirs(os.path.join(root, name))
            with open(os.path.join(root, name, "f.txt"), "w") as f:
                f.write("needle\n")
        os.chmod(os.path.join(root, "b"), 0)
        prefix = None
        if os.geteuid() == 0:  # root reads everything: search without the capabilities that allow it
            if shutil.which("setpriv") is None:
                pytest.skip("running as root without setpriv: cannot make a directory unreadable")
            prefix = ["setpriv", "--bounding-set=-dac_override,-dac_read_search"]
        out = run_python(f"""
            from pisces.core.tools.grep import GrepTool
            report(call(GrepTool({root!r}, rg_path={RG if backend == 'rg' else None!r}), {{"pattern": "needle"}}))
        """, argv_prefix=prefix, cwd=root)
        r = out.check()
    finally:
        os.chmod(os.path.join(root, "b"), 0o755)
        shutil.rmtree(root)
    assert r["ok"] is True, r
    lines = r["text"].split("\n")
    assert lines[:2] == ["a/f.txt:1: needle", "c/f.txt:1: needle"]
    assert lines[2] == ""
    assert lines[3].startswith("[Not searched: ") and "b: Permission denied (os error 13)]" in lines[3]
    assert len(r["details"]["searchErrors"]) == 1


# ---------------------------------------------------------------------------------------------
# The bash tool's full-output log
# ---------------------------------------------------------------------------------------------
async def test_full_output_logs_are_private(run):
    from pisces.core.tools.bash import BashTool

    r = await run(BashTool(tempfile.gettempdir()))({"command": "seq 1 100000"})
    path = r.details["fullOutputPath"]
    st = os.lstat(path)
    assert os.path.dirname(path) == tempfile.gettempdir()
    assert stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600 and st.st_uid == os.geteuid()
    with open(path, "rb") as f:
        assert f.read() == "".join(f"{i}\n" for i in range(1, 100001)).encode()
    os.unlink(path)


def test_a_temp_name_taken_first_is_never_followed_or_reused(tmp_path):
    """A name someone created first in the shared temp directory (a symlink to a file of the user's, a
    world-readable file) is refused, never written through; the bash log then says it could not be created."""
    target = tmp_path / "victim.txt"
    target.write_text("keep me")
    for trap in ("symlink", "file"):
        tmp = tmp_path / trap
        tmp.mkdir()
        if trap == "symlink":
            os.symlink(target, tmp / "x.log")
        else:
            (tmp / "x.log").write_text("squatted")
            os.chmod(tmp / "x.log", 0o666)
        out = run_python(f"""
            import tempfile
            tempfile.tempdir = {str(tmp)!r}
            from pisces.core.safe_open import create_private_file
            try:
                create_private_file("x.log")
                report("created")
            except FileExistsError:
                report("refused")
        """)
        assert out.check() == "refused"
    assert target.read_text() == "keep me"
    assert (tmp_path / "file" / "x.log").read_text() == "squatted"


BIG_OUTPUT = "head -c 3000000 /dev/zero | tr '\\\\0' 'x' | fold -w 100"


def test_full_output_log_on_a_full_temp_dir_says_so_on_a_real_tmpfs():
    prefix = _unshare_prefix()
    if prefix is None:
        pytest.skip("no mount namespace available here (unshare); the injected-ENOSPC test covers this")
    mnt = tempfile.mkdtemp(prefix="pisces-full-tmp-")
    try:
        out = run_python(f"""
            import subprocess, tempfile
            subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", {mnt!r}], check=True)
            tempfile.tempdir = {mnt!r}
            from pisces.core.tools.bash import BashTool
            r = call(BashTool("/"), {{"command": {BIG_OUTPUT!r}}})
            size = os.path.getsize(r["details"]["fullOutputPath"]) if r.get("details") else -1
            report({{"result": r, "size": size}})
        """, argv_prefix=prefix)
        r = out.check()
    finally:
        os.rmdir(mnt)
    result = r["result"]
    assert result["ok"] is True, result
    error = result["details"]["fullOutputError"]
    assert error.startswith("it is incomplete: writing it failed after ") and "ENOSPC" in error
    assert f"Full output: {result['details']['fullOutputPath']} ({error})]" in result["text"]
    assert 0 < r["size"] < 3_030_000


async def test_full_output_log_write_failure_is_reported_injected(run, monkeypatch):
    from pisces.core.tools.bash import BashTool

    _fill_errno.root = os.path.join(tempfile.gettempdir(), "pisces-bash-")
    monkeypatch.setattr(os, "write", _fill_errno(errno.ENOSPC))
    r = await run(BashTool(tempfile.gettempdir()))({"command": "seq 1 100000"})
    monkeypatch.undo()
    assert r.details["fullOutputError"] == ("it is incomplete: writing it failed after 0 bytes (ENOSPC: No space "
                                            "left on device)")
    assert text_of(r).endswith(f"Full output: {r.details['fullOutputPath']} ({r.details['fullOutputError']})]")
    os.unlink(r.details["fullOutputPath"])


class _Zeros:
    """A binary file of ``size`` zero bytes with no newline, counting what is read of it."""

    def __init__(self, size: int) -> None:
        self.size, self.pos = size, 0

    def read(self, n: int = -1) -> bytes:
        n = self.size - self.pos if n < 0 else min(n, self.size - self.pos)
        self.pos += n
        return bytes(n)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None


def test_a_huge_single_line_is_not_read_whole_once_the_output_is_decided():
    from pisces.core.tools.read import SCAN_PAST_OUTPUT, _read_text

    source = _Zeros(2 * 1024**3)  # 2 GB, one line
    text, details = _read_text(source, "big.bin", None, None)
    assert source.pos <= SCAN_PAST_OUTPUT + (1 << 20), f"read {source.pos} bytes of a 2 GB line"
    assert text.startswith("[Line 1 is more than 32.0MB, exceeds 50.0KB limit. Use bash: sed -n '1p' big.bin")
    assert details["truncation"]["firstLineExceedsLimit"] is True


def test_a_long_file_reports_a_lower_bound_once_the_output_is_decided():
    from pisces.core.tools.read import SCAN_PAST_OUTPUT, _read_text

    class Lines(_Zeros):
        def read(self, n: int = -1) -> bytes:
            data = super().read(n)
            return data.replace(b"\0", b"\n")

    source = Lines(1024**3)
    text, _ = _read_text(source, "many.txt", None, None)
    assert source.pos <= SCAN_PAST_OUTPUT + (1 << 20)
    assert text.endswith("[Showing lines 1-2000 of more than 33554433. Use offset=2001 to continue.]")


def test_the_read_tool_on_a_20_gb_sparse_file_ends_at_once(tmp_path):
    """Through the real process: 20 GB of zeros in one line (a sparse file: no disk used). Reading it whole took
    ~1 s a GB; now the tool stops at the output limit (the bound here is generous for a busy machine)."""
    big = tmp_path / "sparse.bin"
    with open(big, "wb") as f:
        f.truncate(20 * 1024**3)
    code = (
        "import asyncio, sys\n"
        "from pisces.core.tools.read import ReadTool\n"
        "r = asyncio.run(ReadTool(sys.argv[1]).execute('c', {'path': 'sparse.bin'}, None, None))\n"
        "print(r.content[0].text[:80])\n"
    )
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("[Line 1 is more than 32.0MB, exceeds 50.0KB limit.")
