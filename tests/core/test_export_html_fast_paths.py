"""The export's shortcuts give what the plain code gave: JSON escaping with and without the U+2028/U+2029
lead byte, the title escape, the packaged files' text, and an export written in one piece without fsync
(while ``write_atomic`` keeps fsyncing by default)."""

from __future__ import annotations

import html
import os
from pathlib import Path

import pisces.core.export_html as ex
from pisces.ai.types import AssistantMessage, TextContent, Usage, UserMessage
from pisces.core import safe_open
from pisces.core.store import SessionManager


def _reference_safe_json(data: bytes) -> bytes:
    return (data.replace(b"&", b"\\u0026").replace(b"<", b"\\u003c").replace(b">", b"\\u003e")
            .replace("\u2028".encode(), b"\\u2028").replace("\u2029".encode(), b"\\u2029"))


def test_script_safe_json_matches_the_five_replacements():
    samples = ["plain ascii", "a<b>&c", "em\u2014dash only", "sep\u2028and\u2029para <x>", "\u2028", "\u00e9\u2029",
               "\u20ac euro, no separator"]
    for text in samples:
        raw = ex._encoder.encode({"t": text})
        assert ex._script_safe_json(raw) == _reference_safe_json(raw), text
    assert b"\\u2028" in ex._script_safe_json(ex._encoder.encode("x\u2028"))


def test_title_escape_is_html_escape():
    for text in ["<script>alert('x')</script>", 'a "quoted" & \'single\'', "plain", "&amp;<>"]:
        assert ex._escape_html(text) == html.escape(text, quote=True)


def test_packaged_text_reads_as_path_read_text(tmp_path):
    (tmp_path / "f.js").write_bytes(b"a\r\nb\rc\nd\xc3\xa9")
    assert ex._read_text(str(tmp_path), "f.js") == (tmp_path / "f.js").read_text("utf-8")
    here = Path(ex.__file__).resolve().parent
    assert ex._read_text(ex._HERE, "render.js") == (here / "render.js").read_text("utf-8")


def test_export_is_written_whole_without_fsync_and_write_atomic_still_fsyncs(tmp_path, monkeypatch):
    sm = SessionManager.create(str(tmp_path), str(tmp_path / "sessions"))
    sm.append_message(UserMessage(content=[TextContent(text="hello")]))
    sm.append_message(AssistantMessage(content=[TextContent(text="hi")], api="openai-completions", provider="p",
                                       model="m", usage=Usage(input=1, output=1, totalTokens=2)))
    calls: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(safe_open.os, "fsync", lambda fd: (calls.append(fd), real_fsync(fd))[1])
    out = tmp_path / "page.html"
    out.write_bytes(b"old page")
    path = ex.export_file(sm.get_session_file(), str(out))
    assert calls == []
    entries = sm.get_entries()
    assert out.read_bytes() == ex.render_html(sm.get_header(), entries, entries[-1].id)
    assert path == str(out) and [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []
    safe_open.write_atomic(str(tmp_path / "other"), b"x")
    assert len(calls) == 2  # the file and its directory
