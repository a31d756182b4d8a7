"""The session's plan and its MCP servers in the browser UI (issues 28 and 27 shown by issue 26's web mode), in
Debian's headless Chromium against the real process. Set PISCES_WEB_SCREENSHOTS=DIR to keep the screenshots.

- The plan card follows ``todo_update`` live (the model's ``todo_write``, another client's ``set_todos``) and comes
  back from the snapshot's ``get_state.todoPhases`` after a reload.
- The MCP badge and list show each server's status from ``mcp_status`` (a good server connected with its tools, a
  crashing one failed with its error) and follow ``mcp_server_status`` after Disable.
"""

from __future__ import annotations

import os
import sys

import pytest
from browserkit import LIVE, needs_chromium, shot
from webproc import WebProc

pytestmark = needs_chromium
SERVERS = os.path.join(os.path.dirname(__file__), "..", "..", "core", "mcp", "servers.py")


def tasks(page) -> list[list[str]]:
    return page.eval("Array.from(document.querySelectorAll('#todos-list .task')).map(t => "
                     "[t.dataset.status, t.querySelector('.content').textContent])")


PLAN = {"op": "replace", "phases": [
    {"name": "Parser", "tasks": [{"content": "Read the grammar"}, {"content": "Write the tokenizer"}]},
    {"name": "Tests", "tasks": [{"content": "Cover the error cases"}]}]}


def todo(call_id: str, *ops: dict) -> dict:
    return {"toolCalls": [{"name": "todo_write", "arguments": {"ops": list(ops)}, "id": call_id}]}


def test_the_plan_card_follows_the_todo_list(browser, home):
    home.write_json("settings.json", {"todo": {"reminders": False}})
    script = home.faux_script([
        todo("c1", PLAN),
        todo("c2", {"op": "update", "id": "t1", "status": "completed"},
             {"op": "update", "id": "t2", "status": "in_progress"}),
        {"text": "The tokenizer is next."}])
    with WebProc(home, "--provider", "faux", "--faux-script", script, "--approval-mode", "yolo",
                 "--tools", "read,bash,edit,write,todo_write") as w:
        page = browser.new_page()
        page.goto(w.pair_url)
        page.wait_for(LIVE)
        assert page.eval("document.querySelector('#todos').hidden")  # no list: no card
        page.type_into("#prompt", "Write the parser")
        page.click("#send-btn")
        page.wait_for("document.body.textContent.includes('The tokenizer is next.') && !window.PiscesApp.state.busy")
        page.wait_for("!document.querySelector('#todos').hidden")
        assert tasks(page) == [["completed", "Read the grammar"], ["in_progress", "Write the tokenizer"],
                               ["pending", "Cover the error cases"]]
        assert page.eval("document.querySelector('#todos-count').textContent") == "1/3 done"
        assert page.eval("Array.from(document.querySelectorAll('#todos-list .phase-name')).map(p => p.textContent)") \
            == ["Parser", "Tests"]
        shot(page, "todos")

        # another client changes the list: the page follows the todo_update at once
        ws = w.ws()
        w.recv(ws)
        got = w.request(ws, {"type": "set_todos", "phases": [
            {"name": "Parser", "tasks": [{"content": "Read the grammar", "status": "completed"},
                                         {"content": "Write the tokenizer", "status": "completed"}]},
            {"name": "Tests", "tasks": [{"content": "Cover the error cases", "status": "abandoned",
                                         "notes": "no fixtures yet"}]}]})
        assert got["success"], got
        page.wait_for("document.querySelector('#todos-count').textContent === '2/3 done'")
        assert tasks(page)[2] == ["abandoned", "Cover the error cases"]
        assert page.eval("document.querySelector('#todos-list .notes').textContent") == "no fixtures yet"
        ws.close()
        page.click("#todos-head")  # folded to one line
        assert page.eval("getComputedStyle(document.querySelector('#todos-list')).display") == "none"
        page.reload()  # the snapshot's get_state.todoPhases draws it again
        page.wait_for(LIVE)
        page.wait_for("document.querySelectorAll('#todos-list .task').length === 3")
        assert page.eval("document.querySelector('#todos-count').textContent") == "2/3 done"
        ws = w.ws()
        w.recv(ws)
        assert w.request(ws, {"type": "set_todos", "phases": []})["success"]
        page.wait_for("document.querySelector('#todos').hidden")  # an empty list: the card goes
        ws.close()


def test_mcp_servers_are_shown_with_their_status(browser, home, tmp_path):
    pytest.importorskip("mcp")
    marker = f"mcpweb-{tmp_path.name}"

    def server(kind: str) -> dict:
        return {"command": sys.executable, "args": [os.path.abspath(SERVERS), kind, "0", marker]}

    home.write_json("mcp.json", {"mcpServers": {"docs": server("good"), "broken": server("crash")}})
    with WebProc(home, "--provider", "faux", "--no-session") as w:
        page = browser.new_page()
        page.goto(w.pair_url)
        page.wait_for(LIVE)
        page.wait_for("document.querySelector('#mcp-badge').textContent === 'MCP 1/2'", timeout=90)
        page.click("#mcp-badge")  # opens More with the list
        page.wait_for("document.querySelectorAll('#mcp-list li[data-server]').length === 2 && "
                      "!document.querySelector('#tab-more').hidden")
        # the crashing server may be retried (connecting again): its failure and error show when it fails
        page.wait_for("document.querySelector('#mcp-list li[data-server=broken] .meta').textContent"
                      ".startsWith('failed') && document.querySelector('#mcp-badge').classList.contains('bad')",
                      timeout=90)
        rows = page.eval("""Object.fromEntries(Array.from(document.querySelectorAll('#mcp-list li[data-server]')).map(li =>
            [li.dataset.server, {meta: li.querySelector('.meta').textContent,
                                 error: (li.querySelector('.error') || {}).textContent || ''}]))""")
        assert rows["docs"]["meta"].startswith("connected · stdio") and " tools" in rows["docs"]["meta"], rows
        assert rows["broken"]["meta"].startswith("failed") and rows["broken"]["error"], rows
        shot(page, "mcp")
        page.click("#mcp-list li[data-server=docs] button")  # Disable: the status event updates the page
        page.wait_for("document.querySelector('#mcp-list li[data-server=docs] .meta').textContent"
                      ".startsWith('disabled')", timeout=60)
        page.wait_for("document.querySelector('#mcp-badge').textContent === 'MCP 0/2'")
