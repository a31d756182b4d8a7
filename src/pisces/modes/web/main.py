"""Entry points: ``pisces --mode web`` (browsers only) and the ``--web`` part of ``pisces --mode rpc --web``."""

from __future__ import annotations

import asyncio
import os
import sys
import threading
from typing import Any

from pisces.ai.providers import prepare
from pisces.modes import signals
from pisces.modes.entry import open_session_or_report, run_and_exit, start_up_done
from pisces.modes.host.host import Host
from pisces.modes.web.auth import MIN_TOKEN_CHARS, is_loopback
from pisces.modes.web.info import web_info
from pisces.modes.web.port import candidates, configured_port
from pisces.modes.web.server import WebServer


def check_args(args: Any) -> str | None:
    """The reason these flags cannot start a server, or None. A token on the command line is refused (every
    local user can read ``/proc/<pid>/cmdline``); a non-loopback --host needs a token."""
    if getattr(args, "web_token", None) is not None:
        return ("--web-token would put the token in the process list, readable by every local user: give it "
                "in a file (--web-token-file PATH, mode 600), in the environment (PISCES_WEB_TOKEN), or on "
                "stdin (--web-token-file -, with --mode web)")
    problem = read_token(args)
    if problem is not None:
        return problem
    token = web_token(args)
    if token is not None and len(token) < MIN_TOKEN_CHARS:
        return f"the web token must be at least {MIN_TOKEN_CHARS} characters long"
    host = args.host or "127.0.0.1"
    if not is_loopback(host) and token is None:
        return (f"--host {host} would serve this agent to the network: give a token with --web-token-file "
                "PATH (or PISCES_WEB_TOKEN, or --web-token-file - on stdin) to start anyway")
    port = args.port
    if port is not None and not 0 <= port <= 65535:
        return f"--port {port} is not a port number (0-65535; 0 picks a free one)"
    return None


def read_token(args: Any) -> str | None:
    """Read ``--web-token-file`` (a path, or ``-`` for stdin) once, into ``args.web_token_value``; the reason
    it cannot be used, or None. A file other users can read is refused, as ssh refuses such a key."""
    path = getattr(args, "web_token_file", None)
    if path is None or getattr(args, "web_token_value", None) is not None:
        return None
    if path == "-":
        if getattr(args, "web", False):
            return "--web-token-file -: with --mode rpc --web, stdin carries the RPC protocol; give a file path"
        text = sys.stdin.readline(4096)
    else:
        try:
            st = os.stat(path)
            if st.st_mode & 0o077:
                return (f"--web-token-file {path} is readable by other users (mode {st.st_mode & 0o777:o}): "
                        f"chmod 600 {path}")
            with open(path, encoding="utf-8") as f:
                text = f.read(4096)
        except (OSError, UnicodeDecodeError) as exc:
            return f"--web-token-file {path}: {getattr(exc, 'strerror', None) or exc}"
    token = text.strip()
    if not token:
        return f"--web-token-file {path}: no token in it"
    args.web_token_value = token
    return None


def web_token(args: Any) -> str | None:
    return getattr(args, "web_token_value", None) or os.environ.get("PISCES_WEB_TOKEN") or None


def host_options(session: Any) -> dict[str, Any]:
    """The replay buffer's bounds from settings (``web.replayBytes``, ``web.replayEvents``)."""
    out = {}
    for key, name in (("web.replayBytes", "replay_bytes"), ("web.replayEvents", "replay_events")):
        value = session.settings.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            out[name] = value
    return out


def new_host(session: Any) -> Any:
    """The host that serves ``session`` to browsers (and, with ``--web``, beside the stdio client)."""

    return Host(session, resumable=True, **host_options(session))


def announcer(stream: Any) -> Any:
    """``announce(text, raw="")``: a ``pisces web:`` line on ``stream`` (then ``raw`` as it is), flushed."""

    def announce(text: str, raw: str = "") -> None:
        stream.write(f"pisces web: {text}\n{raw}")
        stream.flush()
    return announce


async def start_web(host: Any, args: Any, *, announce: Any) -> Any:
    """Bind and start serving ``host`` to browsers; prints where (through ``announce``). None, after saying
    why on stderr, when it cannot listen."""

    bind = args.host or "127.0.0.1"
    session = host.session
    cwd = os.path.realpath(getattr(session, "cwd", None) or os.getcwd())
    port = configured_port(args, getattr(session, "settings", None))
    alternates: tuple[int, ...] = ()
    if port is None:  # the project's own port, the same on every run, so a paired browser finds it again
        port, *rest = candidates(cwd)
        alternates = (*rest, 0)
    web = WebServer(host, bind=bind, port=port, token=web_token(args), origins=tuple(args.web_origins or ()),
                    alternates=alternates, cwd=cwd)
    try:
        await web.start()
    except OSError as exc:
        sys.stderr.write(f"pisces: cannot listen on {bind}:{port}: {exc.strerror or exc}\n")
        return None
    if any(d.kind == "key" for d in web.require_auth().devices.devices.values()):
        threading.Thread(target=_crypto_warm_up, name="crypto-warm-up", daemon=True).start()
    if web.moved_from is not None:
        announce(f"note: this project's port {web.moved_from} is taken; listening on {web.port} instead "
                 "(a browser paired on the other port pairs again here; --port or the web.port setting fix it)")
    if not is_loopback(bind):
        announce(f"warning: listening on {bind}:{web.port}, reachable from the network, without TLS; "
                 "only the pairing link or the token lets anyone in")
    info = web_info(host.session)
    where = info.get("cwdShort") or info["cwd"]
    branch = f" (git branch {info['gitBranch']})" if info.get("gitBranch") else ""
    announce(f"model {info.get('model') or 'none'}, in {where}{branch}")
    if info.get("keyProblem"):
        announce(f"warning: {info['keyProblem']}")
    link = web.pairing_url(None)
    announce(f"open {link}  (a one-time link that pairs one browser)")
    if not is_loopback(bind):  # a phone: the same link as a QR code, drawn without the prefix
        from pisces.modes.web.qr import terminal  # noqa: PLC0415 - only when listening on the network

        try:
            announce("or scan it with a phone:", raw="\n" + terminal(link) + "\n")
        except ValueError:
            pass  # a link too long for the encoder: the printed one works
    auth = web.require_auth()
    if not auth.token_given:
        announce(f"programs: Authorization: Bearer {auth.token}  (on ws://.../ws)")
    return web


def warm_up(session: Any) -> None:
    """As stdio RPC does once idle: import the model's SDK on a thread and build the system prompt, so the
    first prompt from a browser does not wait for them."""
    api = getattr(session.model, "api", None)
    if api:
        threading.Thread(target=prepare, args=(api,), name="sdk-warm-up", daemon=True).start()
    threading.Thread(target=_import_first_prompt_modules, name="prompt-warm-up", daemon=True).start()
    loop = asyncio.get_running_loop()
    loop.call_soon(session.prepare_first_prompt)
    loop.call_soon(lambda: session.compactor)  # built on first use otherwise: by the first prompt


FIRST_PROMPT_MODULES = ("pisces.core.session.compactor", "pisces.core.session.prompt_input",
                        "pisces.core.session.image_urls", "pisces.core.planning.rules")


def _import_first_prompt_modules() -> None:
    """What the first prompt would import on the loop (about 12 ms: compaction's checks, the prompt's input,
    the stream rules), imported now, while nobody waits."""
    import importlib  # noqa: PLC0415 - only for this warm-up

    for name in FIRST_PROMPT_MODULES:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - the prompt imports it again and reports a real failure
            pass


def _crypto_warm_up() -> None:
    """Import what checks a remembered browser's signature, so its first connection does not wait for it."""
    try:
        from cryptography.hazmat.primitives.asymmetric import ec  # noqa: F401, PLC0415 - a warm-up on a thread
    except ImportError:
        pass


async def _serve_web(args: Any) -> int:
    session = await open_session_or_report(args)
    if isinstance(session, int):
        return session

    host = new_host(session)
    stop = asyncio.Event()
    host.on_shutdown_request = stop.set
    ended_by: list[int] = []

    def on_signal(signum: int) -> None:
        ended_by.append(signum)
        stop.set()

    remove = signals.install(asyncio.get_running_loop(), on_signal)
    if session.hooks.active:
        try:
            await session.hooks.start("startup")
        except Exception as exc:  # noqa: BLE001 - the session still serves
            sys.stderr.write(f"pisces: extension start-up failed: {exc}\n")
    web = await start_web(host, args, announce=announcer(sys.stdout))
    if web is None:
        await host.shutdown()
        return 1
    start_up_done()
    warm_up(session)
    try:
        await stop.wait()
    finally:
        remove()
        await web.close()
        await host.shutdown()
    return signals.exit_code(ended_by[0]) if ended_by else 0


def run_web(args: Any) -> int:
    run_and_exit(lambda: _serve_web(args))
