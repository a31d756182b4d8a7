"""The real ``pisces`` in tmux with the faux model: type, steer, follow up, abort, answer an approval, /model,
resize, Ctrl+Z/fg, Ctrl+C twice, and the terminal's state (``stty -g``) the same before and after."""

from __future__ import annotations

import json
import os
import shutil
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "e2e"))

from e2eproc import PISCES, Home  # noqa: E402
from tmuxterm import Tmux  # noqa: E402

CAPTURES = os.environ.get("PISCES_TUI_CAPTURES")  # a folder: the tests save their screens there (docs/tui.md)


@pytest.fixture
def term(tmp_path):
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed (apt-get install tmux): the terminal UI's e2e tests need it")
    home = Home(str(tmp_path))
    t = Tmux(home.cwd, home.env(TERM="xterm-256color"))
    t.home = home
    yield t
    t.close()


def start(term, script, *args, session=False):
    path = os.path.join(term.home.root if hasattr(term.home, "root") else term.cwd, "script.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(script, f)
    pisces = " ".join(PISCES)
    with open(os.path.join(term.cwd, "run.sh"), "w", encoding="utf-8") as f:
        f.write(f"stty -g > stty.before\n{pisces} --faux-script {path} {'' if session else '--no-session'} {' '.join(args)}\n"
                "echo EXIT=$?\nstty -g > stty.after\n")
    term.text("bash run.sh\n")
    term.wait_for("›", 30)


def capture(term, name):
    if CAPTURES:
        os.makedirs(CAPTURES, exist_ok=True)
        term.save(os.path.join(CAPTURES, name + ".ansi"))


def stty_same(term):
    term.wait_for("EXIT=", 30)
    term.wait_for("tuitest$", 10)
    import time
    after = os.path.join(term.cwd, "stty.after")
    for _ in range(100):  # written whole (the shell creates the file before stty writes into it)
        if os.path.exists(after) and open(after, encoding="utf-8").read().endswith("\n"):
            break
        time.sleep(0.1)
    with open(os.path.join(term.cwd, "stty.before")) as a, open(os.path.join(term.cwd, "stty.after")) as b:
        return a.read() == b.read()


def test_type_steer_follow_up_abort_and_quit(term):
    slow = {"text": "slow answer " * 60, "chunkSize": 6, "delayMs": 40}
    start(term, [{"text": "Hello **there**, first reply."}, slow, {"text": "steered reply"},
                 {"text": "follow-up reply"}, {"text": "never finished " * 200, "chunkSize": 4, "delayMs": 50}])
    term.text("hi")
    term.keys("Enter")
    term.wait_for("first reply.")
    term.text("go slowly")
    term.keys("Enter")
    term.wait_for("slow answer")
    term.text("steer me")
    term.keys("Enter")  # Enter while a reply runs: steer
    term.text("later please")
    term.keys("Escape", "Enter")  # Alt+Enter: a follow-up
    term.wait_for("steered reply", 60, history=True)
    term.wait_for("follow-up reply", 60, history=True)
    capture(term, "steer-follow-up")
    hist = term.history()
    assert hist.index("› steer me") < hist.index("steered reply") < hist.index("› later please")
    term.text("abort this")
    term.keys("Enter")
    term.wait_for("never finished")
    term.keys("Escape")
    term.wait_for("aborted", 30, history=True)
    term.keys("C-c")
    term.wait_for("ctrl+c again to quit")
    term.keys("C-c")
    assert stty_same(term)
    assert "EXIT=0" in term.screen()


def test_approval_model_resize_suspend(term):
    start(term, [{"toolCalls": [{"name": "bash", "arguments": {"command": "echo approved-output"}}]},
                 {"text": "tool done"}], "--approval-mode", "always-ask")
    term.text("run it")
    term.keys("Enter")
    term.wait_for("Allow once")
    capture(term, "approval")
    screen = term.screen()
    assert "$ echo approved-output" in screen and "Deny with a message" in screen
    term.text("draft kept")  # typed while the dialog is open goes nowhere...
    term.keys("Enter")  # ...Enter picks "Allow once"
    term.wait_for("tool done", 30, history=True)
    assert "approved-output" in term.history()
    term.text("my draft")
    term.text("/model")  # the draft is a command now: clear it first
    term.keys("C-u")
    term.text("/model")
    term.keys("Enter")
    term.wait_for("┌ model")
    capture(term, "model-selector")
    term.keys("Enter")
    term.wait_for("model: faux/", 30, history=True)
    term.resize(40, 20)
    term.text("still alive after resize")
    term.wait_for("still alive")
    term.resize(20, 12)
    term.resize(100, 30)
    term.keys("C-u")
    term.keys("C-z")
    term.wait_for("Stopped", 20)
    term.text("fg\n")
    term.text("back")
    term.wait_for("› back", 20)
    capture(term, "after-resume")
    term.keys("C-u", "C-d")
    assert stty_same(term)
    assert "EXIT=0" in term.screen()


def test_extension_dialogs_widget_and_status(term):
    demo = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(HERE))), "examples", "extensions",
                        "rpc_demo.py")
    start(term, [{"toolCalls": [{"name": "bash", "arguments": {"command": "rm -rf build"}}]}, {"text": "blocked ok"}],
          "-e", demo)
    term.wait_for("RPC Extension UI Demo")  # set_widget
    assert "Turns: 0" in term.screen()  # set_status, in the footer
    term.text("/rpc-input")
    term.keys("Enter")
    term.wait_for("Enter a value")
    term.text("abc")
    capture(term, "extension-input")
    term.keys("Enter")
    term.wait_for("You entered: abc", 30, history=True)
    term.text("clean up")
    term.keys("Enter")
    term.wait_for("Dangerous command: rm -rf build")
    capture(term, "extension-select")
    term.keys("Down", "Enter")  # Block
    term.wait_for("Command blocked by user", 30, history=True)
    term.wait_for("blocked ok", 30, history=True)
    term.text("/new")
    term.keys("Enter")
    term.wait_for("Clear session?")
    term.text("y")
    term.wait_for("new session", 30, history=True)
    term.keys("C-d")
    assert stty_same(term)


def test_attach_drives_a_web_session_seen_by_a_browser_client(term):
    sys.path.insert(0, os.path.join(os.path.dirname(HERE), "web"))
    from webproc import WebProc

    script = os.path.join(term.cwd, "web-script.json")
    with open(script, "w", encoding="utf-8") as f:
        json.dump([{"text": "served from the web host"}], f)
    token = "attach-test-token-0123456789"
    with WebProc(term.home, "--faux-script", script, "--no-session", env={"PISCES_WEB_TOKEN": token}) as w:
        browser = w.ws(token=token)
        assert w.recv(browser)["type"] == "snapshot"
        term.text(f"stty -g > stty.before; PISCES_WEB_TOKEN={token} {' '.join(PISCES)} attach {w.base}; "
                  "echo EXIT=$?; stty -g > stty.after\n")
        term.wait_for("attached to", 30)
        term.text("hello from the terminal")
        term.keys("Enter")
        term.wait_for("served from the web host", 30)
        capture(term, "attach")
        seen = w.until(browser, lambda f: f.get("type") == "agent_settled")
        users = [f for f in seen if f.get("type") == "message_start" and f["message"]["role"] == "user"]
        assert users and "hello from the terminal" in json.dumps(users[0])
        term.keys("C-d")
        assert stty_same(term)
        browser.close()


def test_continue_shows_the_last_session_and_message_args_start_it(term):
    start(term, [{"text": "first session reply"}], '"remember the word walrus"', "--model", "faux-reasoning",
          "--thinking", "high", session=True)
    term.wait_for("first session reply", 30, history=True)
    term.wait_for("faux-reasoning · high", 30)  # --model and --thinking, in the footer
    term.keys("C-d")
    assert stty_same(term)
    os.unlink(os.path.join(term.cwd, "stty.after"))
    term.text("clear\n")
    start(term, [{"text": "continued reply"}], "-c", session=True)
    term.wait_for("› remember the word walrus", 30)  # the resumed session's past, in the scrollback
    term.text("go on")
    term.keys("Enter")
    term.wait_for("continued reply", 30)
    capture(term, "continue")
    term.keys("C-d")
    assert stty_same(term)


def _children(pid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        out.append(int(entry))
            except (OSError, ValueError, IndexError):
                pass
    return out


def test_sigterm_restores_the_terminal(term):
    import signal
    import time

    start(term, [{"text": "x"}])
    pane = int(term._tmux("display", "-p", "-t", "t", "#{pane_pid}").strip())
    script = _children(pane)  # bash run.sh
    assert len(script) == 1
    deadline = time.monotonic() + 20
    pisces: list[int] = []
    while not pisces and time.monotonic() < deadline:
        pisces = _children(script[0])
        time.sleep(0.1)
    assert len(pisces) == 1
    term.text("unsent draft")
    term.wait_for("unsent draft")
    os.kill(pisces[0], signal.SIGTERM)
    assert stty_same(term)
    assert "EXIT=143" in term.screen()
    folder = os.path.join(term.home.agent_dir, "tui-history")
    saved = "".join(open(os.path.join(folder, n), encoding="utf-8").read() for n in os.listdir(folder))
    assert "unsent draft" in saved  # the draft went to the history, Up brings it back next time


def test_fork_and_resume(term):
    start(term, [{"text": "answer one"}, {"text": "answer two"}], session=True)
    for question, answer in (("question one", "answer one"), ("question two", "answer two")):
        term.text(question)
        term.keys("Enter")
        term.wait_for(answer, 30, history=True)
    term.text("/fork")
    term.keys("Enter")
    term.wait_for("fork from which message")
    term.keys("Enter")  # 1. question one
    term.wait_for("forked into a new session", 30, history=True)
    term.wait_for("› question one", 30)  # the message is back in the editor
    term.keys("C-u")
    term.text("/resume")
    term.keys("Enter")
    term.wait_for("resume a session")
    capture(term, "resume-selector")
    assert "question one" in term.screen()
    term.keys("Enter")
    term.wait_for("resumed", 30, history=True)
    term.keys("C-d")
    assert stty_same(term)


def test_plan_command_and_the_plan_approval_dialog(term):
    start(term, [{"toolCalls": [{"name": "write", "arguments": {"path": "early.txt", "content": "x"}}]},
                 {"toolCalls": [{"name": "exit_plan_mode",
                                 "arguments": {"title": "Tidy up", "plan": "1. remove the dead code\n"}}]},
                 {"text": "plan carried out"}])
    term.text("/plan")
    term.keys("Enter")
    term.wait_for("plan mode on", 30, history=True)
    term.wait_for("· plan mode", 10)  # the footer says so
    term.text("make a plan")
    term.keys("Enter")
    term.wait_for("Allow once", 30)
    capture(term, "plan-approval")
    screen = term.screen()
    assert "plan: Tidy up" in screen and "1. remove the dead code" in screen
    term.keys("Enter")
    term.wait_for("plan carried out", 30, history=True)
    assert "Plan mode is on" in term.history()  # the refused write said why
    assert not os.path.exists(os.path.join(term.cwd, "early.txt"))
    term.keys("C-u", "C-d")
    assert stty_same(term)


def test_sandbox_command_shows_and_changes_the_os_sandbox(term):
    start(term, [{"text": "unused"}])
    term.text("/sandbox")
    term.keys("Enter")
    term.wait_for("sandbox: workspace-write (default), network on", 30, history=True)
    term.text("/sandbox network off")
    term.keys("Enter")
    term.wait_for("sandbox: workspace-write (default), network off", 30, history=True)
    term.text("/sandbox read-only")
    term.keys("Enter")
    term.wait_for("sandbox: read-only (command), network off", 30, history=True)
    term.text("/sandbox off")
    term.keys("Enter")
    term.wait_for("sandbox: off (command), network off, not enforced", 30, history=True)
    term.text("/sandbox loose")
    term.keys("Enter")
    term.wait_for("usage: /sandbox", 30, history=True)
    term.keys("C-d")
    assert stty_same(term)
