"""The browser UI in a real headless Chromium (Debian's package, driven over the DevTools protocol): a prompt
streams and renders, a tool card shows a diff, approvals are answered from the page, a reload resumes a reply
in progress, a hostile message does not execute. Set PISCES_WEB_SCREENSHOTS=DIR to keep the screenshots
(docs/web.md shows them)."""

from __future__ import annotations

import json
import os
import threading

from browserkit import needs_chromium, shot
from webproc import WebProc

from scripted_server import Gate, Reply

pytestmark = needs_chromium


def open_ui(browser, w: WebProc, width: int = 1200, height: int = 820, mobile: bool = False, pair: bool = True):
    page = browser.new_page(width, height, mobile)
    page.goto(w.pair_url if pair else w.base + "/")  # the printed one-time link: a device secret, then the UI
    page.wait_for("document.querySelector('#conn.live') && window.PiscesApp.state.lastSeq !== null")
    return page


def send_prompt(page, text: str) -> None:
    page.type_into("#prompt", text)
    page.click("#send-btn")


MARKDOWN = ("## Plan\n\nHere is **the** fix:\n\n```python\ndef add(a, b):\n    return a + b\n```\n\n"
            "| step | state |\n|---|---|\n| 1 | done |\n")


def test_a_prompt_streams_and_renders(browser, home):
    script = home.faux_script([{"thinking": "Consider the request carefully.", "text": MARKDOWN, "chunkSize": 6}])
    with WebProc(home, "--provider", "faux", "--faux-script", script) as w:
        page = open_ui(browser, w)
        send_prompt(page, "Write an add function")
        page.wait_for("document.querySelector('.msg.assistant .md h2') && !window.PiscesApp.state.busy")
        got = page.eval("""(() => {
            const m = document.querySelector('.msg.assistant');
            return {h2: m.querySelector('.md h2').textContent, strong: m.querySelector('.md strong').textContent,
                    code: m.querySelector('pre code').textContent, hl: !!m.querySelector('pre code.hljs span'),
                    table: m.querySelectorAll('table td').length, thinking: m.querySelector('details.thinking .body').textContent,
                    user: document.querySelector('.msg.user .text').textContent};
        })()""")
        assert got == {"h2": "Plan", "strong": "the", "code": "def add(a, b):\n    return a + b\n", "hl": True,
                       "table": 2, "thinking": "Consider the request carefully.", "user": "Write an add function"}
        page.wait_for("document.querySelector('#usage').textContent.includes('$')")
        page.wait_for("document.querySelectorAll('#session-list li:not(.note)').length === 1")  # the session file now exists
        shot(page, "conversation")
        phone = open_ui(browser, w, 390, 844, mobile=True, pair=False)  # a second tab on the same session
        phone.wait_for("document.querySelector('.msg.assistant .md h2')")
        shot(phone, "phone")
        phone.click("#menu-btn")
        phone.click(".tabs button[data-tab=tree]")
        phone.wait_for("document.querySelectorAll('#tree .node').length >= 2 && "
                       "document.querySelector('#drawer').getBoundingClientRect().left === 0")  # slid in
        shot(phone, "phone-tree")
        assert page.exceptions() == [] and phone.exceptions() == []


def test_a_tool_card_shows_the_edit_as_a_diff(browser, home):
    with open(os.path.join(home.cwd, "calc.py"), "w") as f:
        f.write("def add(a, b):\n    return a - b\n")
    script = home.faux_script([
        {"toolCalls": [{"name": "edit", "arguments": {"path": "calc.py", "edits": [
            {"oldText": "    return a - b", "newText": "    return a + b"}]}}]},
        {"text": "Fixed the sign in `add`."}])
    with WebProc(home, "--provider", "faux", "--faux-script", script) as w:
        page = open_ui(browser, w)
        send_prompt(page, "Fix add")
        page.wait_for("document.querySelector('.tool.done .result pre.diff') && !window.PiscesApp.state.busy")
        diff = page.eval("""(() => {
            const d = document.querySelector('.tool.done .result pre.diff');
            return {add: [...d.querySelectorAll('.dl.add')].map(e => e.textContent),
                    del: [...d.querySelectorAll('.dl.del')].map(e => e.textContent),
                    name: document.querySelector('.tool.done .name').textContent};
        })()""")
        assert diff["name"] == "edit"
        shown = page.eval("[...document.querySelectorAll('.tool.done pre.diff')].filter(e => e.offsetParent !== null).length")
        assert shown == 1  # the change once: the result's numbered diff, not the arguments' old/new text again
        assert any("return a + b" in line for line in diff["add"]) and any("return a - b" in line for line in diff["del"])
        with open(os.path.join(home.cwd, "calc.py")) as f:
            assert "a + b" in f.read()
        shot(page, "tool-diff")
        assert page.exceptions() == []


SELECT_EXTENSION = '''
def register(pi):
    @pi.on("tool_call")
    async def gate(event, ctx):
        command = event.input.get("command", "")
        ok = await ctx.ui.select("Allow bash: " + command + "?", ["Approve", "Deny"]) == "Approve"
        return None if ok else {"block": True, "reason": "Denied from the page"}
'''


def test_approvals_are_answered_from_the_page(browser, home):
    """The session's approval policy (the web mode asks before commands: mode write) asks the phone with
    typed frames: one call approved, one denied. Then pi's select form of an approval, from an extension."""
    script = home.faux_script([
        {"toolCalls": [{"name": "bash", "arguments": {"command": "echo typed-approval-ran"}}]},
        {"toolCalls": [{"name": "bash", "arguments": {"command": "echo never-ran"}}]},
        {"text": "One ran, one was denied."}])
    with WebProc(home, "--provider", "faux", "--faux-script", script) as w:
        page = open_ui(browser, w, 390, 844, mobile=True)
        send_prompt(page, "run both")
        page.wait_for("document.querySelector('.card.approval h3')")
        card = page.eval("(() => { const c = document.querySelector('.card.approval'); return {"
                         "title: c.querySelector('h3').textContent, what: c.querySelector('pre.identity').textContent,"
                         "buttons: [...c.querySelectorAll('.buttons button')].map(b => b.textContent)}; })()")
        assert card == {"title": "Approve bash?", "what": "echo typed-approval-ran",
                        "buttons": ["Approve", "For this session", "Always", "Deny"]}
        shot(page, "phone-approval")
        page.click(".card.approval .buttons button.primary")
        page.wait_for("document.querySelector('.card.approval pre.identity') && "
                      "document.querySelector('.card.approval pre.identity').textContent === 'echo never-ran'")
        page.click(".card.approval .buttons button.danger")
        page.wait_for("!window.PiscesApp.state.busy && document.querySelectorAll('.tool.done, .tool.failed').length === 2")
        results = page.eval("[...document.querySelectorAll('.tool .result pre')].map(e => e.textContent)")
        assert any("typed-approval-ran" in r for r in results)
        assert any("denied" in r.lower() for r in results) and not any("never-ran\n" == r for r in results)
        assert page.eval("document.querySelectorAll('.card').length") == 0  # answered cards are gone
        assert page.exceptions() == []
    ext = os.path.join(home.root, "select_ext.py")
    with open(ext, "w") as f:
        f.write(SELECT_EXTENSION)
    script = home.faux_script([{"toolCalls": [{"name": "bash", "arguments": {"command": "echo select-ran"}}]},
                               {"text": "Ran."}], name="select.json")
    with WebProc(home, "--provider", "faux", "--faux-script", script, "--yolo", "-e", ext) as w:
        page = open_ui(browser, w, 390, 844, mobile=True)
        send_prompt(page, "run it")
        page.wait_for("document.querySelector('.card.approval h3')")
        assert page.eval("document.querySelector('.card.approval h3').textContent") == "Allow bash: echo select-ran?"
        page.click(".card.approval .buttons button.primary")  # "Approve" of the select form
        page.wait_for("!window.PiscesApp.state.busy && document.querySelector('.tool.done')")
        assert "select-ran" in page.eval("document.querySelector('.tool.done .result pre').textContent")
        assert page.exceptions() == []


def _chunk(delta=None, finish=None):
    return {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "scripted-model",
            "choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish}]}


def test_a_reload_resumes_a_reply_in_progress(browser, home, server):
    first, second = threading.Event(), threading.Event()
    words = [f"word{i} " for i in range(30)]
    events = [_chunk({"role": "assistant", "content": ""})]
    for i, word in enumerate(words):
        if i == 10:
            events.append(Gate(first))
        if i == 20:
            events.append(Gate(second))
        events.append(_chunk({"content": word}))
    events += [_chunk({}, "stop")]
    server.push(Reply.sse(events, done=True))
    home.scripted_provider(server.url + "/v1", {"retry": {"provider": {"idleTimeoutMs": 120000}}})
    with WebProc(home) as w:
        page = open_ui(browser, w)
        send_prompt(page, "stream slowly")
        streaming = "document.querySelector('.msg.assistant.streaming .md')"
        page.wait_for(f"{streaming} && {streaming}.textContent.includes('word9')")
        page.reload()  # the page is gone, the reply goes on
        page.wait_for(f"{streaming} && {streaming}.textContent.trim() === {json.dumps(''.join(words[:10]).strip())}")
        first.set()
        page.wait_for(f"{streaming}.textContent.includes('word19')")
        page.eval("window.PiscesApp.state.ws.close(), true")  # the connection drops (a phone asleep) ...
        page.wait_for("document.querySelector('#conn.down')")
        second.set()  # ... while the rest streams
        page.wait_for("document.querySelector('#conn.live') && !window.PiscesApp.state.busy")
        final = page.eval("[...document.querySelectorAll('.msg.assistant .md')].map(e => e.textContent.trim())")
        assert final == ["".join(words).strip()]  # every word once, in order
        assert page.exceptions() == []


HOSTILE = ("<script>window.__pwned = 'script'</script>\n\n"
           "<img src=x onerror=\"window.__pwned = 'img'\">\n\n"
           "[click me](javascript:window.__pwned='link') and <a href=\"javascript:window.__pwned='a'\">here</a>\n\n"
           "<svg onload=\"window.__pwned='svg'\"></svg> <iframe src=\"javascript:window.__pwned='iframe'\"></iframe>\n\n"
           "![x](javascript:window.__pwned='image') <details open ontoggle=\"window.__pwned='details'\">d</details>\n\n"
           "<b onmouseover=\"window.__pwned='b'\">bold</b> [ok](https://example.com)")


def test_a_hostile_message_does_not_execute(browser, home):
    script = home.faux_script([
        {"toolCalls": [{"name": "bash", "arguments": {"command": "printf '<img src=y onerror=window.__pwned=1>'"}}]},
        {"text": HOSTILE}])
    with WebProc(home, "--provider", "faux", "--faux-script", script, "--yolo") as w:
        page = open_ui(browser, w)
        send_prompt(page, "<img src=z onerror=\"window.__pwned='prompt'\"> <script>window.__pwned='p2'</script>")
        page.wait_for("!window.PiscesApp.state.busy && document.querySelectorAll('.msg.assistant .md').length >= 1 &&"
                      " document.querySelector('.msg.assistant .md a[href^=\"https\"]')")
        page.reload()  # and once more from the session history (the snapshot), not the live stream
        page.wait_for("document.querySelector('.msg.assistant .md a[href^=\"https\"]')")
        found = page.eval("""(() => {
            const box = document.querySelector('#messages');
            const all = [...box.querySelectorAll('*')];
            return {pwned: window.__pwned === undefined ? null : String(window.__pwned),
                    handlers: all.filter(e => [...e.attributes].some(a => a.name.startsWith('on'))).map(e => e.outerHTML),
                    active: box.querySelectorAll('script, iframe, svg, object, embed, details[ontoggle]').length,
                    jsLinks: box.querySelectorAll('a[href^="javascript" i], img[src^="javascript" i]').length,
                    shown: box.textContent.includes("<script>window.__pwned = 'script'</script>"),
                    links: [...box.querySelectorAll('a[href]')].map(a => a.getAttribute('href'))};
        })()""")
        assert found == {"pwned": None, "handlers": [], "active": 0, "jsLinks": 0, "shown": True,
                         "links": ["https://example.com"]}
        assert page.events("Page.javascriptDialogOpening") == []
        assert page.exceptions() == []


def test_queue_abort_fork_sessions_tree_and_export(browser, home):
    script = home.faux_script({"responses": [{"text": "first answer"},
                                             {"text": "slow " * 400, "chunkSize": 5, "delayMs": 20}], "loop": True})
    with WebProc(home, "--provider", "faux", "--faux-script", script) as w:
        page = open_ui(browser, w)
        state = "window.PiscesApp.state"
        send_prompt(page, "one")
        page.wait_for(f"!{state}.busy && document.querySelector('.msg.assistant .md')")
        send_prompt(page, "two")
        page.wait_for(f"{state}.busy && document.querySelector('.msg.assistant.streaming')")
        send_prompt(page, "queued steer")  # while the reply runs: a steer, shown in the queue
        page.wait_for("!document.querySelector('#queue').hidden && "
                      "document.querySelector('#queue-list').textContent.includes('queued steer')")
        shot(page, "queue")
        page.click("#clear-queue")  # back into the editor
        page.wait_for("document.querySelector('#queue').hidden && document.querySelector('#prompt').value === 'queued steer'")
        page.click("#abort-btn")
        page.wait_for(f"!{state}.busy && document.querySelector('.msg.assistant .note') && "
                      "document.querySelector('.msg.assistant .note').textContent === 'Stopped.'")
        first_file = page.eval(f"{state}.state.sessionFile")
        assert page.eval("fetch('/export').then(r => r.status)") == 401  # the browser sends nothing by itself
        status, body = page.eval("window.Pisces.authHeaders().then(h => fetch('/export', {headers: h}))"
                                 ".then(r => r.text().then(t => [r.status, t.slice(0, 4000)]))")
        assert status == 200 and "pisces session" in body
        # fork before the first message: a new session, its text back in the editor
        page.eval("document.querySelector('#prompt').value = ''")
        page.click(".msg.user .fork")
        page.wait_for(f"{state}.state.sessionFile !== {json.dumps(first_file)} && "
                      "document.querySelector('#prompt').value === 'one'")
        page.wait_for("document.querySelectorAll('#messages .msg').length === 0")
        send_prompt(page, "one, again")
        page.wait_for(f"!{state}.busy && document.querySelectorAll('#session-list li:not(.note)').length === 2")
        # switch back to the first session from the list
        page.click("#session-list li:not(.current)")
        page.wait_for(f"{state}.state.sessionFile === {json.dumps(first_file)} && "
                      "document.querySelector('#messages').textContent.includes('first answer')")
        # the tree: label an entry, then move to it
        page.click(".tabs button[data-tab=tree]")
        page.wait_for("document.querySelectorAll('#tree .node').length >= 4")
        page.eval("[...document.querySelectorAll('#tree .node')].find(n => n.textContent.startsWith('one'))"
                  ".querySelector('.lbl-btn').click(), true")
        page.eval("(() => { const i = document.querySelector('#tree input[type=text]'); i.value = 'start';"
                  " i.dispatchEvent(new KeyboardEvent('keydown', {key: 'Enter'})); return true; })()")
        page.wait_for("[...document.querySelectorAll('#tree .label')].some(l => l.textContent === 'start')")
        page.eval("[...document.querySelectorAll('#tree .node')].find(n => n.querySelector('.label'))"
                  ".click(), true")
        page.wait_for("document.querySelector('#prompt').value === 'one'")  # navigated: its text to edit
        shot(page, "tree")
        assert page.exceptions() == []


def test_the_plan_of_exit_plan_mode_is_approved_from_the_page(browser, home):
    """Plan mode (docs/planning.md#plan-mode): the approval card of ``exit_plan_mode`` shows the plan file and
    the plan itself; approving it on the page turns plan mode off."""
    script = home.faux_script([
        {"toolCalls": [{"name": "exit_plan_mode", "arguments": {"title": "Web plan", "plan": "1. WEB-STEP\n"}}]},
        {"text": "Plan approved."}])
    with WebProc(home, "--provider", "faux", "--faux-script", script) as w:
        page = open_ui(browser, w)
        page.eval("window.PiscesApp.call('set_plan_mode', {enabled: true}).then(r => { window.planOn = r; })")
        page.wait_for("window.planOn && window.planOn.planMode.enabled === true")
        send_prompt(page, "plan it")
        page.wait_for("document.querySelector('.card.approval h3')")
        card = page.eval("(() => { const c = document.querySelector('.card.approval'); return {"
                         "title: c.querySelector('h3').textContent, what: c.querySelector('pre.identity').textContent,"
                         "buttons: [...c.querySelectorAll('.buttons button')].map(b => b.textContent)}; })()")
        assert card["title"] == "Approve exit_plan_mode?" and card["buttons"] == ["Approve", "Deny"]
        assert card["what"].endswith("-plan.md\n\n1. WEB-STEP\n") and "/.pisces/plans/" in card["what"]
        page.click(".card.approval .buttons button.primary")
        page.wait_for("!window.PiscesApp.state.busy && document.querySelector('.tool.done')")
        page.eval("window.PiscesApp.call('get_state').then(r => { window.after = r; })")
        page.wait_for("window.after && window.after.planMode.enabled === false")
        assert page.exceptions() == []
