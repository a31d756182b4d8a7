"""The UI items of issue 26 in a real headless Chromium: the first prompt's bubble at once and "working" until
the first token, the title from the first prompt, the directory and git branch in the header, the empty state,
the auto-retry switch showing its real state, ``--no-session`` listing no saved session, a tree that indents
only at branches, tabs that look like tabs, dark-mode selects, a phone header that stays small and a drawer a
phone can close, Deny with "what to do instead", a styled login page, and the start-up lines. Set
PISCES_WEB_SCREENSHOTS=DIR to keep the screenshots (docs/web.md shows them)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest
from browserkit import LIVE, needs_chromium, shot
from webproc import WebProc

pytestmark = needs_chromium


def open_ui(browser, w: WebProc, width: int = 1200, height: int = 820, mobile: bool = False, dark: bool = False):
    page = browser.new_page(width, height, mobile)
    if dark:
        page.send("Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": "dark"}]})
    page.goto(w.pair_url)
    page.wait_for(LIVE)
    return page


def git_repo(path: str, branch: str) -> None:
    if shutil.which("git"):
        subprocess.run(["git", "init", "-q", "-b", branch, path], check=True, capture_output=True)
    else:  # what pisces reads: .git/HEAD
        os.makedirs(os.path.join(path, ".git"), exist_ok=True)
        with open(os.path.join(path, ".git", "HEAD"), "w") as f:
            f.write(f"ref: refs/heads/{branch}\n")


# the first prompt: its bubble at once, "working" until the first token, then the echo takes the bubble's place
FIRST_PROMPT_JS = """(() => {
  const log = [];
  const working = () => !document.querySelector('#working').hidden;
  const text = () => !!document.querySelector('.msg.assistant .md') && document.querySelector('.msg.assistant .md').textContent.length > 0;
  new MutationObserver(() => log.push({t: performance.now(), working: working(), text: text()}))
    .observe(document.querySelector('#messages'), {subtree: true, childList: true, attributes: true, characterData: true});
  window.__firstLog = log;
  const box = document.querySelector('#prompt');
  box.value = 'Fix the failing test';
  const t0 = performance.now();
  document.querySelector('#send-btn').click();
  const bubble = document.querySelector('#messages .msg.user');
  return {bubbleMs: performance.now() - t0, bubble: bubble && bubble.querySelector('.text').textContent,
          pending: !!(bubble && bubble.classList.contains('pending')), working: working(),
          button: document.querySelector('#send-btn').textContent, stop: !document.querySelector('#abort-btn').hidden,
          empty: !document.querySelector('#empty').hidden, t0: t0};
})()"""


def test_first_prompt_header_title_and_empty_state(browser, home):
    git_repo(home.cwd, "feature-x")
    script = home.faux_script([{"text": "Done: the test passes now.", "chunkSize": 4, "delayMs": 30}])
    with WebProc(home, "--provider", "faux", "--faux-script", script) as w:
        banner = "".join(w.lines)
        assert "model faux/faux, in " in banner and "(git branch feature-x)" in banner  # the start-up lines
        page = open_ui(browser, w)
        page.wait_for("document.querySelector('#where .branch')")
        got = page.eval("({empty: !document.querySelector('#empty').hidden, where: document.querySelector('#empty-where').textContent,"
                        "cwd: document.querySelector('#where .cwd').textContent, branch: document.querySelector('#where .branch').textContent,"
                        "title: document.querySelector('#session-name').textContent})")
        assert got["empty"] and got["branch"] == "feature-x" and got["cwd"].endswith("work")
        assert got["where"].endswith("work (feature-x)") and got["title"] == "New session"
        shot(page, "empty")
        first = page.eval(FIRST_PROMPT_JS)
        assert first["bubble"] == "Fix the failing test" and first["pending"] and first["working"], first
        assert first["button"] != "Send" and first["stop"] and not first["empty"], first
        assert first["bubbleMs"] < 100, first  # drawn in the click's own task, not after a round trip
        page.wait_for("!window.PiscesApp.state.busy && document.querySelector('.msg.assistant .md')")
        log = page.eval("window.__firstLog")
        before = [e for e in log if not e["text"]]
        assert before and all(e["working"] for e in before[:1])  # "working" shown from the first moment
        first_text = next(e for e in log if e["text"])
        assert not first_text["working"]  # and gone with the first token
        assert not any(e["working"] for e in log if e["text"])
        users = page.eval("[...document.querySelectorAll('#messages .msg.user')].map(e => [e.querySelector('.text').textContent, e.classList.contains('pending')])")
        assert users == [["Fix the failing test", False]]  # the echo took the bubble's place: one, not two
        assert page.eval("document.querySelector('#session-name').textContent") == "Fix the failing test"
        assert page.eval("document.title").startswith("Fix the failing test")
        assert page.eval("document.querySelector('#empty').hidden")
        figure = page.eval("window.PiscesApp.sentAt !== undefined")
        assert figure
        shot(page, "first-prompt")
        assert page.exceptions() == []


def test_switches_read_their_real_state_and_no_session_lists_nothing(browser, home):
    script = home.faux_script([{"text": "saved reply"}])
    with WebProc(home, "--provider", "faux", "--faux-script", script) as w:  # a saved session in this directory
        ws = w.ws()
        w.recv(ws)
        ws.send(json.dumps({"id": "p", "type": "prompt", "message": "remember me"}))
        w.until(ws, lambda f: f.get("type") == "agent_settled")
        state = w.request(ws, {"type": "get_state"})["data"]
        assert state["autoRetryEnabled"] is True  # the field get_state gained
        ws.close()
        page = open_ui(browser, w)
        page.wait_for("document.querySelectorAll('#session-list li:not(.note)').length === 1")
        page.click(".tabs button[data-tab=more]")
        assert page.eval("document.querySelector('#auto-retry').checked") is True  # retry is on: the switch says so
        page.click("#auto-retry")  # off, through set_auto_retry
        assert page.eval("window.PiscesApp.call('get_state').then(s => s.autoRetryEnabled)") is False  # same socket: after it
        page.reload()
        page.wait_for(LIVE)
        page.wait_for("window.PiscesApp.state.state && window.PiscesApp.state.state.autoRetryEnabled === false")
        assert page.eval("document.querySelector('#auto-retry').checked") is False  # read back after a reload
    with WebProc(home, "--provider", "faux", "--faux-script", script, "--no-session") as w:
        page = open_ui(browser, w)
        page.wait_for("document.querySelector('#session-list li.unsaved')")
        assert page.eval("document.querySelectorAll('#session-list li:not(.unsaved)').length") == 0
        assert "not saved" in page.eval("document.querySelector('#session-list').textContent")


def test_tree_indents_only_at_branches_and_tabs_look_like_tabs(browser, home):
    script = home.faux_script({"responses": [{"text": "ok"}], "loop": True})
    with WebProc(home, "--provider", "faux", "--faux-script", script) as w:
        ws = w.ws()
        w.recv(ws)
        for i in range(12):  # 24 entries in one line
            ws.send(json.dumps({"id": f"p{i}", "type": "prompt", "message": f"step {i}"}))
            w.until(ws, lambda f: f.get("type") == "agent_settled")
        page = open_ui(browser, w)
        page.click(".tabs button[data-tab=tree]")
        page.wait_for("document.querySelectorAll('#tree .node').length >= 24")
        lefts = page.eval("[...document.querySelectorAll('#tree .node')].map(n => Math.round(n.getBoundingClientRect().left))")
        assert len(set(lefts)) == 1, lefts  # a line of 24 entries: no indentation at all
        # a branch: back to the third entry, and a new prompt from there
        tree = w.request(ws, {"type": "get_session_tree"})["data"]
        node, ids = tree["nodes"][0], []
        while node:
            ids.append(node["entry"]["id"])
            node = node["children"][0] if node.get("children") else None
        assert w.request(ws, {"type": "navigate_tree", "targetId": ids[2]})["success"]
        ws.send(json.dumps({"id": "b", "type": "prompt", "message": "another way"}))
        w.until(ws, lambda f: f.get("type") == "agent_settled")
        ws.close()
        page.eval("window.Pisces.loadTree()")
        page.wait_for("document.querySelectorAll('#tree ul.branch').length === 2")
        lefts = page.eval("[...document.querySelectorAll('#tree .node')].map(n => Math.round(n.getBoundingClientRect().left))")
        # navigating to the user message "step 1" (the third entry) branches at its parent, the second entry: the
        # two entries up to there stay flush left, the two branches after it are indented once, and no further
        assert len(set(lefts)) == 2 and lefts[:2] == [min(lefts)] * 2 and min(lefts) not in lefts[2:], lefts
        tabs = page.eval("""[...document.querySelectorAll('.tabs button')].map(b => { const c = getComputedStyle(b);
            return {active: b.classList.contains('active'), top: c.borderTopWidth, bottom: c.borderBottomColor, bg: c.backgroundColor}; })""")
        active = [t for t in tabs if t["active"]]
        assert len(active) == 1 and all(t["top"] == "0px" for t in tabs)  # no boxed buttons: an underline
        assert all(t["bottom"] == "rgba(0, 0, 0, 0)" for t in tabs if not t["active"])
        assert active[0]["bottom"] != "rgba(0, 0, 0, 0)"
        shot(page, "tree-branches")


def test_dark_mode_phone_header_drawer_and_deny_with_instructions(browser, home):
    script = home.faux_script([{"toolCalls": [{"name": "bash", "arguments": {"command": "rm -rf build"}}]},
                               {"text": "Understood: I will keep the build directory."}])
    with WebProc(home, "--provider", "faux", "--faux-script", script) as w:
        page = open_ui(browser, w, 390, 844, mobile=True, dark=True)
        bg = page.eval("getComputedStyle(document.querySelector('#model-select')).backgroundColor")
        fg = page.eval("getComputedStyle(document.querySelector('#model-select')).color")
        assert bg == "rgb(13, 17, 23)" and fg == "rgb(230, 237, 243)", (bg, fg)  # a dark select on a dark page
        header = page.eval("document.querySelector('#bar').getBoundingClientRect().height")
        assert header <= 844 * 0.1, header  # one compact row, not a quarter of the screen
        page.click("#menu-btn")
        page.wait_for("document.querySelector('#drawer').getBoundingClientRect().left === 0")
        shot(page, "phone-drawer")
        page.click("#drawer-close")
        page.wait_for("document.querySelector('#drawer').getBoundingClientRect().right <= 0")
        page.click("#menu-btn")
        page.wait_for("document.querySelector('#drawer').getBoundingClientRect().left === 0")
        page.eval("document.querySelector('#scrim').click()")
        page.wait_for("document.querySelector('#drawer').getBoundingClientRect().right <= 0")
        page.type_into("#prompt", "clean up")
        page.click("#send-btn")
        page.wait_for("document.querySelector('.card.approval textarea.instead')")
        page.type_into(".card.approval textarea.instead", "Keep the build directory; delete only *.pyc")
        shot(page, "phone-deny")
        page.click(".card.approval .buttons button.danger")
        page.wait_for("!window.PiscesApp.state.busy && document.querySelectorAll('.msg.user').length === 2", timeout=60)
        users = page.eval("[...document.querySelectorAll('.msg.user .text')].map(e => e.textContent)")
        assert users == ["clean up", "Keep the build directory; delete only *.pyc"]  # reached the model as a steer
        result = page.eval("document.querySelector('.tool .result pre').textContent")
        assert "denied" in result.lower()
        shot(page, "phone-dark")
        assert page.exceptions() == []


def test_the_login_page_is_styled_without_a_credential(browser, home):
    with WebProc(home, "--provider", "faux", "--no-session") as w:
        page = browser.new_page(1200, 820)
        page.goto(w.base + "/login")
        style = page.eval("(() => { const b = getComputedStyle(document.querySelector('button'));"
                          "const m = getComputedStyle(document.querySelector('.login'));"
                          "return {bg: b.backgroundColor, radius: m.borderTopLeftRadius}; })()")
        assert style == {"bg": "rgb(9, 105, 218)", "radius": "14px"}, style  # login.css came without a credential
        shot(page, "login")
        # a browser never paired: the UI sends it to the login page
        fresh = browser.new_page(1200, 820)
        fresh.goto(w.base.replace("127.0.0.1", "localhost") + "/")
        fresh.wait_for("location.pathname === '/login'")


@pytest.mark.skipif(shutil.which("zbarimg") is None, reason="no zbarimg here (apt-get install zbar-tools)")
def test_pair_another_device_shows_a_qr_code_a_phone_can_scan(browser, home, tmp_path):
    with WebProc(home, "--provider", "faux", "--no-session") as w:
        page = open_ui(browser, w)
        page.click(".tabs button[data-tab=more]")
        page.click("#pair-btn")
        page.wait_for("document.querySelector('#pair-out svg.qr')")
        link = page.eval("document.querySelector('#pair-out code').textContent")
        assert link.startswith(w.base + "/pair?token=")
        path = page.screenshot(str(tmp_path / "pair.png"))
        shot(page, "pair-qr")
        run = subprocess.run(["zbarimg", "--quiet", "--raw", path], capture_output=True, text=True, timeout=60)
        assert run.stdout.strip() == link  # a real reader finds the link in the page as drawn
        other = browser.new_page(390, 844, True)  # and it pairs a second device
        other.goto(link)
        other.wait_for(LIVE)
