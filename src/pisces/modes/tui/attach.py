"""``pisces attach URL``: the same terminal UI on a session already running under ``--mode web`` or
``--mode rpc --web``, over the web mode's WebSocket (``/ws?profile=deltas&approvals=typed``, the access token
as ``Authorization: Bearer``; docs/web.md). Terminal and browsers drive one live session at once.

When the connection drops, the UI stays up and says so above the editor, and reconnects by itself (0.5 s,
doubling to 5 s) with the web mode's resume (``&since=SEQ&stream=ID``): the frames it missed are replayed
(``resumed``), or, when the server no longer holds them or was restarted, a fresh ``snapshot`` is shown.
Commands typed while disconnected wait and are sent once the connection is back (nothing typed is lost);
commands whose answer was still awaited when the connection dropped are answered with an error. A refused
token ends the attach with a clear line.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import sys
from typing import Any, Callable
from urllib.parse import parse_qs, urlsplit, urlunsplit

from pisces.modes.entry import run_and_exit

BACKOFF_S = (0.5, 5.0)  # the first wait before reconnecting, and the longest
STATUS_KEY = "~attach"  # the app's widget row that says the connection is down


class Refused(Exception):
    """The server answered, and refused (a bad token): reconnecting cannot help."""


class RemoteClient:
    """The interface of ``LocalClient`` (``send``, ``request``) over a WebSocket to a host, kept connected."""

    def __init__(self, address: str, token: str, on_frame: Callable[[dict[str, Any]], None],
                 on_link: Callable[[str, str], None] = lambda kind, text: None) -> None:
        self.address = address
        self.token = token
        self.on_frame = on_frame
        self.on_link = on_link  # ("down" | "up" | "note", text)
        self.ws: Any = None
        self._ids = itertools.count(1)
        self._waiting: dict[str, asyncio.Future[Any]] = {}
        self._outbox: list[str] = []  # commands sent while the connection was down
        self.snapshot: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.stream: str | None = None
        self.seq: int | None = None
        self.reconnects = 0

    def send(self, cmd: dict[str, Any]) -> None:
        text = json.dumps(cmd)
        if self.ws is None:
            self._outbox.append(text)
            what = f"“{str(cmd['message'])[:60]}”" if isinstance(cmd.get("message"), str) else cmd.get("type")
            self.on_link("note", f"not connected: {what} is sent when the connection is back")
            return
        asyncio.ensure_future(self._send(text))

    async def _send(self, text: str) -> None:
        try:
            await self.ws.send(text)
        except Exception:  # noqa: BLE001 - the link dropped under it: send it after reconnecting
            self._outbox.append(text)

    async def request(self, cmd: dict[str, Any]) -> dict[str, Any]:
        rid = f"tui-{next(self._ids)}"
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting[rid] = fut
        text = json.dumps({**cmd, "id": rid})
        if self.ws is None:
            self._outbox.append(text)
        else:
            await self._send(text)
        return await fut

    async def connect(self, since: bool) -> None:
        """One connection attempt (raises on failure; ``Refused`` when the server said no)."""
        from websockets.asyncio.client import connect  # noqa: PLC0415 - attach only
        from websockets.exceptions import InvalidStatus  # noqa: PLC0415 - attach only

        url = self.address
        if since and self.stream is not None and self.seq is not None:
            url += f"&since={self.seq}&stream={self.stream}"
        try:
            self.ws = await connect(url, additional_headers={"Authorization": f"Bearer {self.token}"},
                                    max_size=None, open_timeout=15)
        except InvalidStatus as exc:
            code = exc.response.status_code
            if code in (401, 403):
                raise Refused(f"the server refused the token (HTTP {code})") from None
            raise

    async def run(self) -> None:
        """Read frames for as long as the UI runs, reconnecting when the connection drops."""
        while True:
            try:
                await self._read()
            except Exception:  # noqa: BLE001 - any way the connection ends: reconnect
                pass
            self.ws = None
            for fut in self._waiting.values():  # their answers went down with the connection
                if not fut.done():
                    fut.set_result({"type": "response", "success": False,
                                    "error": "the connection dropped before the answer"})
            self._waiting.clear()
            await self._reconnect()

    async def _reconnect(self) -> None:
        delay, attempt = BACKOFF_S[0], 0
        while True:
            attempt += 1
            self.on_link("down", f"connection lost: reconnecting in {delay:.1f} s (attempt {attempt})")
            await asyncio.sleep(delay)
            self.on_link("down", f"connection lost: reconnecting… (attempt {attempt})")
            try:
                await self.connect(since=True)
            except Refused:
                raise
            except Exception:  # noqa: BLE001 - refused, reset, timed out: try again later
                delay = min(delay * 2, BACKOFF_S[1])
                continue
            self.reconnects += 1
            return

    async def _read(self) -> None:
        ws = self.ws
        first = True
        async for raw in ws:
            obj = json.loads(raw)
            kind = obj.get("type")
            if isinstance(obj.get("seq"), int) and kind != "response":
                self.seq = obj["seq"]
            if kind == "response" and obj.get("id") in self._waiting:
                self._waiting.pop(obj["id"]).set_result(obj)
            elif kind == "snapshot" and not self.snapshot.done():
                self.stream = obj.get("streamId")
                self.snapshot.set_result(obj)
            elif kind in ("snapshot", "resumed") and first:
                self.stream = obj.get("streamId", self.stream)
                self.on_link("up", "")
                if kind == "resumed":
                    missed = int(obj.get("toSeq", 0)) - int(obj.get("fromSeq", 0))
                    self.on_link("note", f"reconnected: resumed after frame {obj.get('fromSeq')} "
                                         f"({missed} missed frames follow)")
                else:
                    self.on_link("note", f"reconnected: the server sent a fresh snapshot ({obj.get('reason')}); "
                                         "its last messages follow")
                    self.on_frame(obj)
                self._flush_outbox()
            else:
                self.on_frame(obj)
            first = False

    def _flush_outbox(self) -> None:
        pending, self._outbox = self._outbox, []
        for text in pending:
            asyncio.ensure_future(self._send(text))

    async def close(self) -> None:
        if self.ws is not None:
            await self.ws.close()


def ws_url(url: str) -> tuple[str, str | None]:
    """The WebSocket address for a server address (http[s]://host:port[/...][?token=...]), and a token found
    in the query."""
    parts = urlsplit(url if "://" in url else "http://" + url)
    scheme = {"http": "ws", "https": "wss", "ws": "ws", "wss": "wss"}.get(parts.scheme)
    if scheme is None:
        raise ValueError(f"not a web mode address: {url}")
    tokens = parse_qs(parts.query).get("token")
    token = tokens[0] if tokens else None
    return urlunsplit((scheme, parts.netloc, "/ws", "profile=deltas&approvals=typed", "")), token


async def _serve(url: str, token: str | None) -> int:
    from pisces.modes.tui.app import App  # noqa: PLC0415 - attach only

    address, url_token = ws_url(url)
    token = token or url_token or os.environ.get("PISCES_WEB_TOKEN")
    if not token:
        sys.stderr.write("pisces attach: give the server's access token (--web-token-file PATH or PISCES_WEB_TOKEN)\n")
        return 2
    app: Any = None

    def on_frame(ev: dict[str, Any]) -> None:
        if ev.get("type") == "snapshot":  # a fresh snapshot after a reconnect
            show_snapshot(app, ev)
        else:
            app.on_frame(ev)

    def on_link(kind: str, text: str) -> None:
        from pisces.modes.tui.render import style  # noqa: PLC0415 - already loaded

        if kind == "down":
            app.widgets[STATUS_KEY] = [style(text, 1, 33)]
        elif kind == "up":
            app.widgets.pop(STATUS_KEY, None)
        else:
            app.transcript.note(text, 33)
        app.schedule()

    client = RemoteClient(address, token, on_frame, on_link)
    try:
        await client.connect(since=False)
    except Exception as exc:  # noqa: BLE001 - one clear line, whatever the cause
        sys.stderr.write(f"pisces attach: cannot connect to {address}: {exc}\n")
        return 1
    size = os.get_terminal_size(sys.stdout.fileno())
    from pisces.core.config.paths import agent_dir  # noqa: PLC0415 - attach only
    from pisces.modes.tui.keybindings import load_keymap  # noqa: PLC0415 - attach only

    keymap, problem = load_keymap(agent_dir())
    app = App(client, sys.stdout, width=size.columns, height=size.lines, keymap=keymap)
    if problem:
        app.transcript.note(problem, 33)
    reader = asyncio.ensure_future(client.run())
    ended: list[str] = []

    def reader_done(task: asyncio.Future[Any]) -> None:
        if not task.cancelled() and task.exception() is not None:
            ended.append(str(task.exception()))
        app.done.set()
    reader.add_done_callback(reader_done)
    snap = await asyncio.wait_for(client.snapshot, 15)
    app.transcript.note(f"attached to {address.split('/ws')[0]}", 2)
    show_snapshot(app, snap)
    try:
        await app.run()
    finally:
        reader.cancel()
        await client.close()
    if ended:
        sys.stderr.write(f"pisces attach: {ended[0]}\n")
        return 1
    return 0


def show_snapshot(app: Any, snap: dict[str, Any]) -> None:
    """A snapshot's last messages and open requests, and whether a reply runs."""
    from pisces.modes.tui.main import replay_message  # noqa: PLC0415 - already loaded

    app.busy = bool((snap.get("state") or {}).get("isStreaming"))
    for m in (snap.get("messages") or [])[-40:]:
        replay_message(app, m)
    for req in snap.get("requests") or []:
        app.on_frame(req)
    app.schedule()


def run_attach(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="pisces attach", description="Attach the terminal UI to a session served "
                                "by pisces --mode web (or --mode rpc --web).")
    p.add_argument("url", help="the server's address, e.g. http://127.0.0.1:34519")
    p.add_argument("--web-token-file", dest="web_token_file",
                   help="a file (mode 600) holding the access token (default $PISCES_WEB_TOKEN)")
    p.add_argument("--web-token", dest="web_token", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.web_token is not None:  # a secret on the command line is readable by every local user
        sys.stderr.write("pisces attach: --web-token would put the token in the process list: give it in a file "
                         "(--web-token-file PATH, mode 600) or in the environment (PISCES_WEB_TOKEN)\n")
        return 2
    token = None
    if args.web_token_file:
        try:
            with open(args.web_token_file, encoding="utf-8") as f:
                token = f.read().strip()
        except OSError as exc:
            sys.stderr.write(f"pisces attach: cannot read {args.web_token_file}: {exc.strerror or exc}\n")
            return 2
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        sys.stderr.write("pisces attach: needs a terminal on stdin and stdout\n")
        return 2
    run_and_exit(lambda: _serve(args.url, token))
    return 0
