"""``pisces attach URL``: the same terminal UI on a session already running under ``--mode web`` or
``--mode rpc --web``, over the web mode's WebSocket (``/ws?profile=deltas&approvals=typed``, the access token
as ``Authorization: Bearer``; docs/web.md). Terminal and browsers drive one live session at once.

Not done: reconnecting after the connection drops (the UI says the connection ended and exits).
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


class RemoteClient:
    """The interface of ``LocalClient`` (``send``, ``request``) over a WebSocket to a host."""

    def __init__(self, ws: Any, on_frame: Callable[[dict[str, Any]], None]) -> None:
        self.ws = ws
        self.on_frame = on_frame
        self._ids = itertools.count(1)
        self._waiting: dict[str, asyncio.Future[Any]] = {}
        self.snapshot: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

    def send(self, cmd: dict[str, Any]) -> None:
        asyncio.ensure_future(self.ws.send(json.dumps(cmd)))

    async def request(self, cmd: dict[str, Any]) -> dict[str, Any]:
        rid = f"tui-{next(self._ids)}"
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting[rid] = fut
        await self.ws.send(json.dumps({**cmd, "id": rid}))
        return await fut

    async def read(self) -> None:
        async for raw in self.ws:
            obj = json.loads(raw)
            if obj.get("type") == "response" and obj.get("id") in self._waiting:
                self._waiting.pop(obj["id"]).set_result(obj)
            elif obj.get("type") == "snapshot" and not self.snapshot.done():
                self.snapshot.set_result(obj)
            else:
                self.on_frame(obj)


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
    from websockets.asyncio.client import connect  # noqa: PLC0415 - attach only

    from pisces.modes.tui.app import App  # noqa: PLC0415 - attach only

    address, url_token = ws_url(url)
    token = token or url_token or os.environ.get("PISCES_WEB_TOKEN")
    if not token:
        sys.stderr.write("pisces attach: give the server's access token (--web-token-file PATH or PISCES_WEB_TOKEN)\n")
        return 2
    try:
        ws = await connect(address, additional_headers={"Authorization": f"Bearer {token}"}, max_size=None,
                           open_timeout=15)
    except Exception as exc:  # noqa: BLE001 - one clear line, whatever the cause
        sys.stderr.write(f"pisces attach: cannot connect to {address}: {exc}\n")
        return 1
    size = os.get_terminal_size(sys.stdout.fileno())
    app: Any = None
    client = RemoteClient(ws, lambda ev: app.on_frame(ev))
    from pisces.core.config.paths import agent_dir  # noqa: PLC0415 - attach only
    from pisces.modes.tui.keybindings import load_keymap  # noqa: PLC0415 - attach only

    keymap, problem = load_keymap(agent_dir())
    app = App(client, sys.stdout, width=size.columns, height=size.lines, keymap=keymap)
    if problem:
        app.transcript.note(problem, 33)
    reader = asyncio.ensure_future(client.read())
    reader.add_done_callback(lambda _t: app.done.set())
    snap = await asyncio.wait_for(client.snapshot, 15)
    app.busy = bool((snap.get("state") or {}).get("isStreaming"))
    app.transcript.note(f"attached to {address.split('/ws')[0]}", 2)
    for m in (snap.get("messages") or [])[-40:]:
        from pisces.modes.tui.main import replay_message  # noqa: PLC0415 - already loaded

        replay_message(app, m)
    for req in snap.get("requests") or []:
        app.on_frame(req)
    try:
        await app.run()
    finally:
        reader.cancel()
        await ws.close()
    return 0


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
