"""The web host's fan-out: one streamed reply to 1 and to 10 WebSocket clients (deltas-only profile).

    python -m benchmarks.bench_web [--rounds 5] [--words 2000]

``pisces --mode web --provider faux`` streams a ``words``-chunk reply; N clients (one process, asyncio, frame
headers walked, no JSON parsed) are attached; one of them sends the prompt. Per N: the time from the prompt to the
last client's ``agent_end``, the server's CPU time for the reply (user + system, from /proc), and the bytes
each client received. The same at half the reply shows the bytes growing linearly with the reply. The
10-client rows carry the 1-client figure as their reference, so the ratio column says what nine more
clients cost. Nothing here asserts a timing.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import Config, Figure, Results

CLIENTS = (1, 10)


def _pisces() -> list[str]:
    exe = os.path.join(os.path.dirname(sys.executable), "pisces")
    return [exe] if os.path.exists(exe) else [sys.executable, "-m", "pisces"]


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class WebServer:
    def __init__(self, tmp: str, words: int) -> None:
        home, cwd = os.path.join(tmp, "home"), os.path.join(tmp, "work")
        os.makedirs(cwd, exist_ok=True)
        script = os.path.join(tmp, f"script-{words}.json")
        with open(script, "w") as f:
            json.dump({"responses": [{"text": "word " * words, "chunkSize": 5}], "loop": True}, f)
        env = {**os.environ, "HOME": home, "PISCES_CODING_AGENT_DIR": os.path.join(home, ".pisces", "agent")}
        self.p = subprocess.Popen([*_pisces(), "--mode", "web", "--provider", "faux", "--faux-script", script,
                                   "--no-session"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
                                  cwd=cwd, start_new_session=True)
        banner = ""
        assert self.p.stdout is not None
        deadline = time.monotonic() + 60
        while "Bearer" not in banner:
            line = self.p.stdout.readline().decode()
            if not line or time.monotonic() > deadline:
                raise RuntimeError(f"pisces --mode web did not start: {banner!r}")
            banner += line
        self.url = re.search(r"open (http://[^/]+)/", banner).group(1).replace("http://", "ws://") + "/ws"
        self.token = re.search(r"Bearer (\S+)", banner).group(1)
        self.pair_url = re.search(r"open (http://\S+/pair\?token=\S+)", banner).group(1)

    def close(self) -> None:
        try:
            os.killpg(self.p.pid, signal.SIGTERM)
            self.p.wait(timeout=20)
        except (OSError, subprocess.TimeoutExpired):
            self.p.kill()
            self.p.wait()


class RawClient:
    """A WebSocket client that reads the wire and walks the frame headers without decoding any JSON: the
    benchmark's ten clients share the machine's two cores with the server, and a client that parses every
    frame would measure itself."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.buf = b""
        self.bytes = 0  # wire bytes of the frames read (headers included)

    @classmethod
    async def open(cls, url: str, token: str) -> "RawClient":
        host, port = url.split("//", 1)[1].split("/", 1)[0].split(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        key = base64.b64encode(os.urandom(16)).decode()
        writer.write((f"GET /ws?profile=deltas HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\n"
                      f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
                      f"Authorization: Bearer {token}\r\n\r\n").encode())
        head = await reader.readuntil(b"\r\n\r\n")
        if not head.startswith(b"HTTP/1.1 101"):
            raise RuntimeError(f"no WebSocket: {head[:80]!r}")
        return cls(reader, writer)

    async def frame(self) -> bytes:
        """The next frame's first bytes (enough to see its type)."""
        while True:
            b = self.buf
            if len(b) >= 2:
                n, at = b[1] & 0x7F, 2
                if n == 126 and len(b) >= 4:
                    n, at = int.from_bytes(b[2:4], "big"), 4
                elif n == 127 and len(b) >= 10:
                    n, at = int.from_bytes(b[2:10], "big"), 10
                if n < 126 or at > 2:
                    if len(b) >= at + n:
                        self.buf = b[at + n:]
                        self.bytes += at + n
                        return b[at:at + min(n, 40)]
            chunk = await self.reader.read(1 << 20)
            if not chunk:
                raise RuntimeError("connection closed")
            self.buf += chunk

    def send(self, text: str) -> None:
        data = text.encode()
        mask = os.urandom(4)
        short = len(data) < 126
        head = bytes((0x81, 0x80 | len(data))) if short else bytes((0x81, 0xFE)) + len(data).to_bytes(2, "big")
        self.writer.write(head + mask + bytes(c ^ mask[i % 4] for i, c in enumerate(data)))

    def close(self) -> None:
        self.writer.close()


async def _fan_out(server: WebServer, n: int) -> dict[str, float]:
    conns = [await RawClient.open(server.url, server.token) for _ in range(n)]
    try:
        for c in conns:
            await c.frame()  # the snapshot
            c.bytes = 0

        async def read(c: RawClient) -> float:
            while not (await c.frame()).startswith(b'{"type":"agent_end"'):
                pass
            return time.perf_counter()

        readers = [asyncio.ensure_future(read(c)) for c in conns]
        cpu0 = _cpu_s(server.p.pid)
        t0 = time.perf_counter()
        conns[0].send(json.dumps({"id": "p", "type": "prompt", "message": "Write"}))
        ends = await asyncio.wait_for(asyncio.gather(*readers), timeout=120)
        cpu = _cpu_s(server.p.pid) - cpu0
        counts = [c.bytes for c in conns]
        response = len(b'{"id":"p","type":"response","command":"prompt","success":true}') + 2
        return {"reply_ms": (max(ends) - t0) * 1000, "server_cpu_ms": cpu * 1000,
                "bytes_per_client": statistics.median(counts[1:] if n > 1 else [counts[0] - response])}
    finally:
        for c in conns:
            c.close()


def measure(rounds: int, words: int, tmp: str) -> dict[int, dict[str, list[float]]]:
    """{clients: {metric: samples}} for one reply of ``words`` chunks, a fresh server per sample."""
    out: dict[int, dict[str, list[float]]] = {n: {} for n in CLIENTS}
    for _ in range(rounds):
        for n in CLIENTS:  # alternate, so that load on the machine falls on both alike
            server = WebServer(tmp, words)
            try:
                asyncio.run(_fan_out(server, 1))  # warm: the process's first reply pays for imports
                m = asyncio.run(_fan_out(server, n))
            finally:
                server.close()
            for k, v in m.items():
                out[n].setdefault(k, []).append(v)
    return out


# In the page: send a prompt with the Send button; the time to the user's bubble in the DOM, and to the first
# token of the reply (the assistant's text), measured with performance.now() around the click.
PROMPT_JS = """new Promise(resolve => {
  const box = document.querySelector('#messages');
  const before = document.querySelectorAll('#messages .msg.user').length;
  const assistants = document.querySelectorAll('#messages .msg.assistant').length;
  let bubble = null;
  const t0 = performance.now();
  const check = () => {
    const now = performance.now();
    if (bubble === null && document.querySelectorAll('#messages .msg.user').length > before) bubble = now - t0;
    const a = document.querySelectorAll('#messages .msg.assistant .md');
    if (bubble !== null && a.length > assistants && a[a.length - 1].textContent.length > 0) {
      obs.disconnect(); resolve({bubble: bubble, token: now - t0});
    }
  };
  const obs = new MutationObserver(check);
  obs.observe(box, {subtree: true, childList: true, characterData: true});
  document.querySelector('#prompt').value = %s;
  document.querySelector('#send-btn').click();
  check();
})"""


TYPING_S = 0.5  # between the page settling and Send, before each prompt


def first_prompt(rounds: int, tmp: str) -> dict[str, list[float]] | str:
    """{metric: samples} for the first and the second prompt of a fresh server, in headless Chromium (the
    browser tests' driver); a sentence saying why when there is no browser here."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "modes" / "web"))
    from cdp import Chromium, find_chromium  # the tests' driver, only for this figure

    if find_chromium() is None:
        return "no chromium here (apt-get install chromium)"
    out: dict[str, list[float]] = {}
    browser = Chromium.launch()
    try:
        for _ in range(rounds):
            server = WebServer(tmp, 40)
            try:
                page = browser.new_page()
                page.goto(server.pair_url)
                page.wait_for("document.querySelector('#conn.live') && window.PiscesApp.state.lastSeq !== null")
                for which in ("first", "second"):
                    # as a person would: the page has loaded what it asks for when it opens (no call waiting),
                    # then the prompt takes a moment to type; the same before both prompts
                    page.wait_for("!window.PiscesApp.state.busy && "
                                  "!Object.values(window.PiscesApp.state.calls).some(c => !c.done)")
                    time.sleep(TYPING_S)
                    got = page.eval(PROMPT_JS % json.dumps(f"the {which} prompt"), timeout=60)
                    out.setdefault(f"{which}_bubble_ms", []).append(got["bubble"])
                    out.setdefault(f"{which}_token_ms", []).append(got["token"])
                page.send("Page.close")
            finally:
                server.close()
    finally:
        browser.close()
    return out


def run(cfg: Config, res: Results) -> None:
    words = cfg.sizes.words
    with tempfile.TemporaryDirectory(dir=cfg.tmp) as tmp:
        cfg.log(f"web: the first prompt in headless Chromium, to the user's bubble and to the first token "
                f"({cfg.rounds} rounds)")
        fp = first_prompt(cfg.rounds, tmp)
    if isinstance(fp, str):
        res.notes.append(f"web first prompt: not measured: {fp}")
    else:
        res.add(Figure("web_first_prompt_bubble_ms", "web, first prompt: Send -> the user's bubble in the page "
                       "(ratio: to the second prompt)", "ms", fp["first_bubble_ms"], ref=fp["second_bubble_ms"],
                       ref_name="second prompt"))
        res.add(Figure("web_first_prompt_token_ms", "web, first prompt: Send -> the reply's first token in the page "
                       "(ratio: to the second prompt)", "ms", fp["first_token_ms"], ref=fp["second_token_ms"],
                       ref_name="second prompt"))
    words = cfg.sizes.words
    with tempfile.TemporaryDirectory(dir=cfg.tmp) as tmp:
        cfg.log(f"web: a {words}-chunk reply fanned out to {' and '.join(map(str, CLIENTS))} WebSocket clients "
                f"({cfg.rounds} rounds)")
        full = measure(cfg.rounds, words, tmp)
        cfg.log(f"web: the same at {words // 2} chunks (bytes per client against the reply's length)")
        half = measure(max(1, cfg.rounds // 2), words // 2, tmp)
    one, ten = full[1], full[10]
    for key, label, unit in (("reply_ms", "prompt -> agent_end at every client", "ms"),
                             ("server_cpu_ms", "server CPU time for the reply", "ms")):
        res.add(Figure(f"web_fanout_1_{key}", f"web, {words}-chunk reply to 1 client: {label}", unit, one[key],
                       ref_missing="one client is the reference of the 10-client row"))
        res.add(Figure(f"web_fanout_10_{key}", f"web, {words}-chunk reply to 10 clients: {label} (ratio: 10/1)",
                       unit, ten[key], ref=one[key], ref_name="1 client"))
    f = res.add(Figure("web_fanout_bytes_per_client", f"web, bytes per client, {words}-chunk reply, deltas (ratio: "
                       f"to the {words // 2}-chunk reply)", "bytes", ten["bytes_per_client"],
                       ref=half[10]["bytes_per_client"], ref_name=f"{words // 2}-chunk reply"))
    f.detail["one_client_bytes"] = one["bytes_per_client"]
    f.detail["reply_chars"] = len("word " * words)


def main() -> int:
    import argparse
    import shutil

    from benchmarks.__main__ import print_table

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--words", type=int, default=2000)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="pisces-bench-"))
    cfg = Config(rounds=args.rounds, tmp=tmp)
    cfg.sizes.words = args.words
    res = Results()
    try:
        run(cfg, res)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print_table(res)
    return 0


if __name__ == "__main__":
    sys.exit(main())
