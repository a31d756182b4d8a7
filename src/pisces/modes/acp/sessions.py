"""One ACP session = one AgentSession, with its outbox, its turn translator and its settings.

A turn (``session/prompt``) runs the session's ``prompt`` and answers with the stop reason and the turn's
usage once every update of the turn has been written. ``session/cancel`` answers the turn with
``cancelled`` as soon as the run has stopped (tools, a pending permission, a retry wait and compaction all
stop on abort), and at the latest after ``CANCEL_GRACE`` seconds; nothing of that turn is sent after the
answer, and the next prompt waits for the old run to be over.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from acp import RequestError
from acp.helpers import update_available_commands
from acp.schema import (
    AvailableCommand,
    AvailableCommandInput,
    Cost,
    PromptResponse,
    SessionInfoUpdate,
    StopReason,
    UnstructuredCommandInput,
    Usage,
    UsageUpdate,
)

from pisces.core.errors import SessionError
from pisces.core.session.views import fork_messages
from pisces.core.store import iso_now

from .config import SessionSettings
from .content import prompt_from_blocks
from .outbox import Outbox
from .replay import history_updates
from .translate import TurnTranslator

CANCEL_GRACE = 5.0  # seconds a cancelled run may take to stop before the turn answers `cancelled` anyway
TITLE_LIMIT = 100
STOP_REASONS: dict[str, StopReason] = {"length": "max_tokens", "aborted": "cancelled"}

log = logging.getLogger("pisces.acp")


def error(text: str, **data: Any) -> RequestError:
    """An error whose message is the sentence a user reads (RequestError's helpers say only "Internal error")."""
    return RequestError(-32603, text, data or None)


class AcpSession:
    def __init__(self, session: Any, conn: Any, binding: Any) -> None:
        self.session = session
        self.id: str = session.store.get_session_id()
        binding.session_id = self.id
        self.outbox = Outbox(lambda update: conn.session_update(session_id=self.id, update=update),
                             on_overflow=self._stalled_client)
        self.translator = TurnTranslator(session.cwd, self.outbox.post)
        binding.on_terminal = self.translator.attach_terminal
        self.settings = SessionSettings(session)
        self._unsubscribe = session.subscribe(self.translator.on_event)
        self._turn = asyncio.Lock()
        self._run: asyncio.Future[Any] | None = None
        self._cancel: asyncio.Event | None = None
        self._aborting: asyncio.Future[Any] | None = None
        self._title: str | None = None
        self._announcing: asyncio.Future[Any] | None = None

    def _stalled_client(self) -> None:
        """The client stopped reading updates: stop the run rather than queue its output without end."""
        self._aborting = asyncio.ensure_future(self.session.abort())

    # ------------------------------------------------------------------------------------------
    async def replay(self) -> None:
        """Send the stored conversation (``session/load``), before the load's response."""
        for update in history_updates(self.session.store.get_branch(), self.session.cwd):
            await self.outbox.send_now(update)
        self._title = self._current_title()

    def announce_commands(self) -> None:
        """Post ``available_commands_update`` (the task is kept: the loop holds tasks only weakly)."""
        self._announcing = asyncio.ensure_future(self._announce_commands())

    async def _announce_commands(self) -> None:
        """``available_commands_update`` from ``session.commands()`` (prompt templates; skills and extension
        commands when the session lists them). Reading the templates is file I/O: off the event loop."""
        try:
            commands = await asyncio.to_thread(self.session.commands)
        except Exception:
            log.exception("could not list the commands")
            return
        self.outbox.post(update_available_commands([_command(c) for c in commands if c.get("name")]))

    def post_text(self, text: str) -> None:
        from acp import update_agent_message_text  # noqa: PLC0415 - an optional library, loaded on first use

        self.outbox.post(update_agent_message_text(text))

    # ------------------------------------------------------------------------------------------
    async def prompt(self, blocks: list[Any]) -> PromptResponse:
        text, images = prompt_from_blocks(blocks)
        async with self._turn:
            if self._run is not None and not self._run.done():
                await asyncio.wait({self._run})  # a cancelled run still winding down
            cancel = self._cancel = asyncio.Event()
            self.translator.begin()
            run = self._run = asyncio.ensure_future(self.session.prompt(text, images=images or None))
            run.add_done_callback(lambda t: t.cancelled() or t.exception())  # a run outliving its turn is quiet
            waiter = asyncio.ensure_future(cancel.wait())
            try:
                await asyncio.wait({run, waiter}, return_when=asyncio.FIRST_COMPLETED)
                if cancel.is_set() and not run.done():
                    await asyncio.wait({run}, timeout=CANCEL_GRACE)
            finally:
                waiter.cancel()
                self.translator.end()
                self._cancel = None
            self._post_turn_end()
            await self.outbox.flush()
            if cancel.is_set():
                return PromptResponse(stop_reason="cancelled", usage=self._usage())
            failure = run.exception()
            if isinstance(failure, SessionError):
                raise error(str(failure))
            if failure is not None:
                raise failure
            last = self.translator.last_reply
            if last is not None and last.stopReason == "error":
                raise error(last.errorMessage or "The model request failed.")
            stop: StopReason = STOP_REASONS.get(last.stopReason, "end_turn") if last is not None else "end_turn"
            return PromptResponse(stop_reason=stop, usage=self._usage())

    def cancel(self) -> None:
        """``session/cancel``: stop the run (and whatever it waits on); the turn answers ``cancelled``."""
        if self._cancel is None:
            return
        self._cancel.set()
        if self._aborting is None or self._aborting.done():
            self._aborting = asyncio.ensure_future(self.session.abort())

    async def close(self) -> None:
        self.cancel()
        self._unsubscribe()
        try:
            await self.session.shutdown()
        finally:
            await self.outbox.close()

    # ------------------------------------------------------------------------------------------
    def _usage(self) -> Usage:
        u = self.translator.usage
        total = u["input"] + u["output"] + u["cacheRead"] + u["cacheWrite"]
        return Usage(total_tokens=total, input_tokens=u["input"], output_tokens=u["output"],
                     cached_read_tokens=u["cacheRead"], cached_write_tokens=u["cacheWrite"])

    def _post_turn_end(self) -> None:
        title = self._current_title()
        self.outbox.post(SessionInfoUpdate(session_update="session_info_update", updated_at=iso_now(),
                                           title=title if title != self._title else None))
        self._title = title
        usage = self.session.context_usage(brief=True)
        if usage is not None and isinstance(usage.get("tokens"), (int, float)):
            cost = self.session.session_stats().get("cost", 0)
            self.outbox.post(UsageUpdate(session_update="usage_update", used=int(usage["tokens"]),
                                         size=int(usage["contextWindow"]),
                                         cost=Cost(amount=float(cost), currency="USD")))

    def _current_title(self) -> str | None:
        """The session's name, else its first prompt's first line: what ``session/list`` shows too."""
        name = self.session.store.get_session_name()
        if name:
            return name
        if self._title is not None:
            return self._title

        first = fork_messages(self.session.store.get_entries())
        if not first:
            return None
        return title_of(first[0].get("text", ""))


def title_of(text: str) -> str | None:
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    if not line:
        return None
    return line if len(line) <= TITLE_LIMIT else line[:TITLE_LIMIT - 1] + "…"


def _command(entry: dict[str, Any]) -> AvailableCommand:
    return AvailableCommand(name=entry["name"], description=entry.get("description") or entry["name"],
                            input=AvailableCommandInput(root=UnstructuredCommandInput(hint="arguments")))

