"""The MCP servers of one session: connected in the background, their tools in the session's tool table.

The official ``mcp`` SDK (1.5-2.5 s of imports) is imported in a worker thread by the first server that connects,
so that the session answers ``get_state`` and takes prompts meanwhile.

Guarantees:
- every server connects in its own asyncio task: the session answers and takes prompts meanwhile; a server
  that fails to start, hangs in ``initialize`` (``timeout``, default 30 s) or dies later is marked ``failed``
  with its error, and the session goes on;
- a server's tools are registered as one tool group when it connects (``mcp__<server>__<tool>``), replaced
  when the server says ``tools/list_changed``, removed when it stops; each change emits ``mcp_tools_changed``
  and every state change ``mcp_server_status``;
- a tool call whose server is (re)connecting waits for it, at most the server's ``timeout``; a call is bounded by
  ``toolTimeout`` and ends on abort;
- :meth:`McpManager.close` stops every server; a stdio server is its own process group, which the SDK ends with
  SIGTERM then SIGKILL; :func:`kill_all` is the last resort of the signal handler (SIGKILL to each group).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import fnmatch
import os
import signal as _signal
import sys
from typing import Any

from pisces.agent.types import ToolError
from pisces.core.mcp.config import ConfigError, McpConfig, ServerConfig, resolved
from pisces.core.mcp.tools import McpTool
from pisces.core.tools.groups import replace_tool_group

_GROUPS: set[int] = set()  # process groups of live stdio servers (for kill_all)


def _load_sdk() -> Any:
    """Import the SDK's client modules (run in a worker thread); returns ``mcp_types``."""
    import anyio  # noqa: F401, PLC0415 - the SDK's, loaded off the event loop
    import mcp.client.session  # noqa: PLC0415 - idem
    import mcp.client.stdio  # noqa: F401, PLC0415 - idem
    import mcp_types  # noqa: PLC0415 - idem

    import pisces.core.mcp.stdio  # noqa: F401, PLC0415 - idem (pisces' stdio transport, over the SDK's types)

    return mcp_types


def glob_any(patterns: list[str], name: str) -> bool:
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)


def kill_all() -> None:
    """SIGKILL every stdio server's process group (pisces is leaving without a clean close)."""
    for pgid in list(_GROUPS):
        with contextlib.suppress(OSError):
            os.killpg(pgid, _signal.SIGKILL)
        _GROUPS.discard(pgid)


atexit.register(kill_all)  # however pisces leaves (short of SIGKILL), no server outlives it


def _login_required(exc: BaseException | None, depth: int = 0) -> BaseException | None:
    """The LoginRequired somewhere in ``exc`` (groups, causes, contexts), if any."""
    if exc is None or depth > 8:
        return None
    if type(exc).__name__ == "LoginRequired":
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for sub in exc.exceptions:
            found = _login_required(sub, depth + 1)
            if found is not None:
                return found
    return _login_required(exc.__cause__ or exc.__context__, depth + 1)


class Server:
    """One configured server and its connection task."""

    def __init__(self, manager: McpManager, cfg: ServerConfig) -> None:
        self.manager, self.cfg = manager, cfg
        self.state = "disabled" if not cfg.enabled else "pending"
        self.error: str | None = None
        self.session: Any = None
        self.tools: list[McpTool] = []
        self.prompts: list[Any] = []
        self.resources: list[Any] = []
        self.server_info: dict[str, Any] | None = None
        self.pgid: int | None = None
        self.auth: Any = None  # the OAuth provider of a remote server (pisces.core.mcp.oauth)
        self.needs_login: str | None = None  # why the person must run 'pisces mcp login NAME'
        self.cached = False  # the tools are the cached definitions of an earlier connection
        self._saved: list[dict[str, Any]] | None = None
        self._task: asyncio.Task[None] | None = None
        self._stop: asyncio.Event | None = None
        self.ready = asyncio.Event()

    # -- status ------------------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        out = {**self.cfg.public(), "status": self.state, "enabled": self.cfg.enabled,
               "tools": [t.name for t in self.tools],
               "prompts": [f"mcp:{self.cfg.name}:{getattr(p, 'name', '')}" for p in self.prompts],
               "resources": len(self.resources), "cached": self.cached}
        if self.error:
            out["error"] = self.error
        if self.needs_login and self.state == "failed":
            out["needsLogin"] = True
        if self.auth is not None:
            out["auth"] = self.auth.store.status()
        if self.server_info:
            out["serverInfo"] = self.server_info
        return out

    def _set(self, state: str, error: str | None = None) -> None:
        self.state, self.error = state, error
        self.manager.emit({"type": "mcp_server_status", "server": self.cfg.name, "status": state,
                           **({"error": error} if error else {}),
                           **({"needsLogin": True} if state == "failed" and self.needs_login else {})})

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> None:
        if self._task is not None and not self._task.done():
            return
        self.ready = asyncio.Event()
        self._stop = asyncio.Event()
        self._set("connecting")
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"mcp:{self.cfg.name}")

    async def stop(self, state: str = "stopped") -> None:
        if self._stop is not None:
            self._stop.set()
        task = self._task
        if task is not None and not task.done():
            try:
                await asyncio.wait_for(asyncio.shield(task), timeout=5.0)
            except (asyncio.TimeoutError, asyncio.CancelledError, Exception):  # noqa: BLE001 - stopping anyway
                task.cancel()
                with contextlib.suppress(BaseException):
                    await asyncio.wait_for(task, timeout=3.0)
        if self.pgid is not None:  # the SDK ends the group; make sure
            with contextlib.suppress(OSError):
                os.killpg(self.pgid, _signal.SIGKILL)
            _GROUPS.discard(self.pgid)
            self.pgid = None
        self.session = None
        self._set_tools([])
        if self.state == "failed" and state == "stopped":  # keep the reason it failed
            return
        if self.state != state:
            self._set(state)

    async def _run(self) -> None:
        cfg = self.cfg
        try:
            await asyncio.to_thread(_load_sdk)
        except ImportError as exc:
            self._set("failed", f"the 'mcp' package cannot be imported ({exc}): pip install 'pisces[mcp]'")
            self.ready.set()
            return
        import anyio  # noqa: PLC0415 - loaded above, off the event loop
        from mcp.client.session import ClientSession  # noqa: PLC0415 - idem

        try:
            real = resolved(cfg)
        except ConfigError as exc:
            self._set("failed", str(exc))
            self.ready.set()
            return
        try:
            async with contextlib.AsyncExitStack() as stack:
                streams = await self._open(stack, real)
                session = await stack.enter_async_context(ClientSession(
                    streams[0], streams[1], message_handler=self._on_message,
                    list_roots_callback=self._roots, read_timeout_seconds=cfg.tool_timeout_ms / 1000))
                with anyio.fail_after(cfg.timeout_ms / 1000):  # only awaits inside: the scopes nest
                    result = await session.initialize()
                    self.session = session
                    info = getattr(result, "server_info", None)
                    self.server_info = {"name": getattr(info, "name", ""), "version": getattr(info, "version", "")}
                    await self.refresh()
                self.needs_login = None
                self._set("connected")
                self.ready.set()
                assert self._stop is not None
                await self._stop.wait()
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # noqa: BLE001 - a server's failure stays the server's
            self._fail(exc)
        finally:
            self.session = None
            if self.pgid is not None:
                _GROUPS.discard(self.pgid)
            self.ready.set()
            if self.state == "connected" and not (self._stop and self._stop.is_set()):  # it went away on its own
                self._set_tools([])
                self._set("failed", "the server closed the connection")

    def _fail(self, exc: BaseException) -> None:
        login = _login_required(exc)
        while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
            exc = exc.exceptions[0]
        if login is not None:
            text = str(login)
            asked, self.needs_login = self.needs_login, text
            if asked is None:  # one clear request to the person, not one per reconnect
                with contextlib.suppress(Exception):
                    self.manager.session.ui.notify(text, "warning")
        elif isinstance(exc, TimeoutError):
            text = f"no answer to initialize within {self.cfg.timeout_ms} ms"
        else:
            text = f"{type(exc).__name__}: {exc}".strip().rstrip(":")
        self._set_tools([])
        self._set("failed", text[:1000])

    async def _open(self, stack: contextlib.AsyncExitStack, real: ServerConfig) -> Any:
        if real.transport == "stdio":
            from pisces.core.mcp.stdio import stdio_transport  # noqa: PLC0415 - needs the SDK, loaded by _run

            def spawned(pgid: int) -> None:
                self.pgid = pgid
                _GROUPS.add(pgid)

            return await stack.enter_async_context(stdio_transport(
                real.command, real.args, real.env or None, real.cwd or self.manager.cwd, self.manager.errlog(),
                on_spawn=spawned))
        auth = None
        from pisces.core.mcp.oauth import session_provider, wants_oauth  # noqa: PLC0415 - remote servers only

        if wants_oauth(real):
            auth = self.auth = session_provider(self.manager.agent_dir, self.cfg)
        if real.transport == "sse":
            from mcp.client.sse import sse_client  # noqa: PLC0415 - per transport

            return await stack.enter_async_context(sse_client(real.url, headers=real.headers, auth=auth))
        import httpx2  # noqa: PLC0415 - remote servers only

        client = await stack.enter_async_context(httpx2.AsyncClient(
            headers=real.headers, auth=auth, timeout=httpx2.Timeout(30.0, read=real.tool_timeout_ms / 1000)))
        from mcp.client.streamable_http import streamable_http_client  # noqa: PLC0415 - per transport

        return await stack.enter_async_context(streamable_http_client(real.url, http_client=client))

    async def _roots(self, context: Any) -> Any:
        from pathlib import Path  # noqa: PLC0415 - rare

        import mcp_types as T  # noqa: PLC0415 - loaded by _run

        uri: Any = Path(self.manager.cwd).as_uri()  # a file URL; the SDK's FileUrl validates it
        return T.ListRootsResult(roots=[T.Root(uri=uri, name="project")])

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, Exception):  # invalid JSON and other transport errors: note, keep going
            self.manager.note(self.cfg.name, f"{type(message).__name__}: {str(message)[:200]}")
            return
        method = getattr(message, "method", "")
        if method == "notifications/tools/list_changed" or method.endswith("list_changed"):
            self.manager.schedule_refresh(self)

    # -- lists ---------------------------------------------------------------------------------
    async def refresh(self) -> None:
        session = self.session
        if session is None:
            return
        import mcp_types as T  # noqa: PLC0415 - loaded by _run

        caps = getattr(session, "server_capabilities", None) or getattr(session, "_server_capabilities", None)
        tools: list[Any] = []
        cursor = None
        for _ in range(100):  # pages, bounded
            page = await session.list_tools(params=T.PaginatedRequestParams(cursor=cursor) if cursor else None)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
        self.cached = False
        self._save_cache(tools)
        keep = [t for t in tools if self._wanted(t.name)]
        self._set_tools([McpTool(self.cfg.name, t, self.call, self.cfg.approval_tier) for t in keep])
        if caps is None or getattr(caps, "prompts", None) is not None:
            with contextlib.suppress(Exception):
                self.prompts = list((await session.list_prompts()).prompts)
        if caps is None or getattr(caps, "resources", None) is not None:
            with contextlib.suppress(Exception):
                self.resources = list((await session.list_resources()).resources)
                self.manager.tools_changed(self)  # the resource tool lists them

    def _save_cache(self, tools: list[Any]) -> None:
        from pisces.core.mcp import cache  # noqa: PLC0415 - same package

        defs = cache.definitions(tools)
        if defs != self._saved:
            cache.save(self.manager.agent_dir, self.cfg, defs)
            self._saved = defs

    def offer_cached(self) -> None:
        """Before the first connection: the tools of the last one, whose calls wait for the server."""
        from pisces.core.mcp import cache  # noqa: PLC0415 - same package

        defs = cache.load(self.manager.agent_dir, self.cfg)
        if not defs or self.tools:
            return
        self._saved, self.cached = defs, True
        self._set_tools([McpTool(self.cfg.name, d, self.call, self.cfg.approval_tier)
                         for d in defs if self._wanted(d["name"])])

    def _wanted(self, name: str) -> bool:
        if self.cfg.include_tools is not None and not glob_any(self.cfg.include_tools, name):
            return False
        return not glob_any(self.cfg.exclude_tools, name)

    def _set_tools(self, tools: list[McpTool]) -> None:
        before = [t.name for t in self.tools]
        self.tools = tools
        if not tools:
            self.cached = False
        if before != [t.name for t in tools] or tools:
            self.manager.tools_changed(self)

    # -- calls -----------------------------------------------------------------------------------
    async def wait_started(self) -> None:
        """Until the server is connected or has failed (at most its ``timeout`` and a little more)."""
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self.ready.wait(), timeout=self.cfg.timeout_ms / 1000 + 5)

    async def wait_ready(self) -> Any:
        if self.state in ("connecting", "pending") and not self.ready.is_set():
            try:
                await asyncio.wait_for(self.ready.wait(), timeout=self.cfg.timeout_ms / 1000)
            except asyncio.TimeoutError:
                pass
        if self.session is None:
            raise ToolError(f"MCP server {self.cfg.name} is not connected ({self.state}"
                            f"{': ' + self.error if self.error else ''})")
        return self.session

    async def call(self, tool: str, args: dict[str, Any], signal: Any) -> tuple[list[Any], Any, bool]:
        session = await self.wait_ready()
        task = asyncio.ensure_future(session.call_tool(tool, args,
                                                       read_timeout_seconds=self.cfg.tool_timeout_ms / 1000))
        remove = signal.add_listener(task.cancel) if signal is not None else (lambda: None)
        try:
            result = await task
        except asyncio.CancelledError:
            if signal is not None and signal.aborted:
                raise ToolError("aborted") from None
            raise
        except ToolError:
            raise
        except Exception as exc:  # noqa: BLE001 - the server's error, as text for the model
            raise ToolError(f"MCP error from {self.cfg.name}: {exc}") from None
        finally:
            remove()
        return list(result.content or []), getattr(result, "structured_content", None), bool(result.is_error)


class McpManager:
    """All servers of one session."""

    def __init__(self, session: Any, config: McpConfig) -> None:
        self.session, self.config = session, config
        self.cwd = session.cwd
        self.agent_dir: str = session.settings.agent_dir
        self.servers = {name: Server(self, cfg) for name, cfg in config.servers.items()}
        self.notes: list[dict[str, Any]] = []
        self.deferred: set[str] = set()  # MCP tools behind mcp_tool_search
        self.loaded: set[str] = set()  # deferred tools the model loaded with it
        self._refreshing: set[str] = set()
        self._again: set[str] = set()  # a list_changed came during the refresh: one more
        self._errlog: Any = None

    def errlog(self) -> Any:
        """Where servers' stderr goes: pisces' own stderr, unless PISCES_MCP_STDERR names a file."""
        if self._errlog is None:
            path = os.environ.get("PISCES_MCP_STDERR")
            self._errlog = open(path, "a") if path else sys.stderr
        return self._errlog

    def start(self) -> None:
        for server in self.servers.values():
            if server.cfg.enabled and server.cfg.name not in self.config.disabled:
                server.offer_cached()
                server.start()
            else:
                server.state = "disabled"

    def add(self, configs: list[ServerConfig]) -> None:
        """More servers (a front end's), started now; one of the same name is replaced."""
        for cfg in configs:
            old = self.servers.get(cfg.name)
            if old is not None:
                asyncio.get_running_loop().create_task(old.stop())
            self.config.servers[cfg.name] = cfg
            self.servers[cfg.name] = server = Server(self, cfg)
            server.start()

    def emit(self, event: dict[str, Any]) -> None:
        with contextlib.suppress(Exception):
            self.session.emit(event)

    def note(self, server: str, text: str) -> None:
        if len(self.notes) < 100:
            self.notes.append({"server": server, "message": text})

    def tools_changed(self, server: Server) -> None:
        replace_tool_group(self.session, f"mcp:{server.cfg.name}", list(server.tools))
        self._apply_deferral()
        self.emit({"type": "mcp_tools_changed", "server": server.cfg.name,
                   "toolNames": [t.name for t in server.tools], "deferred": sorted(self.deferred)})

    def _apply_deferral(self) -> None:
        """Above the threshold, the tools of servers without alwaysLoad leave the request for the search tool
        (pisces.core.mcp.search); tools the model loaded stay on."""
        from pisces.core.mcp.search import NAME, ToolSearch, schema_tokens  # noqa: PLC0415 - same package

        every = [t for s in self.servers.values() for t in s.tools]
        over = schema_tokens(every) > self.config.defer_threshold_tokens
        deferrable = [t for s in self.servers.values() if not s.cfg.always_load for t in s.tools]
        self.deferred = {t.name for t in deferrable if t.name not in self.loaded} if over else set()
        search = [ToolSearch([t for t in deferrable if t.name in self.deferred], self._load)] if over else []
        replace_tool_group(self.session, "mcp:search", search)
        from pisces.core.mcp.resources import ReadResource  # noqa: PLC0415 - same package

        with_resources = {n: s for n, s in self.servers.items() if s.resources and s.session is not None}
        replace_tool_group(self.session, "mcp:resources", [ReadResource(with_resources)] if with_resources else [])
        active = [t.name for t in self.session.agent.tools if t.name not in self.deferred]
        if over and NAME not in active:
            active.append(NAME)
        if active != [t.name for t in self.session.agent.tools]:
            self.session.set_active_tools(active)

    def _load(self, names: list[str]) -> None:
        self.loaded.update(names)
        active = [t.name for t in self.session.agent.tools]
        self.session.set_active_tools(active + [n for n in names if n not in active and n in self.session.all_tools])
        self.deferred -= set(names)

    def schedule_refresh(self, server: Server) -> None:
        """A ``*/list_changed`` notification: tools, prompts and resources are listed again. A flood costs one
        refresh at a time, and one that arrives during a refresh is followed by one more (none is lost)."""
        name = server.cfg.name
        if name in self._refreshing:
            self._again.add(name)
            return
        self._refreshing.add(name)

        async def run() -> None:
            try:
                while True:
                    self._again.discard(name)
                    await asyncio.sleep(0.05)
                    try:
                        await server.refresh()
                    except Exception as exc:  # noqa: BLE001 - a failed refresh keeps the old lists
                        self.note(name, f"refresh failed: {exc}")
                    if name not in self._again:
                        break
            finally:
                self._refreshing.discard(name)

        asyncio.get_running_loop().create_task(run())

    def commands(self) -> list[dict[str, Any]]:
        """The servers' prompts as ``get_commands`` items (``mcp:<server>:<prompt>``)."""
        from pisces.core.mcp.prompts import commands  # noqa: PLC0415 - same package

        return commands(self.servers)

    async def expand_input(self, text: str) -> tuple[str, list[Any]]:
        """A prompt's text with ``/mcp:<server>:<prompt>`` rendered and ``@mcp:<server>:<uri>`` attached, and
        the images the prompt brought (pisces.core.mcp.prompts)."""
        if "mcp:" not in text:
            return text, []
        from pisces.core.mcp.prompts import expand_input  # noqa: PLC0415 - same package

        return await expand_input(self, text)

    def status(self) -> dict[str, Any]:
        out: dict[str, Any] = {"servers": [s.status() for s in self.servers.values()],
                               "deferredTools": sorted(self.deferred)}
        if self.config.untrusted:
            from pisces.core.mcp.config import untrusted_message  # noqa: PLC0415 - same package, rare

            out["notStarted"] = [s.name for s in self.config.untrusted]
            out["message"] = untrusted_message(self.config.untrusted)
        if self.config.errors:
            out["configErrors"] = list(self.config.errors)
        return out

    def _get(self, name: Any) -> Server:
        server = self.servers.get(name) if isinstance(name, str) else None
        if server is None:
            raise ValueError(f"No MCP server named {name!r}: mcp_status lists them")
        return server

    async def toggle(self, name: Any, enabled: bool) -> dict[str, Any]:
        server = self._get(name)
        server.cfg.enabled = enabled
        self.config.disabled.discard(server.cfg.name)
        if enabled:
            server.start()
        else:
            await server.stop("disabled")
        return server.status()

    async def reconnect(self, name: Any) -> dict[str, Any]:
        server = self._get(name)
        await server.stop()
        server.cfg.enabled = True
        server.start()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(server.ready.wait(), timeout=server.cfg.timeout_ms / 1000 + 5)
        return server.status()

    @staticmethod
    def kill_all() -> None:
        kill_all()

    async def close(self) -> None:
        await asyncio.gather(*(s.stop() for s in self.servers.values()), return_exceptions=True)
        kill_all()
