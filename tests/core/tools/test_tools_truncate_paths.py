import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pisces.core.tools.paths import expand_path, node_error_message, resolve_read_path, resolve_to_cwd
from pisces.core.tools.truncate import format_size, js_number, tail_bytes, truncate_head, truncate_line, truncate_tail


def test_format_size():
    assert format_size(0) == "0B"
    assert format_size(1023) == "1023B"
    assert format_size(1024) == "1.0KB"
    assert format_size(51200) == "50.0KB"
    assert format_size(60000) == "58.6KB"
    assert format_size(10 * 1024 * 1024) == "10.0MB"


@pytest.mark.parametrize("value,text", [(0.0, "0"), (2.0, "2"), (0.5, "0.5"), (1e-7, "1e-7"), (1e21, "1e+21"),
                                        (1e20, "100000000000000000000"), (1e-6, "0.000001"), (-3.25, "-3.25"),
                                        (30, "30")])
def test_js_number(value, text):
    assert js_number(value) == text


def test_truncate_head_by_lines_and_bytes():
    content = "\n".join(f"line{i}" for i in range(1, 3001))
    r = truncate_head(content)
    assert r.truncated and r.truncatedBy == "lines"
    assert r.outputLines == 2000 and r.totalLines == 3000
    assert r.content.split("\n")[-1] == "line2000"
    big = "\n".join("y" * 100 for _ in range(1000))
    r = truncate_head(big)
    assert r.truncatedBy == "bytes" and r.outputLines == 506 and r.outputBytes == 506 * 101 - 1
    assert not r.lastLinePartial


def test_truncate_head_first_line_too_long():
    r = truncate_head("x" * 60000 + "\nshort")
    assert r.content == "" and r.firstLineExceedsLimit and r.outputLines == 0


def test_truncate_tail_keeps_end_and_partial_last_line():
    content = "\n".join(str(i) for i in range(1, 3001)) + "\n"
    r = truncate_tail(content)
    assert r.totalLines == 3001 and r.outputLines == 2000
    assert r.content.startswith("1002\n") and r.content.endswith("3000\n")
    r = truncate_tail("é" * 30000)  # 60000 bytes, one line
    assert r.lastLinePartial and r.outputBytes == 51200 and r.content == "é" * 25600


def test_tail_bytes_cuts_on_character_boundary():
    assert tail_bytes("a€€", 4) == "€"  # € is 3 bytes: 5 bytes would split it
    assert tail_bytes("abc", 10) == "abc"


def test_truncate_line():
    assert truncate_line("abc") == ("abc", False)
    text, cut = truncate_line("z" * 600)
    assert cut and text == "z" * 500 + "... [truncated]"


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="ab\né日😀", max_size=80), st.integers(1, 6), st.integers(1, 40))
def test_truncation_invariants(content, max_lines, max_bytes):
    for r in (truncate_head(content, max_lines, max_bytes), truncate_tail(content, max_lines, max_bytes)):
        assert r.totalLines == len(content.split("\n"))
        assert r.totalBytes == len(content.encode())
        assert r.outputBytes == len(r.content.encode())
        if not r.truncated:
            assert r.content == content
        else:
            assert r.outputLines <= max_lines and r.outputBytes <= max_bytes
    head = truncate_head(content, max_lines, max_bytes)
    if head.truncated and not head.firstLineExceedsLimit:
        assert content.startswith(head.content)
    tail = truncate_tail(content, max_lines, max_bytes)
    assert content.endswith(tail.content)


def test_expand_and_resolve(tmp_path):
    home = os.path.expanduser("~")
    assert expand_path("~") == home
    assert expand_path("~/x") == home + "/x"
    assert expand_path("@src/a.py") == "src/a.py"
    assert expand_path("a\u00a0b") == "a b"
    assert resolve_to_cwd("sub/../f.txt", str(tmp_path)) == str(tmp_path / "f.txt")
    assert resolve_to_cwd("/abs/x", str(tmp_path)) == "/abs/x"
    assert resolve_to_cwd(".", str(tmp_path)) == str(tmp_path)


def test_resolve_read_path_macos_variants(tmp_path):
    real = tmp_path / "Screenshot 2024-01-01 at 10.00.00\u202fAM.png"
    real.write_bytes(b"x")
    assert resolve_read_path("Screenshot 2024-01-01 at 10.00.00 AM.png", str(tmp_path)) == str(real)
    curly = tmp_path / "Capture d\u2019écran.png"
    curly.write_bytes(b"x")
    assert resolve_read_path("Capture d'écran.png", str(tmp_path)) == str(curly)


def test_node_error_message(tmp_path):
    missing = str(tmp_path / "nope")
    try:
        os.stat(missing)
    except OSError as exc:
        assert node_error_message(exc, "access", missing) == f"ENOENT: no such file or directory, access '{missing}'"


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet="ab\né日😀", max_size=120), st.integers(0, 8), st.integers(1, 40))
def test_truncate_head_splits_only_the_head_with_the_same_result(content, max_lines, max_bytes):
    """truncate_head splits no more than the head it can keep; the answer is that of splitting it all."""
    from pisces.core.tools.truncate import head_from_lines, utf8_len

    lines = content.split("\n")
    if len(lines) <= max_lines and utf8_len(content) <= max_bytes:
        assert not truncate_head(content, max_lines, max_bytes).truncated
        return
    expected = head_from_lines(lines, len(lines), utf8_len(content), max_lines, max_bytes)
    assert truncate_head(content, max_lines, max_bytes) == expected
