"""The real ``pisces`` in tmux with the faux model: ``/tree`` (Esc twice, search, filters, labels, fold,
moving with a summary of the branch left), ``/clone``, ``/settings``, ``/approval``, ``/trust``, the
searchable ``/model`` and ``/redraw``; the terminal's state (``stty -g``) the same before and after."""

from __future__ import annotations

import glob
import json
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import pytest  # noqa: E402 - after the path
from test_tui_e2e import capture, start  # noqa: E402 - after the path
from tmuxterm import Tmux  # noqa: E402 - after the path

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "e2e"))
from e2eproc import PISCES, Home  # noqa: E402 - after the path


@pytest.fixture
def term(tmp_path):
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed (apt-get install tmux): the terminal UI's e2e tests need it")
    home = Home(str(tmp_path))
    t = Tmux(home.cwd, home.env(TERM="xterm-256color"))
    t.home = home
    yield t
    t.close()


def stty_same(term) -> bool:
    """The terminal's settings after pisces left are those from before it started (``stty -g``), read once
    the shell has written them whole."""
    import time

    term.wait_for("EXIT=", 30)
    term.wait_for("tuitest$", 10)
    after = os.path.join(term.cwd, "stty.after")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not (os.path.exists(after) and open(after).read().endswith("\n")):
        time.sleep(0.1)
    with open(os.path.join(term.cwd, "stty.before")) as a, open(after) as b:
        return a.read() == b.read()


def dialog(screen: str) -> str:
    """The rows of the dialog on the screen (from its ┌ row to its └ row)."""
    rows = screen.split("\n")
    first = max(i for i, r in enumerate(rows) if r.startswith("┌"))
    last = next(i for i in range(first, len(rows)) if rows[i].startswith("└"))
    return "\n".join(rows[first:last + 1])


def gone(term, needle: str, timeout: float = 30) -> str:
    """The screen once ``needle`` has left it (keys typed after a lone Esc must not arrive with it: a key
    within the same read would be read as Alt+key)."""
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        screen = term.screen()
        if needle not in screen:
            return screen
        time.sleep(0.1)
    raise AssertionError(f"{needle!r} stayed on the screen:\n{screen}")


def ask(term, text: str, needle: str, timeout: float = 30) -> str:
    term.text(text)
    term.keys("Enter")
    return term.wait_for(needle, timeout)


def test_tree_search_filter_label_fold_and_move_with_a_summary(term):
    start(term, [{"text": "answer one"}, {"text": "answer two"}, {"text": "summary of the branch left"},
                 {"text": "answer three"}], session=True)
    for q, a in (("question one", "answer one"), ("question two", "answer two")):
        term.text(q)
        term.keys("Enter")
        term.wait_for(a, 30, history=True)
    term.keys("Escape", "Escape")  # Esc twice on an empty editor while idle: the tree
    screen = term.wait_for("┌ session tree")
    box = dialog(screen)
    assert "user: question one" in box and "assistant: answer two  ← active" in box
    capture(term, "tree")
    term.text("one")  # typing searches
    box = dialog(term.wait_for("search: one█"))
    assert "question one" in box and "answer one" in box and "question two" not in box
    term.keys("Escape")  # clears the search, the dialog stays
    assert "┌ session tree" in gone(term, "search: one")
    term.keys("C-u")  # user messages only
    box = dialog(term.wait_for("filter: user-only"))
    assert "question two" in box and "answer" not in box
    term.keys("Up")
    term.text("L")  # label the entry under the cursor
    term.wait_for("label: █")
    term.text("start here")
    term.keys("Enter")
    box = dialog(term.wait_for("[start here]"))
    assert "[start here] user: question one" in box
    term.keys("C-o", "C-o", "C-o", "C-o")  # user-only -> labeled-only -> all -> default -> no-tools
    term.wait_for("filter: no-tools")
    term.keys("C-o")
    term.wait_for("filter: user-only")
    term.keys("C-u")
    term.wait_for("filter: default")
    term.keys("C-Left")  # the cursor is on "question one": fold what is below it
    box = dialog(term.wait_for("(+3)"))
    assert "▸ [start here] user: question one" in box and "answer two" not in box
    term.keys("C-Right")
    box = dialog(term.wait_for("answer two  ← active"))
    term.keys("Enter")  # move to "question one", summarizing the branch left
    term.wait_for("Summarize the branch being left")
    term.keys("Down", "Enter")
    term.wait_for("the branch left was summarized", 30, history=True)
    assert "› question one" in term.wait_for("› question one")  # the message is back in the editor
    term.keys("C-u")
    term.text("question one again")
    term.keys("Enter")
    term.wait_for("answer three", 30, history=True)
    term.text("/tree")
    term.keys("Enter")
    box = dialog(term.wait_for("┌ session tree"))
    capture(term, "tree-branches")
    assert "branch summary: " in box  # the summary the faux model wrote for the branch left
    assert "├ " in box and "└ " in box  # two branches under one point
    assert "answer three  ← active" in box
    term.keys("Escape")
    assert "› " in gone(term, "┌ session tree")  # closed, the editor is back
    term.keys("C-d")
    assert stty_same(term)


def test_clone_settings_approval_trust_model_and_redraw(term):
    start(term, [{"text": "first reply"}, {"text": "second reply"}], session=True)
    term.text("hello there")
    term.keys("Enter")
    term.wait_for("first reply", 30, history=True)
    # /model: a selector filtered by what is typed
    box = dialog(ask(term, "/model", "search: █"))
    assert "faux/" in box
    term.text("reasoning")
    box = dialog(term.wait_for("search: reasoning█"))
    assert "faux-reasoning" in box and all("reasoning" in r for r in box.split("\n")[2:-1] if "faux/" in r)
    capture(term, "model-search")
    term.keys("Enter")
    term.wait_for("model: faux/faux-reasoning", 30, history=True)
    # /settings: real values, and a toggle through the host
    box = dialog(ask(term, "/settings", "┌ settings"))
    assert "auto-compaction  on" in box and "steering mode    one-at-a-time" in box
    assert "thinking level" in box and "faux/faux-reasoning" in box
    term.keys("Enter")
    term.wait_for("auto-compaction  off")
    term.keys("Down", "Down", "Enter")
    term.wait_for("steering mode    all")
    capture(term, "settings")
    term.keys("Escape")
    gone(term, "┌ settings")
    # /approval: shown, then set by the person
    box = dialog(ask(term, "/approval", "approval mode (now"))
    assert "always-ask:" in box
    term.keys("Enter")
    term.wait_for("approval mode: always-ask (command)", 30, history=True)
    # /trust: the state, then trusting through the trust store
    ask(term, "/trust", "project trust (now: not trusted)")
    term.keys("Enter")
    term.wait_for("project trusted (saved in", 30, history=True)
    store = os.path.join(term.home.agent_dir, "trust.json")
    assert os.path.exists(store) and term.cwd in open(store, encoding="utf-8").read()
    ask(term, "/trust", "project trust (now: trusted)")
    term.keys("Down", "Enter")  # and untrusting it again
    term.wait_for("project not trusted (saved in", 30, history=True)
    ask(term, "/trust", "project trust (now: not trusted)")
    term.keys("Escape")
    gone(term, "┌ project trust")
    # /clone: a new file, and the session goes on there
    files_before = set(glob.glob(os.path.join(term.home.agent_dir, "sessions", "**", "*.jsonl"), recursive=True))
    ask(term, "/clone", "cloned: you continue in", 30)
    term.text("after the clone")
    term.keys("Enter")
    term.wait_for("second reply", 30, history=True)
    files = set(glob.glob(os.path.join(term.home.agent_dir, "sessions", "**", "*.jsonl"), recursive=True))
    new = files - files_before
    assert len(files_before) == 1 and len(new) == 1
    text = open(new.pop(), encoding="utf-8").read()
    assert "hello there" in text and "after the clone" in text  # the copy holds the past, then goes on
    assert "after the clone" not in open(files_before.pop(), encoding="utf-8").read()
    # /redraw: the scrollback is cleared and the transcript written again from the session's messages
    assert "bash run.sh" in term.history()
    ask(term, "/redraw", "redrawn from the session's", 30)
    hist = term.history()
    assert "bash run.sh" not in hist  # what was before pisces' transcript is gone...
    assert hist.count("› hello there") == 1 and hist.count("› after the clone") == 1  # ...the session is back
    assert hist.index("hello there") < hist.index("first reply") < hist.index("after the clone") \
        < hist.index("second reply")
    capture(term, "redraw")
    term.keys("C-d")
    assert stty_same(term)


def test_attach_reconnects_and_resumes_from_the_last_frame(term):
    sys.path.insert(0, os.path.join(os.path.dirname(HERE), "web"))
    from tcpproxy import Proxy
    from webproc import WebProc

    script = os.path.join(term.cwd, "web-script.json")
    with open(script, "w", encoding="utf-8") as f:
        f.write('[{"text": "first reply"}, {"text": "reply while away"}, {"text": "reply to what was typed"}]')
    token = "attach-reconnect-token-0123456789"
    with WebProc(term.home, "--faux-script", script, "--no-session", env={"PISCES_WEB_TOKEN": token}) as w:
        proxy = Proxy(w.port)
        try:
            browser = w.ws(token=token)
            assert w.recv(browser)["type"] == "snapshot"
            term.text(f"stty -g > stty.before; PISCES_WEB_TOKEN={token} {' '.join(PISCES)} attach "
                      f"http://127.0.0.1:{proxy.port}; echo EXIT=$?; stty -g > stty.after\n")
            term.wait_for("attached to", 30)
            term.text("hello")
            term.keys("Enter")
            term.wait_for("first reply", 30)
            w.until(browser, lambda f: f.get("type") == "agent_settled")
            proxy.cut(refuse=True)  # the network drops, and stays down for a while
            term.wait_for("connection lost: reconnecting", 30)
            w.request(browser, {"type": "prompt", "message": "sent from the browser meanwhile"})
            w.until(browser, lambda f: f.get("type") == "agent_settled")
            term.text("typed while away")
            term.keys("Enter")
            term.wait_for("sent when the connection is back", 30)
            capture(term, "attach-reconnecting")
            assert "“typed while away” is sent when" in term.history()  # it waits, it is not lost
            proxy.allow()
            term.wait_for("reconnected: resumed after frame", 60, history=True)
            term.wait_for("reply to what was typed", 60, history=True)
            hist = term.history()
            # the frames missed while away were replayed, in order, then what was typed was sent
            assert hist.index("› sent from the browser meanwhile") < hist.index("reply while away") \
                < hist.index("reply to what was typed")
            assert "connection lost" not in gone(term, "connection lost")  # the status row is gone
            seen = w.until(browser, lambda f: f.get("type") == "agent_settled")
            assert "typed while away" in json.dumps(seen)  # the browser saw the terminal's message
            assert proxy.accepted >= 2
            capture(term, "attach-reconnected")
            term.keys("C-d")
            assert stty_same(term)
            assert "EXIT=0" in term.screen()
            browser.close()
        finally:
            proxy.close()


def test_attach_after_a_server_restart_shows_its_snapshot_and_a_refused_token_ends_it(term):
    sys.path.insert(0, os.path.join(os.path.dirname(HERE), "web"))
    from tcpproxy import Proxy
    from webproc import WebProc

    def script(name: str, text: str) -> str:
        path = os.path.join(term.cwd, name)
        with open(path, "w", encoding="utf-8") as f:
            json.dump([{"text": text}], f)
        return path

    token = "attach-restart-token-0123456789"
    first = WebProc(term.home, "--faux-script", script("a.json", "from the first server"), "--no-session",
                    env={"PISCES_WEB_TOKEN": token})
    proxy = Proxy(first.port)
    servers = [first]
    try:
        term.text(f"stty -g > stty.before; PISCES_WEB_TOKEN={token} {' '.join(PISCES)} attach "
                  f"http://127.0.0.1:{proxy.port}; echo EXIT=$?; stty -g > stty.after\n")
        term.wait_for("attached to", 30)
        term.text("one")
        term.keys("Enter")
        term.wait_for("from the first server", 30)
        proxy.cut(refuse=True)
        first.close()
        term.wait_for("connection lost: reconnecting", 30)
        second = WebProc(term.home, "--faux-script", script("b.json", "from the second server"), "--no-session",
                         env={"PISCES_WEB_TOKEN": token})
        servers.append(second)
        browser = second.ws(token=token)
        assert second.recv(browser)["type"] == "snapshot"
        second.request(browser, {"type": "prompt", "message": "asked on the second server"})
        second.until(browser, lambda f: f.get("type") == "agent_settled")
        proxy.target = ("127.0.0.1", second.port)
        proxy.allow()
        # another stream: the frames cannot be resumed, the new server's snapshot is shown instead
        term.wait_for("reconnected: the server sent a fresh snapshot (stream)", 60, history=True)
        term.wait_for("from the second server", 30, history=True)
        hist = term.history()
        assert hist.index("fresh snapshot") < hist.index("› asked on the second server")
        browser.close()
        proxy.cut(refuse=True)
        second.close()
        term.wait_for("connection lost: reconnecting", 30)
        third = WebProc(term.home, "--no-session", env={"PISCES_WEB_TOKEN": "another-token-0123456789abcdef"})
        servers.append(third)
        proxy.target = ("127.0.0.1", third.port)
        proxy.allow()
        term.wait_for("the server refused the token (HTTP", 60)  # no use trying again: attach ends
        assert stty_same(term)
        assert "EXIT=1" in term.screen()
    finally:
        proxy.close()
        for w in servers:
            w.close()
