"""A small Chromium driver over the DevTools protocol, on the ``websockets`` library pisces already uses:
no browser download, nothing from the network. Debian's ``chromium`` runs headless with a fresh profile.

    with Chromium.launch() as browser:
        page = browser.new_page(width=390, height=844)
        page.goto(url)
        page.wait_for("document.querySelector('.msg.assistant')")
        page.screenshot("/tmp/x.png")
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
from typing import Any

from websockets.sync.client import connect

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-default-apps", "--disable-extensions", "--mute-audio", "--hide-scrollbars",
         "--remote-debugging-port=0"]


def find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


class CdpError(AssertionError):
    pass


class Chromium:
    def __init__(self, proc: subprocess.Popen, profile: str, ws_url: str) -> None:
        self.proc = proc
        self.profile = profile
        self.ws = connect(ws_url, max_size=None, open_timeout=30, legacy=True, max_queue=None)
        self._next = 0
        self._cond = threading.Condition()
        self._results: dict[int, dict[str, Any]] = {}
        self.events: list[dict[str, Any]] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    @classmethod
    def launch(cls, executable: str | None = None) -> "Chromium":
        exe = executable or find_chromium()
        if exe is None:
            raise FileNotFoundError("no chromium on PATH")
        profile = tempfile.mkdtemp(prefix="pisces-chromium-")
        proc = subprocess.Popen([exe, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        port_file = os.path.join(profile, "DevToolsActivePort")
        deadline = time.monotonic() + 60
        while True:
            if os.path.exists(port_file):
                lines = open(port_file).read().split()
                if len(lines) >= 2:
                    break
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                shutil.rmtree(profile, ignore_errors=True)
                raise RuntimeError(f"chromium did not start (exit status {proc.poll()})")
            time.sleep(0.05)
        return cls(proc, profile, f"ws://127.0.0.1:{lines[0]}{lines[1]}")

    def _read(self) -> None:
        try:
            for raw in self.ws:
                msg = json.loads(raw)
                with self._cond:
                    if "id" in msg:
                        self._results[msg["id"]] = msg
                    else:
                        self.events.append(msg)
                    self._cond.notify_all()
        except Exception:
            pass

    def send(self, method: str, params: dict[str, Any] | None = None, session: str | None = None,
             timeout: float = 30) -> dict[str, Any]:
        with self._cond:
            self._next += 1
            mid = self._next
        msg: dict[str, Any] = {"id": mid, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        self.ws.send(json.dumps(msg))
        deadline = time.monotonic() + timeout
        with self._cond:
            while mid not in self._results:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise CdpError(f"{method}: no answer within {timeout} s")
                self._cond.wait(left)
            result = self._results.pop(mid)
        if "error" in result:
            raise CdpError(f"{method}: {result['error']}")
        return result.get("result", {})

    def wait_event(self, method: str, session: str | None, since: int = 0, timeout: float = 30) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for ev in self.events[since:]:
                    if ev.get("method") == method and (session is None or ev.get("sessionId") == session):
                        return ev
                left = deadline - time.monotonic()
                if left <= 0:
                    raise CdpError(f"no {method} within {timeout} s")
                self._cond.wait(left)

    def new_page(self, width: int = 1200, height: int = 820, mobile: bool = False) -> "Page":
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        page = Page(self, session)
        for domain in ("Page", "Runtime"):
            self.send(f"{domain}.enable", session=session)
        page.set_viewport(width, height, mobile)
        return page

    def close(self) -> None:
        try:
            self.send("Browser.close", timeout=5)
        except Exception:
            pass
        try:
            self.ws.close()
        except Exception:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, 9)
            self.proc.wait()
        shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self) -> "Chromium":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class Page:
    def __init__(self, browser: Chromium, session: str) -> None:
        self.b = browser
        self.session = session

    def send(self, method: str, params: dict[str, Any] | None = None, timeout: float = 30) -> dict[str, Any]:
        return self.b.send(method, params, self.session, timeout)

    def set_viewport(self, width: int, height: int, mobile: bool = False) -> None:
        self.send("Emulation.setDeviceMetricsOverride", {"width": width, "height": height,
                                                         "deviceScaleFactor": 1, "mobile": mobile})

    def goto(self, url: str, timeout: float = 30) -> None:
        since = len(self.b.events)
        self.send("Page.navigate", {"url": url})
        self.b.wait_event("Page.loadEventFired", self.session, since, timeout)

    def reload(self, timeout: float = 30) -> None:
        since = len(self.b.events)
        self.send("Page.reload", {"ignoreCache": True})
        self.b.wait_event("Page.loadEventFired", self.session, since, timeout)

    def eval(self, expression: str, timeout: float = 30) -> Any:
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                "awaitPromise": True}, timeout=timeout + 5)
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            text = details.get("exception", {}).get("description") or details.get("text")
            raise CdpError(f"page: {text}")
        return result.get("result", {}).get("value")

    def wait_for(self, condition: str, timeout: float = 30) -> Any:
        """Poll ``condition`` (a JS expression) in the page until it is truthy; returns its value."""
        js = ("new Promise((resolve, reject) => { const t0 = Date.now(); (function poll() { let v; "
              f"try {{ v = ({condition}); }} catch (e) {{ v = undefined; }} if (v) return resolve(v); "
              f"if (Date.now() - t0 > {int(timeout * 1000)}) return reject(new Error('timed out waiting for: ' + "
              f"{json.dumps(condition)})); setTimeout(poll, 50); }})(); }})")
        deadline = time.monotonic() + timeout
        while True:
            try:
                return self.eval(js, timeout=timeout)
            except CdpError as exc:  # the page navigated meanwhile (pairing goes on to /): ask the new one
                gone = "navigated or closed" in str(exc) or "context was destroyed" in str(exc)
                if not gone or time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def click(self, selector: str) -> None:
        self.eval(f"(() => {{ const e = document.querySelector({json.dumps(selector)}); "
                  f"if (!e) throw new Error('no element ' + {json.dumps(selector)}); e.click(); return true; }})()")

    def type_into(self, selector: str, text: str) -> None:
        self.eval(f"(() => {{ const e = document.querySelector({json.dumps(selector)}); e.focus(); "
                  f"e.value = {json.dumps(text)}; e.dispatchEvent(new Event('input', {{bubbles: true}})); return true; }})()")

    def screenshot(self, path: str) -> str:
        data = self.send("Page.captureScreenshot", {"format": "png"})["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))
        return path

    def events(self, method: str) -> list[dict[str, Any]]:
        return [e for e in self.b.events if e.get("method") == method and e.get("sessionId") == self.session]

    def exceptions(self) -> list[str]:
        return [json.dumps(e["params"]["exceptionDetails"])[:500] for e in self.events("Runtime.exceptionThrown")]
