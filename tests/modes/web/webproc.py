"""The real ``pisces --mode web`` (or ``--mode rpc --web``) for tests: spawn, read the printed pairing link
and token, talk to it with real WebSocket and HTTP clients, stop it.

    with WebProc(home) as w:             # home: e2eproc.Home
        ws = w.ws()                      # authenticated with the bearer token; first frame: snapshot
        w.request(ws, {"type": "get_state"})
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import Any, Callable
from urllib.parse import quote

from websockets.sync.client import ClientConnection, connect

_BIN = os.path.dirname(sys.executable)
PISCES = [os.path.join(_BIN, "pisces")] if os.path.exists(os.path.join(_BIN, "pisces")) \
    else [sys.executable, "-m", "pisces"]

Frame = dict[str, Any]


class WebProc:
    def __init__(self, home: Any, *args: str, rpc: bool = False, env: dict[str, str] | None = None,
                 wait: bool = True, read_stdout: bool = True) -> None:
        argv = [*PISCES, "--mode", "rpc", "--web", *args] if rpc else [*PISCES, "--mode", "web", *args]
        self.home = home
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  env={**home.env(), **(env or {})}, cwd=home.cwd, start_new_session=True)
        self.rpc = rpc
        self._env = env
        self.lines: list[str] = []  # the announcement lines ("pisces web: ...")
        self._err = bytearray()
        self._cond = threading.Condition()
        self.stdout_lines: list[bytes] = []
        banner = self.p.stderr if rpc else self.p.stdout
        threading.Thread(target=self._read_banner, args=(banner,), daemon=True).start()
        if rpc:
            if read_stdout:  # False: a stdio peer that never reads its output
                threading.Thread(target=self._read_stdout, daemon=True).start()
        else:
            threading.Thread(target=self._drain, args=(self.p.stderr,), daemon=True).start()
        self.pair_url = self.token = self.base = ""
        if wait:
            self._wait_banner()

    # -- process output ---------------------------------------------------------------------------
    def _read_banner(self, stream: Any) -> None:
        for raw in stream:
            line = raw.decode("utf-8", "replace")
            with self._cond:
                self.lines.append(line)
                self._err.extend(raw)
                self._cond.notify_all()

    def _drain(self, stream: Any) -> None:
        for raw in stream:
            with self._cond:
                self._err.extend(raw)

    def _read_stdout(self) -> None:
        for raw in self.p.stdout:
            with self._cond:
                self.stdout_lines.append(raw.rstrip(b"\n"))
                self._cond.notify_all()

    @property
    def output(self) -> str:
        return self._err.decode("utf-8", "replace")

    def _wait_banner(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                text = "".join(self.lines)
                m = re.search(r"open (http://\S+/pair\?token=\S+)", text)
                t = re.search(r"Bearer (\S+)", text)
                given = "--web-token" in " ".join(self.p.args) or "PISCES_WEB_TOKEN" in (self._env or {})
                if m and (t or given):
                    self.pair_url = m.group(1)
                    self.token = t.group(1) if t and not given else ""
                    self.base = self.pair_url.split("/pair?")[0]
                    return
                if self.p.poll() is not None:
                    raise AssertionError(f"pisces exited ({self.p.returncode}): {self.output[-2000:]}")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"no pairing link printed: {self.output[-2000:]}")
                self._cond.wait(left)

    @property
    def port(self) -> int:
        return int(self.base.rsplit(":", 1)[1])

    # -- stdio (rpc --web) ---------------------------------------------------------------------------
    def stdio_send(self, cmd: Frame) -> None:
        assert self.p.stdin is not None
        self.p.stdin.write(json.dumps(cmd).encode() + b"\n")
        self.p.stdin.flush()

    def stdio_until(self, pred: Callable[[Frame], bool], timeout: float = 30, start: int = 0) -> list[Frame]:
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                frames = [json.loads(line) for line in self.stdout_lines[start:]]
                for i, f in enumerate(frames):
                    if pred(f):
                        return frames[:i + 1]
                left = deadline - time.monotonic()
                if left <= 0 or self.p.poll() is not None:
                    raise AssertionError(f"no matching stdout frame; last: {frames[-5:]}; {self.output[-1500:]}")
                self._cond.wait(min(left, 0.5))

    # -- WebSocket --------------------------------------------------------------------------------------
    def ws(self, query: str = "", *, token: str | None = None, origin: str | None = None,
           cookie: str | None = None, subprotocols: list[str] | None = None) -> ClientConnection:
        headers = {}
        if token is None and cookie is None:
            token = self.token
        if token:
            headers["Authorization"] = f"Bearer {token}"
        if cookie:
            headers["Cookie"] = cookie
        url = self.base.replace("http://", "ws://") + "/ws" + (f"?{query}" if query else "")
        return connect(url, additional_headers=headers, origin=origin, max_size=None, open_timeout=30,
                       subprotocols=subprotocols,
                       compression=None, legacy=True,
                       max_queue=None)  # a test that reads only some frames must still be able to close

    @staticmethod
    def recv(ws: ClientConnection, timeout: float = 30) -> Frame:
        return json.loads(ws.recv(timeout=timeout))

    @classmethod
    def until(cls, ws: ClientConnection, pred: Callable[[Frame], bool], timeout: float = 30) -> list[Frame]:
        got: list[Frame] = []
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no matching frame within {timeout} s; last: {got[-5:]}")
            got.append(cls.recv(ws, left))
            if pred(got[-1]):
                return got

    def request(self, ws: ClientConnection, cmd: Frame, timeout: float = 30) -> Frame:
        cmd = {"id": f"r{time.monotonic_ns()}", **cmd}
        ws.send(json.dumps(cmd))
        frames = self.until(ws, lambda f: f.get("type") == "response" and f.get("id") == cmd["id"], timeout)
        return frames[-1]

    # -- HTTP ---------------------------------------------------------------------------------------------
    def http(self, path: str, headers: dict[str, str] | None = None, raw_path: bool = False
             ) -> tuple[int, dict[str, str], bytes]:
        """A GET sent exactly as given (``raw_path``: over a plain socket, so nothing normalises ``..``)."""
        if raw_path:
            with socket.create_connection(("127.0.0.1", self.port), timeout=30) as s:
                head = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{self.port}\r\nConnection: close\r\n"
                for k, v in (headers or {}).items():
                    head += f"{k}: {v}\r\n"
                s.sendall(head.encode() + b"\r\n")
                data = b""
                while True:
                    chunk = s.recv(65536)
                    if not chunk:
                        break
                    data += chunk
            status = int(data.split(b" ", 2)[1])
            head_end = data.find(b"\r\n\r\n")
            hdrs = {}
            for line in data[:head_end].split(b"\r\n")[1:]:
                k, _, v = line.decode("latin-1").partition(":")
                hdrs[k.strip().lower()] = v.strip()
            return status, hdrs, data[head_end + 4:]
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            conn.request("GET", path, headers={"Host": f"127.0.0.1:{self.port}", **(headers or {})})
            r = conn.getresponse()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
        finally:
            conn.close()

    def pair_device(self) -> str:
        """Use the printed pairing link as a browser without WebCrypto would (pair.js, device.js): register a
        random secret with the page's one-time ticket; the secret (no cookie is involved)."""
        status, headers, body = self.http(self.pair_url[len(self.base):])
        assert status == 200 and "set-cookie" not in headers, (status, headers)
        return self.register_secret(body)

    def register_secret(self, pair_page: bytes) -> str:
        """Register a new random secret with the ticket of ``pair_page`` (as device.js does without WebCrypto)."""
        m = re.search(rb'name="pisces-ticket" content="([A-Za-z0-9_-]+)"', pair_page)
        assert m, pair_page[:500]
        secret = base64.urlsafe_b64encode(os.urandom(32)).rstrip(b"=").decode()
        origin = quote(f"http://127.0.0.1:{self.port}", safe="")
        status, _, body = self.http(f"/pair/register?ticket={m.group(1).decode()}&origin={origin}&secret={secret}")
        assert status == 200, body
        return secret

    @staticmethod
    def device_protocols(secret: str) -> list[str]:
        """The subprotocols a paired page offers in its WebSocket handshake (app.js)."""
        return ["pisces.v1", f"pisces.device.{secret}"]

    # -- end ----------------------------------------------------------------------------------------------
    def close(self) -> int:
        if self.p.poll() is None:
            try:
                if self.rpc:
                    self.p.stdin.close()
                else:
                    os.killpg(self.p.pid, signal.SIGTERM)
                self.p.wait(timeout=20)
            except (subprocess.TimeoutExpired, OSError, ProcessLookupError):
                try:
                    os.killpg(self.p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.p.wait()
        return self.p.returncode

    def __enter__(self) -> "WebProc":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
