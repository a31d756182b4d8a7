"""The credential that opens ``/ws`` is bound to this server's origin (scheme, host and port), and secrets never
ride on the command line (issue 26, security items 1 and 2), against the real process.

- In Chromium: after pairing a page on ``http://127.0.0.1:P``, a page served from another port of 127.0.0.1
  gets nothing it can use: its server sees no credential in the requests the browser sends it (cookies are not
  isolated by port), its script finds nothing in its own storage, and its WebSocket to ``/ws`` does not open.
  Whatever it did get is replayed by a non-browser client with a forged ``Origin``: nothing opens.
- With a real WebSocket client: the cookie (or the pairing's secret sent as a cookie) plus a forged Origin
  opens nothing; the secret presented in the handshake (subprotocol) does.
- ``--web-token T`` is refused (exit 2) with a message naming ``--web-token-file``, ``PISCES_WEB_TOKEN`` and
  stdin; ``--web-token-file`` (a path or ``-``) works and the token is not in ``/proc/<pid>/cmdline``.
"""

from __future__ import annotations

import http.server
import os
import re
import subprocess
import threading

import pytest
from cdp import Chromium, find_chromium
from webproc import PISCES, WebProc
from websockets.exceptions import InvalidHandshake, InvalidStatus

SECRETISH = re.compile(r"[A-Za-z0-9_-]{32,}")


def opens(w: WebProc, **kw) -> bool:
    """Whether a WebSocket with these credentials gets its first frame (a snapshot)."""
    try:
        ws = w.ws(**kw)
    except (InvalidStatus, InvalidHandshake):
        return False
    try:
        return w.recv(ws)["type"] == "snapshot"
    finally:
        ws.close()


def candidates(text: str) -> set[str]:
    """Every string in ``text`` long enough to be one of the server's secrets."""
    return set(SECRETISH.findall(text))


def replay_opens_nothing(w: WebProc, cookie_header: str, loot: set[str]) -> None:
    forged = f"http://127.0.0.1:{w.port}"
    if cookie_header:
        assert not opens(w, cookie=cookie_header, origin=forged), "the cookie alone opened /ws"
    for value in loot:
        assert not opens(w, cookie=f"pisces_{w.port}={value}", origin=forged), "a stolen value opened /ws"
        assert not opens(w, token=value, origin=forged), "a stolen value opened /ws as a bearer token"
        assert not opens(w, token="", origin=forged, subprotocols=["pisces.v1", f"pisces.device.{value}"])


# -- a real WebSocket client ---------------------------------------------------------------------------------

def test_a_cookie_with_a_forged_origin_opens_nothing(home):
    with WebProc(home, "--provider", "faux", "--no-session") as w:
        status, headers, body = w.http(w.pair_url[len(w.base):])  # what a browser gets for the pairing link
        assert status in (200, 303)
        cookie = headers.get("set-cookie", "").split(";")[0]
        loot = candidates(body.decode("utf-8", "replace")) | candidates(cookie)
        own = f"http://127.0.0.1:{w.port}"
        assert not opens(w, token="", cookie=cookie, origin=own) if cookie else True
        for value in loot:  # the pairing's secret sent the way a browser sends cookies: nothing either
            assert not opens(w, token="", cookie=f"pisces_{w.port}={value}", origin=own)
        # the pairing page's ticket opens nothing either; the credential the page registered with it, presented
        # in the handshake (as app.js sends it), is what opens /ws
        assert loot and not any(opens(w, token="", origin=own, subprotocols=["pisces.v1", f"pisces.device.{v}"])
                                for v in loot)
        secret = w.register_secret(body)
        assert opens(w, token="", origin=own, subprotocols=["pisces.v1", f"pisces.device.{secret}"])


# -- Chromium -------------------------------------------------------------------------------------------------

class _Attacker(http.server.BaseHTTPRequestHandler):
    seen: list[dict[str, str]]

    def do_GET(self) -> None:
        self.seen.append({k.lower(): v for k, v in self.headers.items()})
        body = b"<!doctype html><title>another server on 127.0.0.1</title><p>hello</p>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a) -> None:
        pass


@pytest.mark.skipif(find_chromium() is None, reason="no chromium here (apt-get install chromium)")
def test_a_page_on_another_port_cannot_obtain_or_use_the_credential(home):
    seen: list[dict[str, str]] = []
    handler = type("Handler", (_Attacker,), {"seen": seen})
    evil = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=evil.serve_forever, daemon=True).start()
    try:
        browser = Chromium.launch()
    except (OSError, RuntimeError) as exc:
        evil.shutdown()
        pytest.skip(f"chromium cannot start: {exc}")
    try:
        with WebProc(home, "--provider", "faux", "--no-session") as w:
            ui = browser.new_page()
            ui.goto(w.pair_url)
            ui.wait_for("document.querySelector('#conn.live')")  # the paired page itself is connected
            other = browser.new_page()
            evil_base = f"http://127.0.0.1:{evil.server_address[1]}"
            other.goto(evil_base + "/")
            got = other.eval("""(async () => {
                const dump = s => { const o = {}; for (let i = 0; i < s.length; i++) o[s.key(i)] = s.getItem(s.key(i)); return o; };
                const tryWs = (protocols) => new Promise(resolve => {
                    let ws; try { ws = new WebSocket('ws://127.0.0.1:%d/ws', protocols); } catch (e) { return resolve('throws'); }
                    ws.onopen = () => { ws.close(); resolve('open'); };
                    ws.onerror = () => resolve('error');
                    setTimeout(() => resolve('timeout'), 10000);
                });
                return {cookie: document.cookie, local: JSON.stringify(dump(localStorage)),
                        session: JSON.stringify(dump(sessionStorage)), ws: await tryWs(undefined),
                        wsProto: await tryWs(['pisces.v1'])};
            })()""" % w.port)
            assert got["ws"] != "open" and got["wsProto"] != "open", got
            assert got["local"] == "{}" and got["session"] == "{}" and got["cookie"] == "", got
            # what the other port's server saw in the browser's requests (a cookie for 127.0.0.1 goes to every port)
            cookie_header = "; ".join(h.get("cookie", "") for h in seen if h.get("cookie"))
            assert seen, "the other server was never asked"
            loot = candidates(cookie_header) | candidates(got["local"]) | candidates(got["session"]) \
                | candidates(got["cookie"])
            replay_opens_nothing(w, cookie_header, loot)
            assert not cookie_header, f"the browser sent this server's cookie to another port: {cookie_header}"
    finally:
        browser.close()
        evil.shutdown()
        evil.server_close()


# -- no secret on the command line ---------------------------------------------------------------------------

def test_a_token_on_the_command_line_is_refused(home):
    token = "a-long-enough-token-for-tests-1234"
    run = subprocess.run([*PISCES, "--mode", "web", "--provider", "faux", "--no-session", "--web-token", token],
                         capture_output=True, text=True, env=home.env(), cwd=home.cwd, timeout=60)
    assert run.returncode == 2, run.stderr
    for safe in ("--web-token-file", "PISCES_WEB_TOKEN", "stdin"):
        assert safe in run.stderr, run.stderr
    assert token not in run.stderr  # not echoed either
    run = subprocess.run([*PISCES, "--mode", "rpc", "--web", "--provider", "faux", "--web-token-file", "-"],
                         capture_output=True, text=True, env=home.env(), cwd=home.cwd, timeout=60, input="")
    assert run.returncode == 2 and "stdin" in run.stderr, run.stderr  # rpc's stdin carries the protocol


def _cmdline(pid: int) -> str:
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        return f.read().replace(b"\0", b" ").decode()


def test_the_token_from_a_file_or_stdin_works_and_stays_off_the_process_list(home, tmp_path):
    token = "a-long-enough-token-from-a-file-5678"
    path = tmp_path / "token"
    path.write_text(token + "\n")
    path.chmod(0o600)
    with WebProc(home, "--provider", "faux", "--no-session", "--host", "0.0.0.0", "--web-token-file", str(path)) as w:
        assert token not in _cmdline(w.p.pid) and "Bearer" not in w.output
        assert opens(w, token=token) and not opens(w, token=token[:-1] + "x")
    with WebProc(home, "--provider", "faux", "--no-session", "--web-token-file", "-", wait=False) as w:
        w.p.stdin.write((token + "\n").encode())
        w.p.stdin.close()
        w._wait_banner()
        assert token not in _cmdline(w.p.pid)
        assert opens(w, token=token)
    with WebProc(home, "--provider", "faux", "--no-session", env={"PISCES_WEB_TOKEN": token}) as w:
        assert opens(w, token=token)
    loose = tmp_path / "loose"
    loose.write_text(token)
    loose.chmod(0o644)
    run = subprocess.run([*PISCES, "--mode", "web", "--provider", "faux", "--web-token-file", str(loose)],
                         capture_output=True, text=True, env=home.env(), cwd=home.cwd, timeout=60)
    assert run.returncode == 2 and "readable by other users" in run.stderr and "chmod 600" in run.stderr
    assert os.path.exists(loose)
