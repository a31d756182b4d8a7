"""grep and find give their results in ripgrep's ``--sort path`` order, and the match limit keeps the same
matches, whichever way they got there: grep's parallel rg run sorted afterwards, its ``--sort path`` rerun
when matches are many, find's sort of NUL-separated keys and its one-regex match of simple name globs."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tools_testutil import text_of

from pisces.core.tools import grep as grep_module
from pisces.core.tools.find import FindTool, compile_find_pattern, format_find, match_paths, match_paths_listing
from pisces.core.tools.grep import GrepTool, find_rg

RG = find_rg()
needs_rg = pytest.mark.skipif(RG is None, reason="ripgrep not installed")

# names whose byte order differs from the order of their paths as strings ("a-b" < "a/" < "a.b" as strings,
# but a depth-first walk lists a/ first), upper case before lower, non-ASCII last
_NAMES = ["a", "a-b", "a.b", "a b", "a0", "A", "B", "_u", "z", "\u00e9", "a.txt"]


def _tricky_tree(root, files_per_dir: int = 3) -> None:
    """~130 files over nested directories with tricky names; each file holds "needle" on a few lines."""
    n = 0
    for top in _NAMES:
        for sub in ["", "a", "a-b", "a.b"]:
            d = root / top / sub if sub else root / top
            d.mkdir(parents=True, exist_ok=True)
            for i in range(files_per_dir):
                n += 1
                lines = [f"line {k}" for k in range(8)]
                for k in range(1 + n % 3):
                    lines[(k * 3 + n) % 8] = f"needle {n} {k}"
                (d / f"f{i}{'.txt' if i % 2 else '-x'}").write_text("\n".join(lines) + "\n")
    (root / ".gitignore").write_text("ignored/\n")
    (root / ".git").mkdir()
    (root / "ignored").mkdir()
    (root / "ignored/f.txt").write_text("needle ignored\n")
    # binary: a NUL in the first block (rg skips the file), and one past the first 64 KiB (rg reports the
    # matches before the block that holds it)
    (root / "bin1.dat").write_bytes(b"needle bin1\n\x00rest\n")
    (root / "bin2.dat").write_bytes(b"needle bin2 early\n" + b"filler line\n" * 20000 + b"\x00 needle late\n")


def _rg_sorted(root, pattern: str) -> list[tuple[str, int]]:
    """(path relative to root, line) of every match, as bare ``rg --sort path`` reports them."""
    out = subprocess.run([RG, "--json", "--line-number", "--color=never", "--hidden", "--sort", "path", "--",
                          pattern, str(root)], capture_output=True, check=False).stdout
    found = []
    for line in out.splitlines():
        event = json.loads(line)
        if event["type"] == "match":
            path = os.path.relpath(event["data"]["path"]["text"], root)
            found.append((path, event["data"]["line_number"]))
    return found


def _shown(text: str) -> list[tuple[str, int]]:
    """(path, line) of each match line of grep's output."""
    rows = []
    for line in text.split("\n\n[")[0].split("\n"):
        path, number, _ = line.split(":", 2)
        rows.append((path, int(number)))
    return rows


@needs_rg
@pytest.mark.parametrize("limit", [1, 4, 37, 150, 100_000])
async def test_grep_order_and_limit_are_those_of_rg_sort_path_in_every_mode(tmp_path, run, monkeypatch, limit):
    _tricky_tree(tmp_path)
    expected = _rg_sorted(tmp_path, "needle")
    assert len(expected) > 200 and ("bin2.dat", 1) in expected  # the tree is what the test needs
    assert not any(p.startswith(("ignored/", "bin1.dat")) for p, _ in expected)
    results = {}
    # default; always the parallel run sorted here; always the --sort path rerun
    for mode, factor in (("default", grep_module.UNSORTED_MATCHES_PER_LIMIT), ("unsorted", 10**9),
                         ("rerun", 0)):
        monkeypatch.setattr(grep_module, "UNSORTED_MATCHES_PER_LIMIT", factor)
        results[mode] = await run(GrepTool(str(tmp_path), rg_path=RG))({"pattern": "needle", "limit": limit})
    text = text_of(results["default"])
    assert _shown(text) == expected[:limit]
    assert (f"[{limit} matches limit reached." in text) == (len(expected) >= limit)
    for mode in ("unsorted", "rerun"):
        assert text_of(results[mode]) == text
        assert results[mode].details == results["default"].details


@needs_rg
async def test_grep_rerun_when_matches_are_many(tmp_path, run, monkeypatch):
    """Over UNSORTED_MATCHES_PER_LIMIT times the limit, the parallel run stops and rg runs again sorted."""
    _tricky_tree(tmp_path)
    calls = []
    real = grep_module._run_rg

    async def spy(args, *rest):
        result = await real(args, *rest)
        calls.append(("--sort" in args, result.stopped))
        return result

    monkeypatch.setattr(grep_module, "_run_rg", spy)
    tool = run(GrepTool(str(tmp_path), rg_path=RG))
    await tool({"pattern": "needle", "limit": 1000})  # ~260 matches: all taken from the parallel run
    assert calls == [(False, False)]
    calls.clear()
    r = await tool({"pattern": "needle", "limit": 5})
    assert calls == [(False, True), (True, True)]
    assert _shown(text_of(r)) == _rg_sorted(tmp_path, "needle")[:5]
    calls.clear()
    await tool({"pattern": "needle", "path": "a/f0-x"})  # one file: a single run, nothing to sort
    assert calls == [(False, False)]


@needs_rg
async def test_grep_sorted_output_matches_the_python_fallback(tmp_path, run):
    _tricky_tree(tmp_path, files_per_dir=1)
    for p in (tmp_path / "bin1.dat", tmp_path / "bin2.dat"):
        p.unlink()  # where rg's binary handling stops is its buffer's business; compared above
    params = {"pattern": "needle", "limit": 40}
    with_rg = await run(GrepTool(str(tmp_path), rg_path=RG))(dict(params))
    python = await run(GrepTool(str(tmp_path), rg_path=None))(dict(params))
    assert text_of(with_rg) == text_of(python)


@needs_rg
async def test_find_order_matches_the_python_walk(tmp_path, run):
    _tricky_tree(tmp_path, files_per_dir=2)
    for pattern in ("*", "*.txt", "*-x", "a*", "a", "A", "*.B", "**/a.b/*"):
        with_rg = await run(FindTool(str(tmp_path), rg_path=RG))({"pattern": pattern})
        python = await run(FindTool(str(tmp_path), rg_path=None))({"pattern": pattern})
        assert text_of(with_rg) == text_of(python), pattern
        assert with_rg.details == python.details


# -- find's matching against a reference: each name or path matched with the glob, sorted with a key ------------

def _reference(files: list[str], root: str, pattern: str) -> list[str]:
    glob, full = compile_find_pattern(pattern)
    prefix = root.rstrip("/") + "/"

    def subject(path: str) -> str:
        return prefix + path if full else path.rsplit("/", 1)[-1]

    dirs = {f[:i] for f in files for i in range(len(f)) if f[i] == "/"}
    hits = [f for f in files if glob.match(subject(f))]
    hits += [d + "/" for d in dirs if glob.match(subject(d))]
    return sorted(hits, key=lambda p: p.rstrip("/").replace("/", "\x00"))


_PATTERNS = ["*.py", "*.aaaaaaaaaaaaaaaaaaaaa", "*.PY", "*a", "a*", "A*", "a", "a.b", "*-b", "x y", "*", "*.{py,b}", "?", "**/a/*.py",
             "a/*", "*.+", "(*", "*[b]"]
_ASCII = ["a", "A", "b", ".", "-", " ", "py", "PY", "+", "(", "x", "y"]
_ANY = _ASCII + ["\u00e9", "\u212a", "\n"]  # not ASCII (Unicode case folding is RE2's), a newline in a name


def _paths(pieces: list[str]) -> st.SearchStrategy[list[str]]:
    segment = st.lists(st.sampled_from(pieces), min_size=1, max_size=3).map("".join)
    return st.lists(st.lists(segment, min_size=1, max_size=4).map("/".join), max_size=12, unique=True)


@pytest.mark.parametrize("pattern", _PATTERNS)
@pytest.mark.parametrize("pieces", [_ASCII, _ANY], ids=["ascii", "any"])
@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_find_matching_gives_the_reference(pattern, pieces, data):
    paths = data.draw(_paths(pieces))
    # a list of files: no path is also a directory of another
    files = [p for p in paths if not any(q.startswith(p + "/") for q in paths)]
    assert match_paths(files, "/root", pattern) == _reference(files, "/root", pattern)


@pytest.mark.parametrize("limit", [1, 2, 3, 10])
def test_format_find_from_a_listing_or_a_list(limit):
    files = ["b/x.py", "a.py", "a/b.py", "a-b.py", "c\nd.py"]
    listed = match_paths_listing(files[:4], "/r", "*.py")
    assert isinstance(listed, str)
    assert listed == "a/b.py\na-b.py\na.py\nb/x.py"
    assert format_find(listed, limit) == format_find(listed.split("\n"), limit)
    with_newline = match_paths_listing(files, "/r", "*.py")  # a name with a newline: a list
    assert with_newline == ["a/b.py", "a-b.py", "a.py", "b/x.py", "c\nd.py"]
    text, details = format_find(with_newline, limit)
    assert (details is not None) == (limit <= 5)


@pytest.mark.parametrize("tool_class", [FindTool, GrepTool])
async def test_an_abort_stops_the_rg_process(tmp_path, run, tool_class):
    """find runs rg from a worker thread, grep from the event loop: an abort ends the call at once and the
    process too. A stand-in for rg that never ends writes its pid first."""
    import asyncio

    from pisces.agent.types import ToolError
    from pisces.ai.abort import AbortSignal

    fake = tmp_path / "rg"
    pid_file = tmp_path / "pid"
    fake.write_text(f"#!/bin/sh\necho $$ > {pid_file}\nexec sleep 600\n")
    fake.chmod(0o755)
    (tmp_path / "d").mkdir()
    signal = AbortSignal()
    call = asyncio.ensure_future(run(tool_class(str(tmp_path / "d"), rg_path=str(fake)))({"pattern": "x"}, signal))
    for _ in range(600):  # up to 30 s on a busy machine
        if pid_file.exists() and pid_file.read_text().strip():
            break
        await asyncio.sleep(0.05)
    pid = int(pid_file.read_text())
    gone = False
    try:
        signal.abort()
        with pytest.raises(ToolError, match="^Operation aborted$"):
            await asyncio.wait_for(call, 30)
        for _ in range(600):  # the process ends (and is reaped) soon after
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                gone = True
                break
            await asyncio.sleep(0.05)
        else:
            pytest.fail("rg still running after the abort")
    finally:
        if not gone:  # the stand-in never outlives the test, whatever failed
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass
