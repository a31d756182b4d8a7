"""Pairing that survives restarts (issue 26), against the real process in Debian's headless Chromium.

- The port is the project's own: the same on every run (derived from the directory), another when it is taken.
- A browser paired once keeps working after pisces restarts: the same open page reconnects without pairing, and a
  new tab of that origin connects too. Its key is non-extractable (WebCrypto), the file the server keeps holds its
  public key only (mode 0600), and a proof of possession is good for one connection.
- ``pisces web revoke ID`` (another process) and the UI's Revoke refuse the device at once, open sockets included.
- A page served from another port of 127.0.0.1 has nothing of it and cannot open ``/ws``.
"""

from __future__ import annotations

import http.server
import json
import os
import socket
import stat
import subprocess
import threading

import pytest
from browserkit import LIVE, needs_chromium, shot
from webproc import PISCES, WebProc
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus

from pisces.modes.web.port import HIGH, LOW, candidates

pytestmark = needs_chromium


def cli(home, *words: str) -> subprocess.CompletedProcess:
    return subprocess.run([*PISCES, "web", *words], capture_output=True, text=True, env=home.env(), cwd=home.cwd,
                          timeout=60)


def opens(w: WebProc, protocols: list[str], origin: str) -> bool:
    try:
        ws = w.ws(token="", origin=origin, subprotocols=protocols)
    except (InvalidStatus, InvalidHandshake):
        return False
    try:
        return w.recv(ws)["type"] == "snapshot"
    finally:
        ws.close()


def ask(page, command: str, **fields) -> dict:
    return page.eval(f"window.PiscesApp.call({json.dumps(command)}, {json.dumps(fields)})")


def test_the_port_is_the_projects_own_and_moves_when_taken(home):
    first, second = list(candidates(home.cwd))[:2]
    assert LOW <= first < HIGH and list(candidates(home.cwd))[:2] == [first, second]
    with WebProc(home, "--provider", "faux", "--no-session") as w:
        if w.port != first:  # another program holds it on this busy machine: the alternates are the project's too
            assert w.port in candidates(home.cwd) and "is taken" in w.output
    with WebProc(home, "--provider", "faux", "--no-session") as again:
        assert again.port == w.port
        with WebProc(home, "--provider", "faux", "--no-session") as beside:  # the port is held: the next one
            assert beside.port != again.port and "is taken" in beside.output
            assert beside.port in candidates(home.cwd)
    blocker = socket.socket()
    try:  # an explicit --port that is taken is an error, not a silent move
        blocker.bind(("127.0.0.1", 0))
        blocker.listen()
        run = subprocess.run([*PISCES, "--mode", "web", "--provider", "faux", "--no-session", "--port",
                              str(blocker.getsockname()[1])], capture_output=True, text=True, env=home.env(),
                             cwd=home.cwd, timeout=60)
        assert run.returncode == 1 and "cannot listen" in run.stderr, run.stderr
    finally:
        blocker.close()


def test_a_paired_browser_survives_a_restart_and_is_refused_once_revoked(browser, home):
    script = home.faux_script([{"text": "first answer"}])
    w = WebProc(home, "--provider", "faux", "--faux-script", script)
    try:
        port = w.port
        page = browser.new_page()
        page.goto(w.pair_url)
        page.wait_for(LIVE)
        mine = ask(page, "web_devices")
        assert len(mine["devices"]) == 1 and mine["current"] == mine["devices"][0]["id"], mine
        device_id = mine["current"]
        key = page.eval("""(async () => {
            const d = await window.PiscesDevice.load();
            let exported = 'exported';
            try { await crypto.subtle.exportKey('pkcs8', d.privateKey); } catch (e) { exported = 'refused'; }
            return {kind: d.kind, extractable: d.privateKey.extractable, exported: exported,
                    local: localStorage.length, cookie: document.cookie};
        })()""")
        assert key == {"kind": "key", "extractable": False, "exported": "refused", "local": 0, "cookie": ""}, key
        path = os.path.join(home.agent_dir, "web-devices.json")
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        stored = json.load(open(path))["devices"][0]
        assert stored["kind"] == "key" and stored["publicKey"] and stored["origin"] == f"http://127.0.0.1:{port}"
        page.type_into("#prompt", "hello")
        page.click("#send-btn")
        page.wait_for("document.body.textContent.includes('first answer') && !window.PiscesApp.state.busy")

        # a proof of possession is good for one connection: replayed by a program, it opens nothing
        proof = page.eval("window.PiscesDevice.credential().then(c => c.protocol)")
        own = f"http://127.0.0.1:{port}"
        assert opens(w, ["pisces.v1", proof], own)
        assert not opens(w, ["pisces.v1", proof], own)
        fresh = page.eval("window.PiscesDevice.credential().then(c => c.protocol)")
        assert not opens(w, ["pisces.v1", fresh], f"http://127.0.0.1:{port + 1}")  # another origin: 403

        w.close()
        page.wait_for("document.querySelector('#conn.down')")
        w = WebProc(home, "--provider", "faux", "--faux-script",
                    home.faux_script([{"text": "after the restart"}], name="faux2.json"))
        assert w.port == port  # the project's port again
        page.wait_for(LIVE, timeout=60)  # the same page, reconnected by itself: no pairing link used
        assert page.eval("location.pathname") == "/"
        page.type_into("#prompt", "again")
        page.click("#send-btn")
        page.wait_for("document.body.textContent.includes('after the restart') && !window.PiscesApp.state.busy")
        tab = browser.new_page()
        tab.goto(w.base + "/")  # a bookmark of this origin, opened in a new tab
        tab.wait_for(LIVE)
        assert ask(tab, "web_devices")["current"] == device_id

        listed = cli(home, "devices")
        assert listed.returncode == 0 and device_id in listed.stdout and own in listed.stdout, listed
        revoked = cli(home, "revoke", device_id)  # another process: the running server notices the file
        assert revoked.returncode == 0, revoked.stderr
        for p in (page, tab):  # both open pages are closed out and sent to the login page
            p.wait_for("location.pathname === '/login'", timeout=30)
        page.goto(w.base + "/")
        page.wait_for("location.pathname === '/login'")  # the key is gone from the browser too
        assert device_id not in cli(home, "devices").stdout
        assert cli(home, "revoke", device_id).returncode == 2
    finally:
        w.close()


class _Other(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"<!doctype html><title>another server on 127.0.0.1</title>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a) -> None:
        pass


def test_revoke_in_the_ui_closes_the_devices_sockets_and_another_port_gets_nothing(browser, home):
    other = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Other)
    threading.Thread(target=other.serve_forever, daemon=True).start()
    try:
        with WebProc(home, "--provider", "faux", "--no-session") as w:
            page = browser.new_page()
            page.goto(w.pair_url)
            page.wait_for(LIVE)
            own = f"http://127.0.0.1:{w.port}"
            link = ask(page, "web_pair")["pairUrl"]  # Pair another device: a second one, registered as a phone
            status, _, body = w.http(link[len(w.base):])  # without WebCrypto would (a secret, its hash kept)
            assert status == 200
            secret = w.register_secret(body)
            ws = w.ws(token="", origin=own, subprotocols=w.device_protocols(secret))
            assert w.recv(ws)["type"] == "snapshot"
            page.click("#menu-btn")
            page.click(".tabs button[data-tab=more]")
            page.wait_for("document.querySelectorAll('#device-list li[data-device]').length === 2")
            shot(page, "devices")
            phone = [d for d in ask(page, "web_devices")["devices"] if d["kind"] == "secret"][0]
            page.click(f"#device-list li[data-device={phone['id']}] button")
            with pytest.raises(ConnectionClosed) as closed:  # its open socket is closed at once
                w.until(ws, lambda f: False, timeout=30)
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 4403
            assert not opens(w, w.device_protocols(secret), own)
            page.wait_for("document.querySelectorAll('#device-list li[data-device]').length === 1")
            assert page.eval("location.pathname") == "/"  # this browser is still paired

            evil = browser.new_page()
            evil.goto(f"http://127.0.0.1:{other.server_address[1]}/")
            got = evil.eval("""(async () => {
                const dbs = indexedDB.databases ? (await indexedDB.databases()).map(d => d.name) : [];
                const ws = await new Promise(resolve => {
                    const s = new WebSocket('ws://127.0.0.1:%d/ws', ['pisces.v1']);
                    s.onopen = () => { s.close(); resolve('open'); };
                    s.onerror = () => resolve('error');
                    setTimeout(() => resolve('timeout'), 10000);
                });
                return {dbs: dbs, local: localStorage.length, ws: ws, device: typeof window.PiscesDevice};
            })()""" % w.port)
            assert got == {"dbs": [], "local": 0, "ws": "error", "device": "undefined"}, got
    finally:
        other.shutdown()
        other.server_close()


def test_a_browser_without_webcrypto_pairs_with_a_secret_that_survives_a_restart(browser, home):
    """A phone on http://<LAN address> is not a secure context (no crypto.subtle): device.js keeps a random secret
    in localStorage and the server its hash. Chromium is made to take that path by hiding isSecureContext."""
    w = WebProc(home, "--provider", "faux", "--no-session")
    try:
        page = browser.new_page()
        page.send("Page.addScriptToEvaluateOnNewDocument",
                  {"source": "Object.defineProperty(window, 'isSecureContext', {value: false});"})
        page.goto(w.pair_url)
        page.wait_for(LIVE)
        got = page.eval("window.PiscesDevice.load().then(d => ({kind: d.kind, n: d.secret.length, "
                        "stored: localStorage.getItem('pisces.device') === d.secret}))")
        assert got == {"kind": "secret", "n": 43, "stored": True}, got
        secret = page.eval("localStorage.getItem('pisces.device')")
        stored = json.load(open(os.path.join(home.agent_dir, "web-devices.json")))["devices"]
        assert [d["kind"] for d in stored] == ["secret"] and secret not in json.dumps(stored)  # its hash only
        port = w.port
        w.close()
        page.wait_for("document.querySelector('#conn.down')")
        w = WebProc(home, "--provider", "faux", "--no-session")
        assert w.port == port
        page.wait_for(LIVE, timeout=60)
        assert page.eval("location.pathname") == "/"
        assert ask(page, "web_devices")["current"] == stored[0]["id"]
    finally:
        w.close()
