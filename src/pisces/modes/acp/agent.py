"""The ACP methods. Each translates its request and hands over to a session (``sessions.py``); sessions are
created with the CLI's flags (provider, model, tools, ...) for the client's working directory.

Sessions are pisces sessions: the ACP ``sessionId`` is the pisces session id, and the files are the
pi-format files every pisces mode reads, so a session begun in an editor continues with
``pisces --mode rpc --session <id>`` and the other way round.
"""

from __future__ import annotations

import asyncio
from typing import Any

from acp import PROTOCOL_VERSION, RequestError
from acp.helpers import update_current_mode
from acp.schema import (
    AgentCapabilities,
    ConfigOptionUpdate,
    Implementation,
    InitializeResponse,
    ListSessionsResponse,
    LoadSessionResponse,
    McpCapabilities,
    NewSessionResponse,
    PromptCapabilities,
    ResumeSessionResponse,
    SessionCapabilities,
    SessionCloseCapabilities,
    SessionListCapabilities,
    SessionResumeCapabilities,
    SetSessionConfigOptionResponse,
)

from pisces import __version__
from pisces.core.errors import SessionConfigError
from pisces.core.session.build import create_session_from_args
from pisces.core.tools.backends import ToolBackends

from . import listing
from .delegate import Binding, ClientFiles, ClientTerminal
from .outbox import ResponseWatch
from .sessions import AcpSession

MCP_NOTICE = ("These MCP servers could not be started (see pisces' stderr for why) and their tools are not "
              "available in this session: {names}.")
MCP_STARTING = "Starting MCP servers for this session (their tools are named mcp__<server>__<tool>): {names}."


class PiscesAgent:
    def __init__(self, args: Any, watch: ResponseWatch) -> None:
        self._args = args
        self._watch = watch
        self._conn: Any = None
        self._client_caps: Any = None
        self._sessions: dict[str, AcpSession] = {}
        self._opening = asyncio.Lock()  # sessions are built one at a time (on a worker thread)

    def on_connect(self, conn: Any) -> None:
        self._conn = conn

    # -- lifecycle ------------------------------------------------------------------------------
    async def initialize(self, protocol_version: int, client_capabilities: Any = None, client_info: Any = None,
                         **kwargs: Any) -> InitializeResponse:
        self._client_caps = client_capabilities
        return InitializeResponse(
            protocol_version=PROTOCOL_VERSION,  # the version asked for when supported, else the latest: 1
            agent_capabilities=AgentCapabilities(
                load_session=True,
                prompt_capabilities=PromptCapabilities(image=True, audio=False, embedded_context=True),
                mcp_capabilities=McpCapabilities(http=False, sse=False),
                session_capabilities=SessionCapabilities(list=SessionListCapabilities(),
                                                         resume=SessionResumeCapabilities(),
                                                         close=SessionCloseCapabilities())),
            agent_info=Implementation(name="pisces", title="pisces", version=__version__),
            auth_methods=[])

    async def authenticate(self, method_id: str, **kwargs: Any) -> None:
        raise RequestError.invalid_params({"methodId": method_id, "reason": "pisces has no authentication methods: "
                                           "it uses the provider keys of its environment and auth.json"})

    async def new_session(self, cwd: str, mcp_servers: list[Any] | None = None, **kwargs: Any) -> NewSessionResponse:
        acp_session = await self._open(cwd, None)
        ignored = await self._after_open(acp_session, mcp_servers)
        return NewSessionResponse(session_id=acp_session.id, modes=acp_session.settings.modes(),
                                  config_options=acp_session.settings.options(),
                                  field_meta=_mcp_meta(mcp_servers, ignored))

    async def load_session(self, cwd: str, session_id: str, mcp_servers: list[Any] | None = None,
                           **kwargs: Any) -> LoadSessionResponse:
        acp_session = await self._existing_or_open(cwd, session_id)
        await acp_session.replay()
        ignored = await self._after_open(acp_session, mcp_servers)
        return LoadSessionResponse(modes=acp_session.settings.modes(), config_options=acp_session.settings.options(),
                                   field_meta=_mcp_meta(mcp_servers, ignored))

    async def resume_session(self, cwd: str, session_id: str, mcp_servers: list[Any] | None = None,
                             **kwargs: Any) -> ResumeSessionResponse:
        acp_session = await self._existing_or_open(cwd, session_id)
        ignored = await self._after_open(acp_session, mcp_servers)
        return ResumeSessionResponse(modes=acp_session.settings.modes(),
                                     config_options=acp_session.settings.options(),
                                     field_meta=_mcp_meta(mcp_servers, ignored))

    async def close_session(self, session_id: str, **kwargs: Any) -> None:
        acp_session = self._sessions.pop(session_id, None)
        if acp_session is None:
            raise _unknown(session_id)
        await acp_session.close()

    async def list_sessions(self, cwd: str | None = None, cursor: str | None = None,
                            **kwargs: Any) -> ListSessionsResponse:
        return await asyncio.to_thread(listing.list_page, cwd, cursor, self._args.session_dir)

    # -- settings -------------------------------------------------------------------------------
    async def set_session_mode(self, session_id: str, mode_id: str, **kwargs: Any) -> None:
        acp_session = self._get(session_id)
        await acp_session.settings.set_mode(mode_id)
        acp_session.outbox.post(ConfigOptionUpdate(session_update="config_option_update",
                                                   config_options=acp_session.settings.options()))

    async def set_config_option(self, config_id: str, session_id: str, value: Any,
                                **kwargs: Any) -> SetSessionConfigOptionResponse:
        acp_session = self._get(session_id)
        await acp_session.settings.set_option(config_id, value)
        if config_id == "mode":
            acp_session.outbox.post(update_current_mode(acp_session.settings.mode))
        return SetSessionConfigOptionResponse(config_options=acp_session.settings.options())

    # -- turns ----------------------------------------------------------------------------------
    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> Any:
        return await self._get(session_id).prompt(prompt)

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        acp_session = self._sessions.get(session_id)
        if acp_session is not None:
            acp_session.cancel()

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        raise RequestError.method_not_found(f"_{method}")

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None

    def cancel_all(self) -> None:
        for acp_session in self._sessions.values():
            acp_session.cancel()

    async def shutdown(self) -> None:
        """stdin closed: stop every run and flush every session file."""
        sessions, self._sessions = list(self._sessions.values()), {}
        for acp_session in sessions:
            try:
                await acp_session.close()
            except Exception:  # noqa: BLE001 - closing the others matters more
                pass

    # -- helpers --------------------------------------------------------------------------------
    def _get(self, session_id: str) -> AcpSession:
        acp_session = self._sessions.get(session_id)
        if acp_session is None:
            raise _unknown(session_id)
        return acp_session

    async def _existing_or_open(self, cwd: str, session_id: str) -> AcpSession:
        existing = self._sessions.get(session_id)
        if existing is not None:
            return existing
        path = await asyncio.to_thread(listing.find_session_file, session_id, cwd, self._args.session_dir)
        if path is None:
            raise RequestError(-32002, f"Session {session_id} not found: no session file has that id",
                               {"sessionId": session_id})
        return await self._open(cwd, path)

    async def _open(self, cwd: str, path: str | None) -> AcpSession:
        binding = Binding()
        backends = self._backends(binding)

        def build() -> Any:
            listing.check_cwd(cwd)
            return create_session_from_args(self._args, cwd=cwd, session=path, continue_session=False,
                                            backends=backends)

        async with self._opening:
            try:
                session = await asyncio.to_thread(build)
            except SessionConfigError as exc:
                raise RequestError(-32603, str(exc)) from None
        if session.approval is not None:  # tool calls the policy asks about go to the editor (docs/approval.md)
            from .permission import AcpApprover  # noqa: PLC0415 - loaded on first use

            session.approval.set_approver(AcpApprover(self._conn, binding, cwd, fallback=session.approval.fallback))
        await session.hooks.start("startup")  # extensions' session_start (nothing when there are none)
        acp_session = AcpSession(session, self._conn, binding)
        self._sessions[acp_session.id] = acp_session
        return acp_session

    def _backends(self, binding: Binding) -> ToolBackends:
        caps = self._client_caps
        fs = getattr(caps, "fs", None)
        files = ClientFiles(self._conn, binding) if fs is not None and fs.read_text_file and fs.write_text_file \
            else None
        shell = ClientTerminal(self._conn, binding) if caps is not None and caps.terminal else None
        return ToolBackends(files=files, shell=shell)

    async def _after_open(self, acp_session: AcpSession, mcp_servers: list[Any] | None) -> list[str]:
        """What the client hears once it has the session: the commands, and the MCP servers it passed (started
        for this session); returns the names of those that could not start."""
        ignored: list[str] = []
        self._watch.expect(acp_session.id, acp_session.outbox)
        if mcp_servers:
            started = await _start_mcp(acp_session.session, mcp_servers)
            ignored = [_server_name(s) for s in mcp_servers if _server_name(s) not in started]
            if started:
                acp_session.post_text(MCP_STARTING.format(names=", ".join(started)))
            if ignored:
                acp_session.post_text(MCP_NOTICE.format(names=", ".join(ignored)))
        acp_session.announce_commands()
        return ignored


def _unknown(session_id: str) -> RequestError:
    return RequestError(-32002, f"Unknown session {session_id}: create it with session/new or session/load",
                        {"sessionId": session_id})


def _server_name(server: Any) -> str:
    return str(getattr(server, "name", None) or getattr(server, "command", None) or getattr(server, "url", "?"))


def _pairs(items: Any) -> dict[str, str]:
    return {str(getattr(i, "name", "")): str(getattr(i, "value", "")) for i in items or []}


def _mcp_config(server: Any) -> dict[str, Any]:
    """An ACP McpServer (stdio, http or sse) as an ``mcpServers`` entry of docs/mcp.md."""
    url = getattr(server, "url", None)
    if url:
        return {"type": "sse" if getattr(server, "type", "http") == "sse" else "http", "url": str(url),
                "headers": _pairs(getattr(server, "headers", None))}
    return {"command": str(getattr(server, "command", "")), "args": [str(a) for a in getattr(server, "args", [])],
            "env": _pairs(getattr(server, "env", None))}


async def _start_mcp(session: Any, mcp_servers: list[Any]) -> list[str]:
    """Start the client's servers for this session and wait until each is connected or has failed (at most its
    ``timeout``, 30 s), so that the first prompt sees their tools; returns the names that connected."""
    from pisces.core.mcp import attach  # noqa: PLC0415 - only when a client passes servers

    extra = {_server_name(s): _mcp_config(s) for s in mcp_servers}
    manager = attach(session, extra=extra)
    if manager is None:
        return []
    waiting = [manager.servers[name] for name in extra if name in manager.servers]
    await asyncio.gather(*(server.wait_started() for server in waiting))
    return [server.cfg.name for server in waiting if server.state == "connected"]


def _mcp_meta(mcp_servers: list[Any] | None, ignored: list[str]) -> dict[str, Any] | None:
    if not mcp_servers:
        return None
    return {"pisces": {"mcpServers": "started" if len(ignored) < len(mcp_servers) else "not started",
                       "ignored": list(ignored)}}
