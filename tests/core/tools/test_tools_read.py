import base64
import struct
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from msgspec import UNSET
from tools_testutil import text_of

from pisces.agent.types import ToolError
from pisces.ai.abort import AbortSignal
from pisces.ai.types import ImageContent
from pisces.core.tools import read as read_mod
from pisces.core.tools.read import ReadTool, detect_image_mime
from pisces.core.tools.truncate import truncate_head


def tiny_png() -> bytes:
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    ihdr = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    idat = zlib.compress(b"\x00\xff\x00\x00")
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")


async def test_missing_file(tmp_path, run):
    with pytest.raises(ToolError) as err:
        await run(ReadTool(str(tmp_path)))({"path": "missing.txt"})
    assert str(err.value) == f"ENOENT: no such file or directory, access '{tmp_path}/missing.txt'"


async def test_directory(tmp_path, run):
    (tmp_path / "d").mkdir()
    with pytest.raises(ToolError, match="^EISDIR: illegal operation on a directory, read$"):
        await run(ReadTool(str(tmp_path)))({"path": "d"})


async def test_small_file_whole(tmp_path, run):
    (tmp_path / "a.txt").write_text("one\ntwo\n")
    r = await run(ReadTool(str(tmp_path)))({"path": "a.txt"})
    assert text_of(r) == "one\ntwo\n"
    assert r.details is UNSET  # no details, as pi


async def test_offset_and_limit(tmp_path, run):
    (tmp_path / "a.txt").write_text("".join(f"line{i}\n" for i in range(1, 11)))
    tool = run(ReadTool(str(tmp_path)))
    r = await tool({"path": "a.txt", "offset": 3, "limit": 2})
    assert text_of(r) == "line3\nline4\n\n[7 more lines in file. Use offset=5 to continue.]"
    r = await tool({"path": "a.txt", "offset": 10})
    assert text_of(r) == "line10\n"
    with pytest.raises(ToolError, match=r"^Offset 12 is beyond end of file \(11 lines total\)$"):
        await tool({"path": "a.txt", "offset": 12})


async def test_ten_megabyte_file_is_truncated(tmp_path, run):
    lines = [f"{i:07d} " + "x" * 92 for i in range(1, 100_001)]  # 100 bytes + newline each: ~10 MB
    (tmp_path / "big.txt").write_text("\n".join(lines) + "\n")
    tool = run(ReadTool(str(tmp_path)))
    r = await tool({"path": "big.txt"})
    text = text_of(r)
    assert text.endswith("\n\n[Showing lines 1-506 of 100001 (50.0KB limit). Use offset=507 to continue.]")
    assert text.split("\n")[:506] == lines[:506]
    t = r.details["truncation"]
    assert (t["truncated"], t["truncatedBy"], t["totalLines"], t["outputLines"]) == (True, "bytes", 100001, 506)
    assert t["totalBytes"] == 100_000 * 101
    r = await tool({"path": "big.txt", "offset": 99_990})
    assert text_of(r) == "\n".join(lines[99_989:]) + "\n"

    (tmp_path / "short_lines.txt").write_text("".join(f"{i}\n" for i in range(1, 5001)))
    r = await tool({"path": "short_lines.txt"})
    assert text_of(r).endswith("1999\n2000\n\n[Showing lines 1-2000 of 5001. Use offset=2001 to continue.]")


async def test_huge_single_line(tmp_path, run):
    (tmp_path / "one.txt").write_bytes(b"z" * (10 * 1024 * 1024))
    r = await run(ReadTool(str(tmp_path)))({"path": "one.txt"})
    assert text_of(r) == "[Line 1 is 10.0MB, exceeds 50.0KB limit. Use bash: sed -n '1p' one.txt | head -c 51200]"
    assert r.details["truncation"]["firstLineExceedsLimit"] is True


async def test_binary_file_reads_as_replaced_text(tmp_path, run):
    (tmp_path / "blob.bin").write_bytes(bytes(range(256)) * 4)
    r = await run(ReadTool(str(tmp_path)))({"path": "blob.bin"})
    text = text_of(r)
    assert "\ufffd" in text and "\x00" in text  # as pi: UTF-8 with replacement characters
    assert len(text.encode()) <= 51200 + 200


async def test_png_image(tmp_path, run):
    data = tiny_png()
    (tmp_path / "p.png").write_bytes(data)
    (tmp_path / "not-really.png").write_text("plain text")
    tool = run(ReadTool(str(tmp_path)))
    r = await tool({"path": "p.png"})
    assert text_of(r) == "Read image file [image/png]"
    image = r.content[1]
    assert isinstance(image, ImageContent) and image.mimeType == "image/png"
    assert base64.b64decode(image.data) == data
    r = await tool({"path": "not-really.png"})
    assert text_of(r) == "plain text"


def test_detect_image_mime():
    assert detect_image_mime(b"\xff\xd8\xff\xe0rest") == "image/jpeg"
    assert detect_image_mime(b"GIF89a...") == "image/gif"
    assert detect_image_mime(b"RIFF\x00\x00\x00\x00WEBPVP8 ") == "image/webp"
    assert detect_image_mime(b"%PDF-1.4") is None
    assert detect_image_mime(b"") is None


async def test_aborted(tmp_path, run):
    (tmp_path / "a.txt").write_text("x")
    s = AbortSignal()
    s.abort()
    with pytest.raises(ToolError, match="^Operation aborted$"):
        await run(ReadTool(str(tmp_path)))({"path": "a.txt"}, s)


def reference_window(content: str, start: int, end, max_lines: int, max_bytes: int):
    """What pi computes with the whole file in memory."""
    lines = content.split("\n")
    sel = lines[start:end] if end is not None else lines[start:]
    return len(lines), truncate_head("\n".join(sel), max_lines, max_bytes), len(sel)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from([b"a", b"bb", b"\n", "é".encode(), "😀".encode(), b"\r", b"\xff", b"\xe2\x82"]),
                max_size=60).map(b"".join),
       st.integers(0, 8), st.one_of(st.none(), st.integers(0, 8)), st.integers(1, 5), st.integers(1, 30),
       st.integers(1, 9))
def test_streaming_scan_equals_whole_file_read(tmp_path_factory, data, start, limit, max_lines, max_bytes, chunk):
    path = tmp_path_factory.mktemp("scan") / "f.txt"
    path.write_bytes(data)
    content = data.decode("utf-8", "replace")
    end = None if limit is None else start + limit
    old = read_mod._CHUNK
    read_mod._CHUNK = chunk
    try:
        w = read_mod._scan(str(path), start, end, max_lines, max_bytes)
    finally:
        read_mod._CHUNK = old
    total, ref, selected = reference_window(content, start, end, max_lines, max_bytes)
    assert w.total_file_lines == total
    if start >= total:
        return
    assert w.selected_lines == selected
    assert w.selected_bytes == ref.totalBytes
    got = read_mod.head_from_lines(w.kept, w.selected_lines, w.selected_bytes, max_lines, max_bytes) \
        if (w.selected_lines > max_lines or w.selected_bytes > max_bytes) else None
    if got is None:
        assert not ref.truncated and "\n".join(w.kept) == ref.content
    else:
        assert got.to_dict() == ref.to_dict()
