"""``pisces`` on a terminal: opens the session, attaches the TUI as a client of the host, runs until quit.

``TERM=dumb`` or ``--plain``: a line-by-line mode (finished rows only, no cursor movement) a screen reader can
follow, reading prompts line by line.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

from pisces.modes import signals
from pisces.modes.entry import open_session_or_report, run_and_exit, start_up_done
from pisces.modes.host.host import Host
from pisces.modes.tui.client import LocalClient
from pisces.modes.tui.render import visible


def first_prompts(messages: list[str]) -> list[str]:
    """Message arguments, ``@file`` ones read and attached to the first message as pi does."""
    files, texts = [], []
    for m in messages:
        if m.startswith("@") and len(m) > 1:
            path = m[1:]
            with open(path, encoding="utf-8", errors="replace") as f:
                files.append(f'<file name="{path}">\n{f.read(1 << 20)}\n</file>\n')
        else:
            texts.append(m)
    if files:
        texts = ["".join(files) + (texts[0] if texts else "")] + texts[1:]
    return texts


def _history(session: Any) -> Any:
    import hashlib  # noqa: PLC0415

    from prompt_toolkit.history import FileHistory  # noqa: PLC0415 - interactive only

    from pisces.core.config.paths import agent_dir  # noqa: PLC0415 - interactive only

    key = hashlib.sha256(os.getcwd().encode()).hexdigest()[:16]
    folder = os.path.join(agent_dir(), "tui-history")
    os.makedirs(folder, exist_ok=True)
    return FileHistory(os.path.join(folder, key))


async def _serve(args: Any) -> int:
    try:
        prompts = first_prompts(list(args.messages))
    except OSError as exc:
        sys.stderr.write(f"pisces: cannot read {exc.filename}: {exc.strerror}\n")
        return 2
    plain = getattr(args, "plain", False) or os.environ.get("TERM") == "dumb"
    if not plain and "PISCES_MCP_STDERR" not in os.environ:
        # MCP servers' stderr would land on the screen and move the cursor under the renderer: a log instead
        from pisces.core.config.paths import agent_dir  # noqa: PLC0415 - interactive only

        os.makedirs(agent_dir(), exist_ok=True)
        os.environ["PISCES_MCP_STDERR"] = os.path.join(agent_dir(), "mcp-stderr.log")
    session = await open_session_or_report(args)
    if isinstance(session, int):
        return session
    host = Host(session)
    loop = asyncio.get_running_loop()
    if plain:
        return await _serve_plain(host, prompts)
    from pisces.modes.tui.app import App  # noqa: PLC0415 - after the session is open

    size = os.get_terminal_size(sys.stdout.fileno())
    app: Any = None
    client = LocalClient(host, lambda ev: app.on_frame(ev))
    from pisces.core.config.paths import agent_dir  # noqa: PLC0415 - interactive only
    from pisces.modes.tui.keybindings import load_keymap  # noqa: PLC0415 - interactive only

    keymap, problem = load_keymap(agent_dir())
    app = App(client, sys.stdout, width=size.columns, height=size.lines, history=_history(session), keymap=keymap)
    client.on_delta = app.on_delta
    if problem:
        app.transcript.note(problem, 33)
    from pisces.modes.tui import theme  # noqa: PLC0415 - interactive only

    _name, colors, theme_problem = theme.choose(session.settings.get("theme"), getattr(args, "themes", None),
                                                agent_dir(), bool(getattr(args, "no_themes", False)))
    theme.apply(colors)
    if theme_problem:
        app.transcript.note(theme_problem, 33)
    watched = theme.theme_path(getattr(args, "themes", None), session.settings.get("theme"), agent_dir(),
                               bool(getattr(args, "no_themes", False)))
    if watched is not None and not theme_problem:
        from pisces.modes.tui.theme_watch import ThemeWatch  # noqa: PLC0415 - a custom theme only

        app.theme_watch = ThemeWatch(watched, lambda problem: app.transcript.note(problem, 33))
    host.attach(client)
    host.on_shutdown_request = app.done.set
    ended_by: list[int] = []
    def on_signal(signum: int) -> None:
        ended_by.append(signum)
        app.done.set()

    remove = signals.install(loop, on_signal)
    if session.hooks.active:
        try:
            await session.hooks.start("startup")
        except Exception as exc:  # noqa: BLE001 - the session still serves
            app.transcript.note(f"extension start-up failed: {exc}", 31)
    await _show_history(app)
    start_up_done()
    for text in prompts:
        client.send({"type": "follow_up" if app.busy else "prompt", "message": text})
        app.busy = True
    from pisces.modes.tui import warm  # noqa: PLC0415 - interactive only

    warm.schedule(session, lambda: app.busy)
    try:
        await app.run()
    finally:
        remove()
        await host.shutdown()
    return signals.exit_code(ended_by[0]) if ended_by else 0


async def _show_history(app: Any, limit: int = 40) -> None:
    """A resumed session's last messages, written once to the scrollback."""
    resp = await app.client.request({"type": "get_messages", "last": limit})
    data = resp.get("data") or {}
    messages = data.get("messages") or []
    total = data.get("total", len(messages))  # a host without "last" sends them all
    if total > limit:
        app.transcript.note(f"… {total - limit} earlier messages", 2)
    for m in messages[-limit:]:
        replay_message(app, m)


def replay_message(app: Any, m: dict[str, Any]) -> None:
    """One message of the session's past, written to the scrollback as it was shown live."""
    role = m.get("role")
    if role == "user":
        app.transcript.on_event({"type": "message_start", "message": m})
    elif role == "assistant":
        for block in m.get("content") or []:
            if block.get("type") == "text":
                app.transcript.on_event({"type": "message_update", "assistantMessageEvent":
                                         {"type": "text_delta", "delta": block.get("text", "")}})
        app.transcript.on_event({"type": "message_end", "message": {"role": "x"}})


async def _serve_plain(host: Host, prompts: list[str]) -> int:
    from pisces.modes.tui.transcript import Transcript  # noqa: PLC0415

    def emit(rows: list[str]) -> None:
        for r in rows:
            sys.stdout.write(visible(r) + "\n")
        sys.stdout.flush()

    transcript = Transcript(emit, 80)
    settled = asyncio.Event()

    def on_frame(ev: dict[str, Any]) -> None:
        if ev.get("type") == "agent_settled":
            settled.set()
        elif ev.get("type") == "extension_ui_request" and ev.get("method") in ("select", "confirm", "input", "editor"):
            emit([f"[{ev.get('method')}] {ev.get('title', '')} {ev.get('options') or ''} (answer on the next line)"])
            pending.append(ev)
        transcript.on_event(ev)

    pending: list[dict[str, Any]] = []
    client = LocalClient(host, on_frame)
    host.attach(client)
    loop = asyncio.get_running_loop()
    queue = list(prompts)
    try:
        while True:
            if queue:
                line: str = queue.pop(0)
            else:
                sys.stdout.write("> ")
                sys.stdout.flush()
                line = await loop.run_in_executor(None, sys.stdin.readline)
                if not line:
                    break
                line = line.rstrip("\n")
            if pending:
                ev = pending.pop(0)
                answer: dict[str, Any] = {"confirmed": line.lower().startswith("y")} if ev["method"] == "confirm" \
                    else {"value": line}
                client.send({"type": "extension_ui_response", "id": ev["id"], **answer})
                continue
            if line in ("/quit", "/exit"):
                break
            if not line.strip():
                continue
            settled.clear()
            client.send({"type": "prompt", "message": line})
            while not settled.is_set():
                done = asyncio.ensure_future(settled.wait())
                await asyncio.wait({done}, timeout=0.2)
                if pending and not done.done():
                    done.cancel()
                    break
    finally:
        await host.shutdown()
    return 0


def run_tui(args: Any) -> int:
    run_and_exit(lambda: _serve(args))
