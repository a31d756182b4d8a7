"""Who gets in: no token, a wrong token, a bad Origin, a foreign Host, a non-loopback address without a
token, static paths that try to leave the UI's directory; and that plain ``--mode rpc`` never imports the
web server."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from webproc import PISCES, WebProc
from websockets.exceptions import InvalidStatus


def refused(w: WebProc, **kw) -> int:
    with pytest.raises(InvalidStatus) as info:
        w.ws(**kw)
    return info.value.response.status_code


def test_websocket_refusals(home):
    with WebProc(home, "--provider", "faux", "--no-session") as w:
        assert refused(w, token="") == 401  # no token, no cookie
        assert refused(w, token="x" * 43) == 401  # a wrong token
        own = f"http://127.0.0.1:{w.port}"
        forged = w.device_protocols("forged-forged-forged-forged-forged-forged-123")
        assert refused(w, token="", subprotocols=forged, origin=own) == 401  # a secret this server never made
        device = w.device_protocols(w.pair_device())
        assert refused(w, token="", subprotocols=device, origin="http://evil.example") == 403  # bad Origin
        assert refused(w, token="", subprotocols=device) == 403  # a browser always sends its Origin
        assert refused(w, origin="http://evil.example") == 403  # and the token does not excuse a bad Origin
        ok = w.ws(token="", subprotocols=device, origin=own)  # the paired browser
        assert ok.subprotocol == "pisces.v1"  # the server never echoes the secret one
        assert w.recv(ok)["type"] == "snapshot"
        ok.close()
        ok = w.ws(origin=f"http://localhost:{w.port}")  # the token, from an allowed origin
        assert w.recv(ok)["type"] == "snapshot"
        ok.close()


def test_http_refusals_and_what_is_open(home):
    with WebProc(home, "--provider", "faux", "--no-session") as w:
        assert w.http("/health")[0] == 200
        status, _, body = w.http("/login")
        assert status == 200 and b"pair" in body
        # the UI's files are the package's own, the same for everyone: open (the login page needs its CSS)
        for path in ("/", "/static/app.js", "/static/login.css", "/vendor/marked.umd.js"):
            assert w.http(path)[0] == 200, path
        for path in ("/export", "/auth"):  # what holds the session needs the token or a device secret
            assert w.http(path)[0] == 401, path
            assert w.http(path, {"Authorization": "Bearer wrong-token-wrong-token"})[0] == 401, path
        assert w.http("/anything")[0] == 404
        auth = {"Authorization": f"Bearer {w.token}"}
        assert w.http("/auth", auth)[0] == 200
        status, headers, body = w.http("/static/app.js", auth)
        assert status == 200 and headers["content-type"].startswith("text/javascript")
        assert "script-src 'self'" in headers["content-security-policy"]
        status, _, body = w.http("/vendor/marked.umd.js", auth)  # the HTML export's copy, served as is
        assert status == 200 and b"marked" in body[:200]
        assert w.http("/vendor/purify.min.js", auth)[0] == 200
        status, _, body = w.http("/export", auth)
        assert status == 409 and b"in-memory" in body  # --no-session: nothing on disk to export
        # DNS rebinding: a page on another name that resolves here does not get in, not even to /health
        assert w.http("/health", {"Host": "evil.example"})[0] == 403


TRAVERSALS = ["/static/../../../../etc/passwd", "/static/%2e%2e/%2e%2e/%2e%2e/etc/passwd",
              "/static/..%2f..%2f..%2fcli.py", "/static/%2E%2E%2F%2E%2E%2Fhost.py", "/vendor/..%2f..%2fweb%2fauth.py",
              "/static/.%2e/.%2e/host.py", "/static//etc/passwd", "/static/%2fetc%2fpasswd", "/static/..%5c..%5chost.py",
              "/static/app.js%00.png", "/vendor/../../../__init__.py"]


@pytest.mark.parametrize("path", TRAVERSALS)
def test_static_path_traversal_is_refused(home, path):
    with WebProc(home, "--provider", "faux", "--no-session") as w:
        status, _, body = w.http(path, {"Authorization": f"Bearer {w.token}"}, raw_path=True)
        assert status == 404, (path, status, body[:200])
        assert b"root:" not in body and b"import" not in body


def test_non_loopback_host_needs_a_token(home):
    run = subprocess.run([*PISCES, "--mode", "web", "--provider", "faux", "--host", "0.0.0.0", "--no-session"],
                         capture_output=True, text=True, env=home.env(), cwd=home.cwd, timeout=60)
    assert run.returncode == 2
    assert "--host 0.0.0.0 would serve this agent to the network" in run.stderr
    assert "--web-token-file" in run.stderr
    run = subprocess.run([*PISCES, "--mode", "web", "--provider", "faux"], capture_output=True, text=True,
                         env=home.env(PISCES_WEB_TOKEN="short"), cwd=home.cwd, timeout=60)
    assert run.returncode == 2 and "at least 16 characters" in run.stderr
    token = "a-long-enough-token-for-tests"
    path = os.path.join(home.cwd, "..", "token")
    with open(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
        f.write(token)
    with WebProc(home, "--provider", "faux", "--no-session", "--host", "0.0.0.0", "--web-token-file", path) as w:
        assert "warning: listening on 0.0.0.0" in w.output and "reachable from the network" in w.output
        assert "Bearer" not in w.output  # a token the user gave is never printed
        ws = w.ws(token=token)  # (connected through 127.0.0.1 only)
        assert w.recv(ws)["type"] == "snapshot"
        ws.close()
        assert refused(w, token="a-long-enough-token-but-wrong") == 401


def test_rpc_without_web_never_imports_the_server(home):
    env = home.env(PYTHONPROFILEIMPORTTIME="1")
    run = subprocess.run([*PISCES, "--mode", "rpc", "--provider", "faux", "--no-session"],
                         input=b'{"id":"s","type":"get_state"}\n', capture_output=True, env=env, cwd=home.cwd,
                         timeout=60)
    assert json.loads(run.stdout.splitlines()[-1])["id"] == "s"
    imported = [line.split("|")[-1].strip() for line in run.stderr.decode().splitlines() if "|" in line]
    assert "pisces.modes.rpc.server" in imported and "pisces.modes.host.host" in imported  # the log is real
    assert not [m for m in imported if m.startswith(("websockets", "pisces.modes.web", "pisces.modes.host.replay"))]


def test_rpc_with_web_refuses_bad_flags(home):
    for args, words in ((["--mode", "json", "--web"], "--web goes with --mode rpc"),
                        (["--mode", "web", "-p", "hi"], "no -p")):
        run = subprocess.run([*PISCES, *args, "--provider", "faux"], capture_output=True, text=True,
                             env=home.env(), cwd=home.cwd, timeout=60)
        assert run.returncode == 2 and words in run.stderr, run.stderr
    assert os.path.isdir(home.cwd)
