"""The real ``pisces`` in tmux with the faux model, for the editor and the richer transcript: a large paste
becomes a marker and is sent whole, ``\\`` + Enter and Shift+Enter (as the kitty protocol sends it) make new
lines, the kill-ring, the ``@`` fuzzy file list (arrows, Tab); consecutive reads grouped into one card, a retry counting down,
and a theme file in pi's format applied."""

from __future__ import annotations

import json
import os
import re
import sys
import time

import pytest

from pisces.modes.tui import theme

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_tui_e2e as e2e  # found through the path above

term = e2e.term  # the tmux fixture
capture, start, stty_same = e2e.capture, e2e.start, e2e.stty_same


def paste(term, text: str) -> None:
    """A bracketed paste, as a terminal sends one (tmux adds the markers when the app asked for them)."""
    path = os.path.join(term.cwd, "paste.txt")
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    term._tmux("load-buffer", "-b", "p", path)
    term._tmux("paste-buffer", "-p", "-b", "p", "-t", "t")


def test_paste_marker_new_lines_kill_ring_and_fuzzy_at(term):
    os.makedirs(os.path.join(term.cwd, "docs", "guide"))
    with open(os.path.join(term.cwd, "docs", "guide", "install_notes.md"), "w") as f:
        f.write("x")
    with open(os.path.join(term.cwd, "docs", "instant_notes.txt"), "w") as f:
        f.write("x")
    with open(os.path.join(term.cwd, ".gitignore"), "w") as f:
        f.write("ignored/\n")
    os.makedirs(os.path.join(term.cwd, "ignored"))
    with open(os.path.join(term.cwd, "ignored", "install_notes.md"), "w") as f:
        f.write("x")
    os.makedirs(os.path.join(term.cwd, ".git"))
    start(term, [{"text": "got it"}, {"text": "second"}])
    term.text("first line\\")
    term.keys("Enter")  # \ + Enter: a new line, not a send
    term.text("second line")
    term._tmux("send-keys", "-t", "t", "-H", *"1b 5b 31 33 3b 32 75".split())  # Shift+Enter (kitty: CSI 13;2u)
    term.text("see ")
    paste(term, "\n".join(f"pasted row {i}" for i in range(30)))
    term.wait_for("[paste #1 +30 lines]")
    term.text(" and @instnot")  # the @ list opens under the editor as the word is typed
    screen = term.wait_for("  docs/guide/install_notes.md")  # second: the shorter path ranks first
    assert "› docs/instant_notes.txt" in screen and "ignored/" not in screen
    capture(term, "at-dropdown")
    term.keys("Down")
    term.wait_for("› docs/guide/install_notes.md")
    term.keys("Tab")  # taken: the path in place of @instnot, the list closed
    screen = term.wait_for("@docs/guide/install_notes.md")
    assert "docs/instant_notes.txt" not in screen
    capture(term, "paste-marker")
    assert "› first line" in screen and "  second line" in screen
    term.keys("Enter")
    hist = term.wait_for("got it", 60, history=True)
    assert "pasted row 0" in hist and "pasted row 29" in hist  # the marker was expanded when sent
    assert "@docs/guide/install_notes.md" in hist
    # kill-ring: Ctrl+W twice kills two words as one entry; Ctrl+Y yanks them back
    term.text("keep these two words")
    term.keys("C-w", "C-w")
    term.wait_for("› keep these")
    term.keys("C-a", "C-y")
    term.wait_for("› two wordskeep these")
    term.keys("C-c")
    term.keys("C-d")
    assert stty_same(term)


def test_grouped_reads_retry_countdown_and_a_theme(term):
    with open(os.path.join(term.cwd, "a.py"), "w") as f:
        f.write("one\ntwo\n")
    with open(os.path.join(term.cwd, "b.py"), "w") as f:
        f.write("three\n")
    data = {"name": "e2e", "vars": {}, "colors": {k: "" for k in theme.REQUIRED}}
    data["colors"].update({"error": "#ff0000", "success": 46, "warning": 226})
    with open(os.path.join(term.cwd, "e2e-theme.json"), "w") as f:
        json.dump(data, f)
    term.home.write_json("settings.json", {"retry": {"enabled": True, "maxRetries": 2, "baseDelayMs": 4000},
                                           "todo": {"reminders": {"enabled": False}}})
    plan = {"op": "replace", "phases": [{"name": "Explore", "tasks": [
        {"content": "read the code", "status": "completed"}, {"content": "list the files", "status": "in_progress"}]}]}
    start(term, [{"toolCalls": [{"name": "todo_write", "arguments": {"ops": [plan]}}]},
                 {"toolCalls": [{"name": "read", "arguments": {"path": "a.py"}},
                                {"name": "read", "arguments": {"path": "b.py"}}]},
                 {"toolCalls": [{"name": "ls", "arguments": {"path": "."}}]},
                 {"text": "looked around"},
                 {"error": "overloaded_error: the server is overloaded"},
                 {"text": "after the retry"}],
          "--theme", "e2e-theme.json", "--tools", "read,ls,todo_write", "--approval-mode", "yolo")
    term.text("look")
    term.keys("Enter")
    hist = term.wait_for("looked around", 60, history=True)
    assert "● explored 3 calls: 2 read, 1 ls" in hist
    assert "  read a.py (2 lines)" in hist and "  read b.py (1 lines)" in hist
    assert hist.count("● explored") == 1
    screen = term.wait_for("≡ todo 1/2 · Explore")  # the todo panel above the editor
    assert "◐ list the files" in screen and "● read the code" in screen
    term.text("again")
    term.keys("Enter")
    first = term.wait_for("retrying in", 60)
    m = re.search(r"retrying in (\d)s", first)
    assert m is not None
    shown = int(m.group(1))
    term.wait_for(f"retrying in {shown - 1}s", 30)  # it counts down
    screen = term.screen(escapes=True)
    assert "38;5;226" in screen or "38;2;255;255;0" in screen  # the warning colour of the theme file
    capture(term, "retry-countdown")
    term.wait_for("after the retry", 60, history=True)
    term.keys("C-d")
    assert stty_same(term)


def test_mcp_servers_in_the_footer_and_the_mcp_command(term):
    pytest.importorskip("mcp")
    servers = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "core", "mcp", "servers.py")

    def server(kind: str) -> dict:
        return {"command": sys.executable, "args": [os.path.abspath(servers), kind, "0", "tui-e2e-mcp"]}

    term.home.write_json("mcp.json", {"mcpServers": {"good": server("good"), "broken": server("crash")}})
    start(term, [{"text": "unused"}])
    term.wait_for("mcp 1/2 !", 60)  # one connected, one failed
    term.text("/mcp")
    term.keys("Enter")
    screen = term.wait_for("broken: failed", 30)
    assert "good: connected" in screen and " tools" in screen
    assert "crashing at start" not in term.history()  # a server's stderr goes to a log, not over the screen
    with open(os.path.join(term.home.agent_dir, "mcp-stderr.log"), encoding="utf-8") as f:
        assert "crashing at start" in f.read()
    capture(term, "mcp")
    term.keys("C-d")
    assert stty_same(term)


def test_theme_backgrounds_and_a_theme_file_reloaded_when_saved(term):
    """pi's background colours drawn (a user message, a tool card, the chosen entry of the @ list), and the
    theme file saved again while the UI runs: the next frame uses it (no polling: a key brings the frame)."""
    with open(os.path.join(term.cwd, "a.py"), "w") as f:
        f.write("one\n")
    data = {"name": "bg", "vars": {"sel": 52}, "colors": {k: "" for k in theme.REQUIRED}}
    data["colors"].update({"selectedBg": "sel", "userMessageBg": 17, "toolSuccessBg": 22, "muted": 244})
    path = os.path.join(term.cwd, "bg-theme.json")
    with open(path, "w") as f:
        json.dump(data, f)
    start(term, [{"toolCalls": [{"name": "bash", "arguments": {"command": "echo hi"}}]}, {"text": "done here"}],
          "--theme", "bg-theme.json", "--approval-mode", "yolo")
    term.text("hello there")
    term.keys("Enter")
    term.wait_for("done here", 60)
    screen = term.screen(escapes=True)
    user = next(line for line in screen.splitlines() if "hello there" in line)
    assert "48;5;17" in user  # userMessageBg behind the user's message
    card = next(line for line in screen.splitlines() if "echo hi" in line and "bash" in line)
    assert "48;5;22" in card  # toolSuccessBg behind the finished tool card's head
    term.text("@a.p")
    screen = term.wait_for("› a.py")
    chosen = next(line for line in term.screen(escapes=True).splitlines() if "a.py" in line and "›" in line)
    assert "48;5;52" in chosen  # selectedBg (through a var) behind the chosen entry
    capture(term, "theme-backgrounds")
    term.keys("Escape")
    data["colors"].update({"muted": 208, "selectedBg": 19})
    with open(path + ".tmp", "w") as f:  # saved as editors do: a new file renamed over the old one
        json.dump(data, f)
    os.replace(path + ".tmp", path)
    term.keys("BSpace")  # any key draws a frame, and the frame looks at the file
    term.text("x")
    deadline = time.monotonic() + 20
    while "38;5;208" not in term.screen(escapes=True) and time.monotonic() < deadline:
        term.text("x")  # (a key within CHECK_S of the last look brings a frame that does not look again)
        time.sleep(0.3)
    assert "38;5;208" in term.screen(escapes=True)  # the new muted colour (the footer, the rules)
    with open(path, "w") as f:
        f.write("{broken")
    term.text("y")
    term.wait_for("could not be read", 20)  # reported; the theme in use stays
    assert "38;5;208" in term.screen(escapes=True)
    term.keys("C-c")
    term.keys("C-d")
    assert stty_same(term)
