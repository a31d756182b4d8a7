"""HTML export: paths and errors as pi, a self-contained page, the session JSON round-trips, and (in headless
Chromium) the messages render while script from the session never runs."""

from __future__ import annotations

import base64
import hashlib
import html
import json
import os
import re
import shutil
import subprocess
from types import SimpleNamespace

import pytest

from pisces.ai.types import (
    AssistantMessage,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from pisces.core.export_html import ExportError, export_file, export_session
from pisces.core.store import BashExecutionMessage, SessionManager, encode_line

PNG_1PX = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==")
SCRIPT_PAYLOAD = "<script>window.__pwned=1;document.title='PWNED'</script>"
IMG_PAYLOAD = "<img src=x onerror=\"document.title='PWNED'\">"
# These leave a mark the renderer never touches, whenever they run.
MARK_PAYLOADS = ("<script>document.documentElement.setAttribute('data-pwned','script')</script> "
                 "<img src=x onerror=\"document.documentElement.setAttribute('data-pwned','img')\"> "
                 "<svg onload=\"document.documentElement.setAttribute('data-pwned','svg')\"></svg> "
                 "<iframe srcdoc=\"<script>parent.document.documentElement.setAttribute('data-pwned','frame')</script>\">"
                 "</iframe> [x](javascript:document.documentElement.setAttribute('data-pwned','link'))")


def _assistant(*blocks, stop="stop", error=None):
    kwargs = {"errorMessage": error} if error else {}
    return AssistantMessage(content=list(blocks), api="openai-completions", provider="scripted", model="m1",
                            usage=Usage(input=120, output=30, totalTokens=150), stopReason=stop, **kwargs)


def _build(tmp_path) -> tuple[SessionManager, dict[str, str]]:
    """A session with every kind of content, a second branch, and hostile text in every place."""
    sm = SessionManager.create(str(tmp_path), str(tmp_path / "sessions"))
    ids: dict[str, str] = {}
    sm.append_model_change("scripted", "m1")
    sm.append_message(UserMessage(content=[
        TextContent(text=f"First question ALPHA-USER-TEXT {SCRIPT_PAYLOAD} and {IMG_PAYLOAD}\n\n"
                         "```python\ndef f(x):\n    return x < 1\n```\n\n[bad](javascript:alert(1)) "
                         "[good](https://example.com/docs) ![remote](http://example.com/a.png) "
                         f"![inline](data:image/png;base64,{PNG_1PX})\u2028line-sep"),
        ImageContent(data=PNG_1PX, mimeType="image/png"),
    ]))
    ids["call"] = sm.append_message(_assistant(
        ThinkingContent(thinking=f"BETA-THINKING about </script> things {MARK_PAYLOADS}"),
        TextContent(text=MARK_PAYLOADS),
        TextContent(text=f"Let me run it. GAMMA-ASSISTANT-TEXT {SCRIPT_PAYLOAD}"),
        ToolCall(id="call_1", name="bash", arguments={"command": f"echo DELTA-TOOL-ARG {SCRIPT_PAYLOAD}"}),
    ))
    sm.append_message(ToolResultMessage(toolCallId="call_1", toolName="bash", content=[
        TextContent(text=f"EPSILON-TOOL-OUTPUT {IMG_PAYLOAD}"),
        ImageContent(data=PNG_1PX, mimeType="image/png"),
        ImageContent(data=PNG_1PX, mimeType="text/html"),
    ]))
    ids["other_leaf"] = sm.append_message(_assistant(TextContent(text="ZETA-OTHER-BRANCH answer")))
    sm.branch(ids["call"])
    sm.append_message(ToolResultMessage(toolCallId="call_1", toolName="bash",
                                        content=[TextContent(text="ETA-ACTIVE-RESULT " + MARK_PAYLOADS)],
                                        isError=True))
    sm.append_message(BashExecutionMessage(command="ls THETA-BASH", output="a\nb", exitCode=2))
    sm.append_message(_assistant(TextContent(text="IOTA-FINAL answer"), stop="error", error="provider <b>down</b>"))
    sm.append_compaction("KAPPA-SUMMARY of things", ids["call"], 1234)
    sm.append_session_info(f"Named {SCRIPT_PAYLOAD}")
    ids["leaf"] = sm.get_leaf_id()
    return sm, ids


def _data_block(page: str) -> dict:
    m = re.search(r'<script type="application/json" id="session-data">(.*?)</script>', page, re.S)
    assert m, "no session-data block"
    return json.loads(m.group(1))


def _scripts(page: str) -> list[str]:
    return re.findall(r"<script>(.*?)</script>", page, re.S)


# ---------------------------------------------------------------------------------------------
# Paths and errors (pi 0.73.1, runs 09 and 10)
# ---------------------------------------------------------------------------------------------
def test_default_path_is_relative_pi_session_name_in_cwd(tmp_path, monkeypatch):
    sm, _ = _build(tmp_path)
    out_dir = tmp_path / "cwd"
    out_dir.mkdir()
    monkeypatch.chdir(out_dir)
    path = export_session(SimpleNamespace(store=sm), None)
    base = os.path.basename(sm.get_session_file())[: -len(".jsonl")]
    assert path == f"pi-session-{base}.html"
    assert re.fullmatch(r"pi-session-\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d-\d{3}Z_[0-9a-f-]{36}\.html", path)
    assert (out_dir / path).is_file()
    assert export_session(SimpleNamespace(store=sm), "") == path  # empty means default, as in pi


def test_explicit_absolute_path_returned_as_is(tmp_path):
    sm, _ = _build(tmp_path)
    target = str(tmp_path / "explicit.html")
    assert export_session(SimpleNamespace(store=sm), target) == target
    assert os.path.getsize(target) > 1000


def test_relative_path_resolved_against_cwd_and_returned_as_given(tmp_path, monkeypatch):
    sm, _ = _build(tmp_path)
    (tmp_path / "work" / "sub").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "work")
    assert export_session(SimpleNamespace(store=sm), "sub/relative-export.html") == "sub/relative-export.html"
    assert (tmp_path / "work" / "sub" / "relative-export.html").is_file()


def test_nothing_to_export_before_the_file_is_written(tmp_path):
    sm = SessionManager.create(str(tmp_path), str(tmp_path / "sessions"))
    sm.append_message(UserMessage(content="hello"))  # no assistant message yet: nothing on disk
    with pytest.raises(ExportError) as err:
        export_session(SimpleNamespace(store=sm), None)
    assert str(err.value) == "Nothing to export yet - start a conversation first"


def test_in_memory_session_cannot_be_exported(tmp_path):
    sm = SessionManager.in_memory(str(tmp_path))
    sm.append_message(UserMessage(content="hello"))
    sm.append_message(_assistant(TextContent(text="hi")))
    with pytest.raises(ExportError) as err:
        export_session(SimpleNamespace(store=sm), str(tmp_path / "x.html"))
    assert str(err.value) == "Cannot export in-memory session to HTML"


def test_unwritable_output_is_a_sentence(tmp_path):
    sm, _ = _build(tmp_path)
    with pytest.raises(ExportError, match=r"^Cannot write .*missing-dir/x\.html: No such file or directory$"):
        export_session(SimpleNamespace(store=sm), str(tmp_path / "missing-dir" / "x.html"))


async def test_agent_session_export_html_carries_system_prompt_and_tools(tmp_path, monkeypatch):
    from pisces.core.session.build import create_agent_session

    monkeypatch.chdir(tmp_path)
    session = create_agent_session(cwd=str(tmp_path), provider="faux", session_dir=str(tmp_path / "sessions"),
                                   system_prompt="SYSTEM-PROMPT-MARKER")
    with pytest.raises(ExportError, match="^Nothing to export yet"):
        await session.export_html(None)
    session.store.append_message(UserMessage(content="hello"))
    session.store.append_message(_assistant(TextContent(text="hi")))
    result = await session.export_html(None)
    assert result["path"].startswith("pi-session-") and (tmp_path / result["path"]).is_file()
    data = _data_block((tmp_path / result["path"]).read_text("utf-8"))
    assert "SYSTEM-PROMPT-MARKER" in data["systemPrompt"]
    assert "bash" in [t["name"] for t in data["tools"]]
    await session.shutdown()


# ---------------------------------------------------------------------------------------------
# The page
# ---------------------------------------------------------------------------------------------
def test_page_is_self_contained(tmp_path):
    sm, _ = _build(tmp_path)
    page = open(export_session(SimpleNamespace(store=sm), str(tmp_path / "o.html")), encoding="utf-8").read()
    assert page.startswith("<!DOCTYPE html>")
    assert not re.search(r"""\b(src|href)\s*=\s*["']?\s*(https?:)?//""", page, re.I)
    assert not re.search(r"<link\b|<iframe\b|<object\b", page, re.I)
    styles = "".join(re.findall(r"<style>(.*?)</style>", page, re.S))
    assert styles and not re.search(r"@import|url\(", styles, re.I)
    assert page.count("<script") == 4  # data block, marked, highlight.js, renderer: all inline
    assert 'src="' not in page.split("<body>", 1)[1].split('id="session-data"', 1)[0]


def test_csp_allows_exactly_the_inline_scripts(tmp_path):
    sm, _ = _build(tmp_path)
    page = open(export_session(SimpleNamespace(store=sm), str(tmp_path / "o.html")), encoding="utf-8").read()
    csp = re.search(r'<meta http-equiv="Content-Security-Policy" content="([^"]+)">', page).group(1)
    assert page.index("Content-Security-Policy") < page.index("<script")
    directives = dict(d.strip().split(" ", 1) for d in csp.split(";"))
    assert directives["default-src"] == "'none'"
    assert directives["img-src"] == "data:"
    assert "unsafe-inline" not in directives["script-src"] and "unsafe-eval" not in directives["script-src"]
    hashes = sorted(re.findall(r"'sha256-([^']+)'", directives["script-src"]))
    scripts = _scripts(page)
    assert len(scripts) == 3
    assert hashes == sorted(base64.b64encode(hashlib.sha256(s.encode()).digest()).decode() for s in scripts)
    for s in scripts:  # nothing the HTML parser would act on inside a script element
        assert not re.search(r"<!--|<script|</script", s, re.I)


def test_session_json_round_trips_and_is_escaped(tmp_path):
    sm, ids = _build(tmp_path)
    page = open(export_session(SimpleNamespace(store=sm), str(tmp_path / "o.html")), encoding="utf-8").read()
    raw = re.search(r'id="session-data">(.*?)</script>', page, re.S).group(1)
    for bad in ("<", ">", "&", "\u2028", "\u2029"):
        assert bad not in raw
    data = json.loads(raw)
    assert data["entries"] == [json.loads(encode_line(e)) for e in sm.get_entries()]
    assert data["header"] == json.loads(encode_line(sm.get_header()))
    assert data["leafId"] == ids["leaf"] == sm.get_leaf_id()
    assert SCRIPT_PAYLOAD in json.dumps(data, ensure_ascii=False)
    # the title carries the session name, escaped
    title = re.search(r"<title>(.*?)</title>", page).group(1)
    assert "<script>" not in title and html.unescape(title).startswith(f"Named {SCRIPT_PAYLOAD}")


def test_export_file_reads_a_session_file_and_keeps_unknown_entries(tmp_path, monkeypatch):
    sm, _ = _build(tmp_path)
    path = sm.get_session_file()
    with open(path, "ab") as f:  # an entry type this version does not model
        f.write(json.dumps({"type": "future_thing", "id": "abcd1234", "parentId": sm.get_leaf_id(),
                            "timestamp": "2026-01-01T00:00:00.000Z", "payload": "<b>x</b>"}).encode() + b"\n")
    monkeypatch.chdir(tmp_path)
    out = export_file(path, None)
    assert out == "pi-session-" + os.path.basename(path)[: -len(".jsonl")] + ".html"
    data = _data_block((tmp_path / out).read_text("utf-8"))
    assert data["entries"][-1]["payload"] == "<b>x</b>"
    assert data["leafId"] == "abcd1234"
    assert len(data["entries"]) == len(sm.get_entries()) + 1


def test_export_file_errors(tmp_path):
    with pytest.raises(ExportError, match="^File not found: "):
        export_file(str(tmp_path / "nope.jsonl"), None)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"type":"message","id":"x"}\n')
    with pytest.raises(ExportError, match="^Not a session file"):
        export_file(str(bad), str(tmp_path / "o.html"))
    with pytest.raises(ExportError, match="is a directory"):
        export_file(str(tmp_path), None)


def test_cli_export(tmp_path, monkeypatch, capsys):
    from pisces.cli import main
    from pisces.modes.export_cli import run_export

    sm, _ = _build(tmp_path)
    out = str(tmp_path / "cli.html")
    assert main(["--export", sm.get_session_file(), out]) == 0
    assert capsys.readouterr().out == f"Exported to: {out}\n"
    assert os.path.getsize(out) > 1000
    monkeypatch.chdir(tmp_path)
    assert run_export(sm.get_session_file(), None) == 0
    assert capsys.readouterr().out.startswith("Exported to: pi-session-")
    assert run_export(str(tmp_path / "missing.jsonl"), None) == 1
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == f"pisces: File not found: {tmp_path / 'missing.jsonl'}\n"


def test_vendored_assets_and_licenses_are_package_files():
    from importlib.resources import files

    pkg = files("pisces.core.export_html")
    for name in ("template.html", "render.js", "vendor/marked.umd.js", "vendor/highlight.min.js",
                 "vendor/github.min.css", "vendor/github-dark.min.css", "vendor/LICENSE.marked.md",
                 "vendor/LICENSE.highlight.js.txt"):
        assert pkg.joinpath(name).is_file(), name


# ---------------------------------------------------------------------------------------------
# In the browser
# ---------------------------------------------------------------------------------------------
_CHROMIUM: list[str | None] = []


def _chromium() -> str:
    if not _CHROMIUM:
        found = shutil.which("chromium") or (os.path.exists("/usr/bin/chromium") and "/usr/bin/chromium") or None
        reason = ""
        if not found and shutil.which("apt-get") and os.geteuid() == 0 and not os.environ.get("PISCES_NO_APT"):
            try:
                proc = subprocess.run(["apt-get", "install", "-y", "chromium"], capture_output=True, timeout=600,
                                      env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})
                if proc.returncode != 0:
                    reason = proc.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["?"]
                    reason = f"apt-get install chromium failed: {reason[0]}"
            except (OSError, subprocess.TimeoutExpired) as exc:
                reason = f"apt-get install chromium failed: {exc}"
            found = shutil.which("chromium")
        elif not found:
            reason = "chromium is not installed and cannot be installed here (needs root and apt-get)"
        _CHROMIUM.append(found)
        _CHROMIUM.append(reason)
    if not _CHROMIUM[0]:
        pytest.skip(_CHROMIUM[1] or "chromium is not available")
    return _CHROMIUM[0]  # type: ignore[return-value]


def _dump_dom(chromium: str, path: str, profile: str, fragment: str = "") -> str:
    cmd = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
           "--virtual-time-budget=1000", f"--user-data-dir={profile}", "--dump-dom", "file://" + os.path.abspath(path) + fragment]
    proc = subprocess.run(cmd, capture_output=True, timeout=20)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-2000:]
    return proc.stdout.decode("utf-8")


def test_browser_renders_the_session_and_runs_no_session_script(tmp_path):
    chromium = _chromium()
    sm, ids = _build(tmp_path)
    out = str(tmp_path / "browser.html")
    export_session(SimpleNamespace(store=sm), out)
    dom = _dump_dom(chromium, out, str(tmp_path / "profile"))

    assert 'data-rendered="1"' in dom, "the renderer did not run"
    main = dom.split('<div id="messages">', 1)[1].split("</main>", 1)[0]
    shown = html.unescape(re.sub(r"<[^>]*>", "", main))  # the visible text
    for text in ("ALPHA-USER-TEXT", "GAMMA-ASSISTANT-TEXT", "BETA-THINKING", "DELTA-TOOL-ARG", "ETA-ACTIVE-RESULT",
                 "THETA-BASH", "IOTA-FINAL", "provider &lt;b&gt;down&lt;/b&gt;", "KAPPA-SUMMARY"):
        assert text in main, text
    assert "ZETA-OTHER-BRANCH" not in shown and "EPSILON-TOOL-OUTPUT" not in shown  # the other branch
    assert "ZETA-OTHER-BRANCH" in dom.split('<nav id="tree"', 1)[1]  # ...is listed in the tree

    # nothing from the session ran or became markup
    title = re.search(r"<title>(.*?)</title>", dom, re.S).group(1)
    assert title != "PWNED" and title.startswith("Named &lt;script&gt;")  # the name is set, as text
    assert "&lt;script&gt;window.__pwned=1;document.title='PWNED'&lt;/script&gt;" in main
    assert "&lt;img src=x onerror=\"document.title='PWNED'\"&gt;" in main
    assert not re.search(r"<img[^>]*onerror", dom, re.I) and not re.search(r'<img[^>]*src="x"', dom)
    assert not re.search(r"<script>window", dom)
    assert "data-pwned" not in dom.split(">", 2)[1], "a payload ran"
    assert "<svg" not in main and "<iframe" not in main
    assert 'href="javascript' not in dom and "http://example.com/a.png" not in re.sub(r"&[a-z]+;", "", "".join(
        re.findall(r"<img[^>]*>", dom)))
    assert '<a href="https://example.com/docs"' in main

    # markdown and highlighting
    assert '<span class="hljs-keyword">def</span>' in main
    imgs = re.findall(r'<img [^>]*src="data:image/png;base64,[^"]+"', main)
    assert len(imgs) >= 2  # the user's attached image and the inline markdown data: image
    assert "unsupported type text/html" not in main  # that result is on the other branch...

    # ...which is reachable: open the page on the other branch's leaf
    dom2 = _dump_dom(chromium, out, str(tmp_path / "profile"), "#" + ids["other_leaf"])
    main2 = dom2.split('<div id="messages">', 1)[1].split("</main>", 1)[0]
    shown2 = html.unescape(re.sub(r"<[^>]*>", "", main2))
    assert "ZETA-OTHER-BRANCH" in shown2 and "EPSILON-TOOL-OUTPUT" in shown2 and "ETA-ACTIVE-RESULT" not in shown2
    assert "unsupported type text/html" in main2
    assert "&lt;img src=x onerror=" in main2
    assert re.search(r"<title>(.*?)</title>", dom2).group(1).startswith("Named &lt;script&gt;")


def test_browser_csp_blocks_markup_injected_into_the_page(tmp_path):
    """Even if some text did reach the page as markup, the policy would not let it run. The control run
    without the policy shows that the same markup does run, so the check is real."""
    chromium = _chromium()
    sm, _ = _build(tmp_path)
    out = tmp_path / "tampered.html"
    export_session(SimpleNamespace(store=sm), str(out))
    page = out.read_text("utf-8")
    injected = page.replace('<div id="messages">', '<div id="messages">' + MARK_PAYLOADS.split(" [x]")[0], 1)
    out.write_text(injected, "utf-8")
    dom = _dump_dom(chromium, str(out), str(tmp_path / "profile"))
    assert 'data-rendered="1"' in dom, "the page's own scripts must still run"
    assert "data-pwned" not in dom.split(">", 2)[1]

    control = tmp_path / "control.html"
    control.write_text(re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", injected), "utf-8")
    assert 'data-pwned="' in _dump_dom(chromium, str(control), str(tmp_path / "profile")).split(">", 2)[1]


def test_browser_shows_the_todo_list_entries(tmp_path):
    """A ``pisces.todos`` entry (docs/planning.md) is a Todos card with each task's id and status mark."""
    chromium = _chromium()
    sm = SessionManager.create(str(tmp_path), str(tmp_path / "sessions"))
    sm.append_message(UserMessage(content=[TextContent(text="plan it")]))
    sm.append_custom_entry("pisces.todos", {"phases": [{"id": "p1", "name": "Build <b>it</b>", "tasks": [
        {"id": "t1", "content": "TODO-PARSER", "status": "completed"},
        {"id": "t2", "content": "TODO-TESTS", "status": "in_progress", "notes": "half"}]}]})
    sm.append_message(_assistant(TextContent(text="planned")))
    out = str(tmp_path / "todos.html")
    export_session(SimpleNamespace(store=sm), out)
    main = _dump_dom(chromium, out, str(tmp_path / "profile")).split('<div id="messages">', 1)[1]
    shown = html.unescape(re.sub(r"<[^>]*>", "", main))
    assert "Todos" in shown and "[x] t1 TODO-PARSER" in shown and "[>] t2 TODO-TESTS  (half)" in shown
    assert "p1 Build <b>it</b>" in shown and "<b>it</b>" not in main  # the phase name is text, not markup


def test_browser_shows_plan_mode_and_the_approved_plan(tmp_path):
    """``pisces.plan_mode`` entries (docs/planning.md): plan mode on and off are events, an approved plan is a
    card with its title and the plan rendered as markdown (text, never markup)."""
    chromium = _chromium()
    sm = SessionManager.create(str(tmp_path), str(tmp_path / "sessions"))
    sm.append_message(UserMessage(content=[TextContent(text="plan it")]))
    sm.append_custom_entry("pisces.plan_mode", {"enabled": True, "planFile": "/w/.pisces/plans/ab-plan.md"})
    sm.append_custom_entry("pisces.plan_mode", {"enabled": False, "planFile": "/w/.pisces/plans/ab-plan.md",
                                                "reason": "approved", "title": "PLAN-TITLE",
                                                "plan": "# Steps\n\n1. STEP-ONE <i>x</i>\n"})
    sm.append_message(_assistant(TextContent(text="done")))
    out = str(tmp_path / "plan.html")
    export_session(SimpleNamespace(store=sm), out)
    main = _dump_dom(chromium, out, str(tmp_path / "profile")).split('<div id="messages">', 1)[1]
    shown = html.unescape(re.sub(r"<[^>]*>", "", main))
    assert "Plan mode on: /w/.pisces/plans/ab-plan.md" in shown
    assert "Plan approved · PLAN-TITLE" in shown and "STEP-ONE <i>x</i>" in shown
    assert "<i>x</i>" not in main and "<h1" in main.split("PLAN-TITLE", 1)[1]  # the plan's markdown, escaped
