"""AgentSession: the one object a mode drives.

It composes small collaborators: the Agent (loop, queues), the SessionManager (the JSONL tree), Settings,
the ModelRegistry, the tools, the auto-retry policy, the compactor and the RPC bash runner. It forwards the
agent's events to its subscribers and adds the session-level ones (queue_update, thinking_level_changed,
session_info_changed, session_changed, auto_retry_*, compaction_*, agent_settled).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Awaitable, Callable

from pisces.agent.agent import Agent
from pisces.agent.types import AgentTool, MessageEndEvent, MessageStartEvent, MessageUpdateEvent
from pisces.ai.models import clamp_thinking_level
from pisces.ai.types import AssistantMessage, Model, StreamOptions, TextContent, UserMessage, now_ms
from pisces.core.config.auth import no_api_key_error
from pisces.core.config.models_registry import UNKNOWN_MODEL, ModelRegistry, next_thinking_level
from pisces.core.config.settings import Settings
from pisces.core.errors import SessionError
from pisces.core.planning import plan_mode_for
from pisces.core.planning.session_todos import plan_continue_in
from pisces.core.resources.templates import expand_prompt_template, list_prompt_commands
from pisces.core.session import views
from pisces.core.session.hooks import NoHooks
from pisces.core.session.listeners import Listener, Listeners
from pisces.core.session.retry import RetryPolicy
from pisces.core.session.switching import SessionSwitching
from pisces.core.session.ui import NoUI
from pisces.core.store import MessageEntry, SessionManager, convert_to_llm, list_sessions
from pisces.core.store.messages import CustomMessage
from pisces.core.task.hooks import SubagentHooks

if TYPE_CHECKING:
    from pisces.core.session.compactor import Compactor
    from pisces.core.session.ports import Approval, BashRunnerPort, Budget, SessionHooks
    from pisces.core.session.ui import SessionUI

BUSY_ERROR = "Agent is already processing. Specify streamingBehavior ('steer' or 'followUp') to queue the message."
DEFAULT_IDLE_TIMEOUT_MS = 300_000  # a provider silent this long ends the request as a (retryable) timeout


class AgentSession(SessionSwitching):
    def __init__(self, *, cwd: str, settings: Settings, registry: ModelRegistry, store: SessionManager,
                 model: Model | None, thinking_level: str, tools: dict[str, AgentTool], active_tools: list[str],
                 system_prompt_builder: Callable[[list[AgentTool]], str]) -> None:
        self.cwd = cwd
        self.settings = settings
        self.registry = registry
        self.store = store
        self.all_tools = tools
        self._build_system_prompt = system_prompt_builder
        self.hooks: SessionHooks = NoHooks()  # the ExtensionHost (core/extensions/binding.py) when there are any
        self.extension_options: dict[str, Any] = {}  # how to find them again (reload), set by the SDK
        self._ui: SessionUI | None = None  # the mode's SessionUI (see ``ui``), or built by ``ui_factory`` on first use
        self.ui_factory: Callable[[], SessionUI] | None = None
        self.tool_groups: dict[str, dict[str, Any]] = {}  # extension and host tools (pisces.core.tools.groups)
        self.mcp: Any = None  # the MCP servers' manager, when any is configured (pisces.core.mcp)
        # --skill/--prompt-template paths and those extensions add (resources_discover); --no-skills and friends
        self.resources: dict[str, Any] = {"skillPaths": [], "promptPaths": [], "skills": True, "promptTemplates": True}
        self._next_turn: list[Any] = []  # custom messages sent with the next prompt
        self.scope_patterns: list[str] | None = None  # --models, else settings enabledModels
        self._listeners = Listeners()
        self._steering_texts: list[str] = []
        self._follow_up_texts: list[str] = []
        self._pending_bash: list[Any] = []  # RPC bash results held while a run streams
        self._context_unknown = False  # right after a compaction, until the next reply
        self._settle_waiters = 0
        self.retry = RetryPolicy(self)
        self._compactor_obj: Compactor | None = None  # built on first use (see the compactor property)
        self.bash_runner: BashRunnerPort | None = None
        self.subagents = SubagentHooks()  # the task tool's spawn gate and usage callback
        self.budget: Budget | None = None  # a pisces.core.budget.SessionBudget once a limit is set (docs/budgets.md)
        self.approval: Approval | None = None  # core/approval/session_gate.SessionApproval (docs/approval.md)
        self.todos: Any = None  # pisces.core.planning.session_todos.SessionTodos (docs/planning.md)
        self.ttsr: Any = None  # pisces.core.planning.ttsr.StreamRules, the stream rules (docs/planning.md)
        self.plan_mode: Any = None  # pisces.core.planning.plan_mode.PlanMode, loaded when first needed
        self.sandbox: Any = None  # pisces.core.sandbox.launch.Sandbox, the OS sandbox of commands (docs/security.md)
        self.is_compacting = False
        self._run_lock = asyncio.Lock()
        self.agent = Agent(
            model=model or UNKNOWN_MODEL,
            tools=[tools[n] for n in active_tools if n in tools],
            thinking_level=thinking_level,
            convert_to_llm=convert_to_llm,
            stream_options=self.stream_options,
            steering_mode=settings.steering_mode,
            follow_up_mode=settings.follow_up_mode,
            interrupt_mode=settings.interrupt_mode,
        )
        self._base_prompt = self.agent.system_prompt = self._lazy_system_prompt()
        self.agent.subscribe(self._on_agent_event)
        self._load_context(initial=True)

    # ------------------------------------------------------------------------------------------
    # Events
    # ------------------------------------------------------------------------------------------
    def subscribe(self, listener: Listener, *, updates: bool = True) -> Callable[[], None]:
        """Call ``listener`` with every event from now on (in the order they subscribed) until the returned
        function is called. ``updates=False``: never with ``message_update``, the event a reply sends once per
        streamed delta, for a listener that only looks at the others."""
        return self._listeners.add(listener, updates)

    def emit(self, event: Any) -> None:
        if type(event) is MessageUpdateEvent:  # a streamed delta: thousands a reply, so only who reads them
            for listener in self._listeners.updates:
                listener(event)
            if self.ttsr is not None:  # the stream rules check each delta (budgets and todos ignore them)
                self.ttsr.on_update(event)
            return
        for listener in self._listeners.all:
            listener(event)
        if self.budget is not None:  # after the listeners: its own events follow the one that caused them
            self.budget.on_event(event)
        if self.todos is not None:
            self.todos.on_event(event)
        if self.ttsr is not None:
            self.ttsr.on_event(event)
        if isinstance(event, dict) and event.get("type") == "session_changed":
            if self.plan_mode is not None:
                self.plan_mode.on_event(event)
            else:
                self.load_plan_mode(only_if_used=True)

    def load_plan_mode(self, only_if_used: bool = False) -> Any:
        """Plan mode (docs/planning.md), loaded on first use; None when ``only_if_used`` and it is not used."""
        return plan_mode_for(self, only_if_used)

    @property
    def ui(self) -> SessionUI:
        """The SessionUI (pisces.core.session.ui) the mode set; without one, ``NoUI`` (dialogs answer defaults)."""
        if self._ui is None:
            self._ui = self.ui_factory() if self.ui_factory is not None else NoUI()
        return self._ui

    @ui.setter
    def ui(self, value: SessionUI | None) -> None:
        self._ui = value

    def _on_agent_event(self, event: Any) -> None:
        if self.hooks.active:  # extension handlers first, when there are any
            self.hooks.agent_event(event, self._deliver)
        elif type(event) is MessageUpdateEvent:  # no extensions: a streamed delta goes straight out
            self.emit(event)
        else:
            self._deliver(event)

    def _deliver(self, event: Any) -> None:
        if isinstance(event, MessageStartEvent) and isinstance(event.message, UserMessage):
            self._dequeue_text(views.user_text(event.message))
        self.emit(event)
        if isinstance(event, MessageEndEvent):
            msg = event.message
            if isinstance(msg, CustomMessage):
                self.store.append_custom_message_entry(msg.customType, msg.content, msg.display, msg.details)
                return
            self.store.append_message(msg)
            if isinstance(msg, AssistantMessage) and msg.stopReason != "error":
                self._context_unknown = False
                self.retry.on_reply(msg)

    # ------------------------------------------------------------------------------------------
    # Queues
    # ------------------------------------------------------------------------------------------
    @property
    def pending_count(self) -> int:
        return len(self._steering_texts) + len(self._follow_up_texts)

    def _emit_queue(self) -> None:
        self.emit({"type": "queue_update", "steering": list(self._steering_texts),
                   "followUp": list(self._follow_up_texts)})
        n = self.pending_count
        self.emit({"type": "queue_changed", "pendingMessageCount": n, "queuedMessageCount": n})

    def _dequeue_text(self, text: str) -> None:
        for queue in (self._steering_texts, self._follow_up_texts):
            if text in queue:
                queue.remove(text)
                self._emit_queue()
                return

    def _user_message(self, text: str, images: list[Any] | None, attachments: list[Any] | None = None) -> UserMessage:
        if self.budget is not None:  # a spent budget refuses prompts, steering and follow-ups alike
            self.budget.admit()
        message = UserMessage(content=[TextContent(text=text), *(images or [])], timestamp=now_ms())
        if attachments is not None:  # the legacy attachments as the client sent them (their blocks are in content)
            message.attachments = attachments
        return message

    def _refuse_command(self, text: str) -> str:
        """Extension commands cannot be queued (pi's text); otherwise the text with skills and templates expanded."""
        name = self.hooks.command_name(text)
        if name is not None:
            raise SessionError(f'Extension command "/{name}" cannot be queued. Use prompt() or execute the command '
                               "when not streaming.")
        return self._expand(text)

    def _expand(self, text: str) -> str:
        if text.startswith("/skill:"):
            from pisces.core.resources.skills import expand_skill_command  # noqa: PLC0415 - not needed at start-up

            text = expand_skill_command(self, text)
        return expand_prompt_template(self.cwd, text, self.resources)

    def steer(self, text: str, images: list[Any] | None = None, attachments: list[Any] | None = None) -> None:
        text = self._refuse_command(text)
        self.agent.steer(self._user_message(text, images, attachments))
        self._steering_texts.append(text)
        self._emit_queue()

    def follow_up(self, text: str, images: list[Any] | None = None, attachments: list[Any] | None = None) -> None:
        text = self._refuse_command(text)
        self.agent.follow_up(self._user_message(text, images, attachments))
        self._follow_up_texts.append(text)
        self._emit_queue()

    def clear_queue(self) -> tuple[list[str], list[str]]:
        self.agent.clear_queues()
        steering, follow = self._steering_texts, self._follow_up_texts
        self._steering_texts, self._follow_up_texts = [], []
        self._emit_queue()
        return steering, follow

    # ------------------------------------------------------------------------------------------
    # Prompting
    # ------------------------------------------------------------------------------------------
    @property
    def is_streaming(self) -> bool:
        return self.agent.is_streaming

    @property
    def is_busy(self) -> bool:
        """Streaming, retrying (back-off included), or compacting: a new prompt must wait or queue."""
        return self.agent.is_streaming or self._run_lock.locked() or self.is_compacting

    def record_usage(self, usage: Any) -> None:
        """A request the session made on the user's behalf outside the agent's turns (a compaction or branch
        summary): its usage counts toward the budget like a reply's."""
        if self.budget is not None:
            self.budget.add_usage(usage)

    def mark_context_unknown(self) -> None:
        """No usage describes the context until the next reply (right after a compaction rewrote it)."""
        self._context_unknown = True

    def stream_options(self, model: Model) -> StreamOptions:
        """The options of a request to ``model`` on this session's behalf (the agent's replies, summaries)."""
        s = self.settings
        opts = StreamOptions(
            apiKey=self.registry.get_api_key(model),
            headers=self.registry.headers(model) or {},
            reasoning=None if self.agent.thinking_level == "off" else self.agent.thinking_level,
            sessionId=self.store.get_session_id(),
            timeoutMs=s.retry_provider_timeout_ms,
            idleTimeoutMs=int(s.get("retry.provider.idleTimeoutMs", DEFAULT_IDLE_TIMEOUT_MS) or 0),
            thinkingBudgets=s.thinking_budgets,
        )
        if s.retry_provider_max_retries is not None:
            opts.maxRetries = s.retry_provider_max_retries
        return opts

    def check_model(self) -> None:
        """Raise the user-facing error when the current model cannot be asked (unknown, or no credentials)."""
        model = self.agent.model
        if model is UNKNOWN_MODEL or model.provider == "unknown" or not self.registry.has_auth(model):
            raise SessionError(_no_key_error(model, self.registry))

    async def prompt(self, text: str, *, images: list[Any] | None = None, streaming_behavior: str | None = None,
                     on_accepted: Callable[[], None] | None = None, source: str = "rpc", expand: bool = True,
                     attachments: list[Any] | None = None) -> None:
        """Preflight, then ``on_accepted()``, then the run (awaited to its very end, retries included).
        An extension command (``/name args``) runs at once, even while streaming. While the agent is busy the
        message is queued per ``streaming_behavior``; without one it is refused, except during compaction or a
        retry back-off, where it waits its turn instead of being dropped."""
        if self.budget is not None:
            self.budget.admit()
        accepted = on_accepted or (lambda: None)
        if expand and text.startswith("/") and await self.hooks.run_command(text):
            accepted()
            return
        handled, text, images = await self.hooks.input(text, images, source)
        if handled:
            accepted()
            return
        if expand:
            text = self._expand(text)
            if self.mcp is not None:  # /mcp:<server>:<prompt> and @mcp:<server>:<uri> (docs/mcp.md)
                text, more = await self.mcp.expand_input(text)
                images = [*(images or []), *more] if more else images
        between_turns = self._run_lock.locked() and not self.is_compacting  # e.g. a retry back-off
        if self.agent.is_streaming or (between_turns and streaming_behavior is not None):
            if streaming_behavior is None:
                raise SessionError(BUSY_ERROR)
            queue = self.agent.follow_up if streaming_behavior == "followUp" else self.agent.steer
            queue(self._user_message(text, images, attachments))
            (self._follow_up_texts if streaming_behavior == "followUp" else self._steering_texts).append(text)
            self._emit_queue()
            accepted()
            return
        self.check_model()
        if self._run_lock.locked() or self.is_compacting:  # answered now, run when the current work ends
            accepted()
            accepted = lambda: None  # noqa: E731 - answered once
        async with self._run_lock:
            await self._wait_compaction()
            self._flush_pending_bash()
            await self._before_prompt_compaction()
            messages = [self._user_message(text, images, attachments), *self._next_turn]
            self._next_turn = []
            extra, system_prompt = await self.hooks.before_agent_start(text, images, self._base_prompt)
            messages.extend(extra)
            self.agent.system_prompt = system_prompt if system_prompt is not None else self._base_prompt
            accepted()
            await self._run(lambda: self.agent.prompt(messages))

    async def send_custom_message(self, message: Any, *, trigger_turn: bool = False,
                                  deliver_as: str | None = None) -> None:
        """An extension's custom message: with the next prompt (``nextTurn``), queued while streaming, a run of
        its own (``trigger_turn``), or just added to the session."""
        if deliver_as == "nextTurn":
            self._next_turn.append(message)
        elif self.agent.is_streaming:
            (self.agent.follow_up if deliver_as == "followUp" else self.agent.steer)(message)
        elif trigger_turn:
            self.check_model()
            async with self._run_lock:
                await self._run(lambda: self.agent.prompt([message]))
        else:
            self.agent.messages.append(message)
            self.store.append_custom_message_entry(message.customType, message.content, message.display,
                                                   message.details)
            self.emit(MessageStartEvent(message=message))
            self.emit(MessageEndEvent(message=message))

    async def _run(self, start: Callable[[], Awaitable[Any]]) -> None:
        """One user-visible run: the agent run, then retries and compaction as the outcome asks, then a todo
        reminder (docs/planning.md) when the model stopped with unfinished items."""
        while True:
            await start()
            while True:
                last = self.last_assistant_message()
                if last is None or last.stopReason != "error":
                    break
                action = await self._after_error(last)
                if action is None:
                    break
                await self.agent.continue_()
            follow = self._continuation()
            if follow is None:
                break

            def start(msgs: list[Any] = follow) -> Awaitable[Any]:  # the run goes on with them
                return self.agent.prompt(msgs)
        await self._after_run()
        await self.hooks.drain()  # extension handlers of this run's events are done, their frames written
        # no handler replaces these messages in place any more: the next request's checkpoint does not compare
        # their contents again (see pisces.ai.providers.openai_chat_messages)
        self.agent.messages.seal()
        self.emit({"type": "agent_settled"})
        if self.plan_mode is not None:
            self.plan_mode.after_run()  # an approved plan carried out in a new session starts now

    def _continuation(self) -> list[Any] | None:
        """What a stopped run continues with (docs/planning.md): a stream rule's interrupts, or a todo reminder."""
        if self.ttsr is not None:
            fired = self.ttsr.after_run()
            if fired is not None:
                interrupts, discard = fired
                last = self.store.get_leaf_entry()
                if discard and isinstance(last, MessageEntry) and isinstance(last.message, AssistantMessage):
                    # the partial reply leaves the context; it stays in the file, on a branch of its own
                    if last.parentId is None:
                        self.store.reset_leaf()
                    else:
                        self.store.branch(last.parentId)
                    if self.agent.messages and self.agent.messages[-1] is last.message:
                        self.agent.messages.pop()
                    else:
                        self.agent.replace_messages(self.store.build_session_context().messages)
                return list(interrupts)
        if self.todos is not None:
            reminder = self.todos.reminder(self.last_assistant_message())
            if reminder is not None:
                return [reminder]
        return None

    async def _after_error(self, last: AssistantMessage) -> str | None:
        """Decide what follows a failed reply: overflow compaction, a retry, or nothing."""
        if await self.compactor.handle_overflow(last):
            return "compacted"
        if await self.retry.handle_error(last):
            return "retry"
        return None

    async def _after_run(self) -> None:
        await self.compactor.check_threshold()

    async def _before_prompt_compaction(self) -> None:
        await self.compactor.check_threshold(before_prompt=True)

    async def _wait_compaction(self) -> None:
        if self._compactor_obj is not None:
            await self._compactor_obj.wait_idle()

    @property
    def compactor(self) -> Compactor:
        """The Compactor, imported and built on first use so that start-up stays light."""
        if self._compactor_obj is None:
            from pisces.core.session.compactor import Compactor  # noqa: PLC0415 - not needed at start-up

            self._compactor_obj = Compactor(self, self._run_lock)
        return self._compactor_obj

    def prepare_first_prompt(self) -> None:
        """Build the system prompt while idle (~15 ms); a failure is left for the prompt to report."""
        build = self.agent.system_prompt
        try:
            if callable(build):
                build()
        except Exception:  # noqa: BLE001
            pass

    def _lazy_system_prompt(self) -> Callable[[], str]:
        """The system prompt for the active tools, built when the first request needs it."""
        cache: list[str] = []
        tools = list(self.agent.tools)

        def get() -> str:
            if not cache:
                cache.append(self._build_system_prompt(tools))
            return cache[0]

        return get

    def refresh_system_prompt(self) -> None:
        """Build the system prompt again when next needed (tools, skills or context files changed)."""
        self._base_prompt = self.agent.system_prompt = self._lazy_system_prompt()

    async def reload_resources(self) -> None:
        """Read settings, extensions, skills, prompt templates and context files again."""
        from pisces.core.extensions.binding import reload_extensions  # noqa: PLC0415 - not needed at start-up

        self.settings.reload()
        await reload_extensions(self)
        self.refresh_system_prompt()
        self._session_changed("reload")

    async def abort(self) -> None:
        """Stop everything in flight (retry wait, run, compaction) and return once idle. Extension handlers
        still running are abandoned first: abort never waits for a handler (pisces.core.extensions.runner)."""
        self.hooks.abort_handlers()
        try:
            self.retry.cancel()
            if self._compactor_obj is not None:
                self._compactor_obj.abort()
            self.agent.abort()
            await self.agent.wait_for_idle()
            await self.hooks.drain()  # the run's last events reach the session (bounded by the abort's deadline)
        finally:
            self.hooks.abort_finished()

    def last_assistant_message(self) -> AssistantMessage | None:
        for m in reversed(self.agent.messages):
            if isinstance(m, AssistantMessage):
                return m
        return None

    # ------------------------------------------------------------------------------------------
    # Model and thinking
    # ------------------------------------------------------------------------------------------
    @property
    def model(self) -> Model:
        return self.agent.model

    def available_models(self) -> list[Model]:
        return self.registry.get_available()

    def set_model_by_id(self, provider: Any, model_id: Any) -> Model:
        model = None
        if isinstance(provider, str) and isinstance(model_id, str):
            model = next((m for m in self.available_models() if m.provider == provider and m.id == model_id), None)
        if model is None:
            raise SessionError(f"Model not found: {_js(provider)}/{_js(model_id)}")
        self.set_model(model)
        return model

    def set_model(self, model: Model, thinking_level: str | None = None, source: str = "set") -> None:
        previous, self.agent.model = self.agent.model, model
        self.hooks.notify_soon({"type": "model_select", "model": model, "previousModel": previous, "source": source})
        self.store.append_model_change(model.provider, model.id)
        self.settings.set_default_model(model.provider, model.id)
        wanted = thinking_level or self.settings.default_thinking_level or "medium"
        self._apply_thinking_level(clamp_thinking_level(model, wanted), persist=thinking_level is not None)

    def cycle_model(self) -> dict[str, Any] | None:
        nxt = self.registry.next_in_scope(self.agent.model, self.scope_patterns or self.settings.enabled_models)
        if nxt is None:
            return None
        model, level, scoped = nxt
        self.set_model(model, level, source="cycle")
        return {"model": model, "thinkingLevel": self.agent.thinking_level, "isScoped": scoped}

    def _apply_thinking_level(self, level: str, persist: bool = True) -> None:
        if level == self.agent.thinking_level:
            return
        self.hooks.notify_soon({"type": "thinking_level_select", "level": level,
                                "previousLevel": self.agent.thinking_level})
        self.agent.thinking_level = level
        self.store.append_thinking_level_change(level)
        if persist and self.agent.model.reasoning:
            self.settings.set_default_thinking_level(level)
        self.emit({"type": "thinking_level_changed", "level": level})

    def set_thinking_level(self, level: str) -> None:
        if level not in ("off", "minimal", "low", "medium", "high", "xhigh"):
            raise SessionError(f"Invalid thinking level '{level}': use off, minimal, low, medium, high or xhigh")
        self._apply_thinking_level(clamp_thinking_level(self.agent.model, level))

    def cycle_thinking_level(self) -> str | None:
        level = next_thinking_level(self.agent.model, self.agent.thinking_level)
        if level is None:
            return None
        self._apply_thinking_level(level)
        return level

    # ------------------------------------------------------------------------------------------
    # Modes and switches
    # ------------------------------------------------------------------------------------------
    def set_steering_mode(self, mode: str) -> None:
        self.agent.steering_mode = mode
        self.settings.set_steering_mode(mode)

    def set_follow_up_mode(self, mode: str) -> None:
        self.agent.follow_up_mode = mode
        self.settings.set_follow_up_mode(mode)

    def set_interrupt_mode(self, mode: str) -> None:
        self.agent.interrupt_mode = mode
        self.settings.set_interrupt_mode(mode)

    def set_auto_compaction(self, enabled: bool) -> None:
        self.settings.set_compaction_enabled(enabled)

    def set_auto_retry(self, enabled: bool) -> None:
        self.settings.set_retry_enabled(enabled)

    def abort_retry(self) -> None:
        self.retry.cancel()

    # ------------------------------------------------------------------------------------------
    # State
    # ------------------------------------------------------------------------------------------
    @property
    def messages(self) -> list[Any]:
        return self.agent.messages

    def get_state(self) -> dict[str, Any]:
        state: dict[str, Any] = {
            "model": self.agent.model,
            "thinkingLevel": self.agent.thinking_level,
            "isStreaming": self.agent.is_streaming,
            "isCompacting": self.is_compacting,
            "steeringMode": self.agent.steering_mode,
            "followUpMode": self.agent.follow_up_mode,
            "interruptMode": self.agent.interrupt_mode,
            "queueMode": self.agent.steering_mode,
            **self._identity(),
        }
        state["autoCompactionEnabled"] = self.settings.compaction_enabled
        state["autoRetryEnabled"] = self.settings.retry_enabled
        state["messageCount"] = len(self.agent.messages)
        state["pendingMessageCount"] = self.pending_count
        state["queuedMessageCount"] = self.pending_count
        state.update(views.trust_fields(self.settings))
        if self.budget is not None:
            state["budget"] = self.budget.state()
        if self.approval is not None:
            state["approval"] = self.approval.state()
        if self.todos is not None:
            state["todoPhases"] = self.todos.phases
        if self.sandbox is not None:
            state["sandbox"] = self.sandbox.state()
        state["planMode"] = self.plan_mode.state() if self.plan_mode is not None else \
            {"enabled": False, "planFile": None, "continueIn": plan_continue_in(self.settings)}
        return state

    def session_stats(self) -> dict[str, Any]:
        data = self._identity(with_name=False)
        data.update(views.session_stats(self.agent.messages))
        usage = self.context_usage(brief=True)
        if usage is not None:
            data["contextUsage"] = usage
        if self.budget is not None:
            data["budget"] = self.budget.state()
        return data

    def context_usage(self, brief: bool = False) -> dict[str, Any] | None:
        usage = views.context_usage(self.agent.messages, self.agent.model, unknown=self._context_unknown)
        if usage is not None and brief:
            usage = {k: usage[k] for k in ("tokens", "contextWindow", "percent")}
        return usage

    def last_assistant_text(self) -> str | None:
        return views.last_assistant_text(self.agent.messages)

    def fork_messages(self) -> list[dict[str, str]]:
        return views.fork_messages(self.store.get_entries())

    def commands(self) -> list[dict[str, Any]]:
        """Extension commands, then prompt templates, then skills (``skill:<name>``), as pi lists them."""
        from pisces.core.resources.skills import skill_commands  # noqa: PLC0415 - not needed at start-up

        return [*self.hooks.commands(), *list_prompt_commands(self.cwd, self.resources),
                *skill_commands(self), *(self.mcp.commands() if self.mcp is not None else [])]

    def tools_info(self) -> dict[str, Any]:
        return {"activeToolNames": [t.name for t in self.agent.tools],
                "allTools": [{"name": t.name, "description": t.description, "parameters": t.parameters}
                             for t in self.all_tools.values()]}

    def set_active_tools(self, names: list[str]) -> list[str]:
        unknown = [n for n in names if n not in self.all_tools]
        if unknown:
            raise SessionError(f"Unknown tool(s): {', '.join(unknown)}. Available: {', '.join(self.all_tools)}")
        self.agent.tools = [self.all_tools[n] for n in names]
        self.refresh_system_prompt()
        return [t.name for t in self.agent.tools]

    # ------------------------------------------------------------------------------------------
    # Naming, labels, listing, tree
    # ------------------------------------------------------------------------------------------
    def set_session_name(self, name: str) -> None:
        name = name.strip()
        if not name:
            raise SessionError("Session name cannot be empty")
        self.store.append_session_info(name)
        self.emit({"type": "session_info_changed", "name": name})

    def set_entry_label(self, target_id: str, label: str | None) -> None:
        if self.store.get_entry(target_id) is None:
            raise SessionError(f"Entry {target_id} not found")
        self.store.append_label_change(target_id, label.strip() if label else None)

    def list_sessions(self, scope: str, session_dir: str | None) -> list[dict[str, Any]]:
        directory = None if scope == "all" else (session_dir or self.store.get_session_dir())
        return views.session_rows(list_sessions(directory))

    def session_tree(self) -> dict[str, Any]:
        return views.tree_view(self.store.get_entries(), self.store.get_leaf_id(), self.store.get_labels())

    # ------------------------------------------------------------------------------------------
    # New, switch, fork, clone, navigate
    # ------------------------------------------------------------------------------------------
    def _identity(self, with_name: bool = True) -> dict[str, Any]:
        """sessionFile (absent in memory), sessionId, sessionName (when named): get_state's order."""
        ident: dict[str, Any] = {}
        path = self.store.get_session_file()
        if path:
            ident["sessionFile"] = path
        ident["sessionId"] = self.store.get_session_id()
        name = self.store.get_session_name() if with_name else None
        if name:
            ident["sessionName"] = name
        return ident

    # ------------------------------------------------------------------------------------------
    # RPC bash, export
    # ------------------------------------------------------------------------------------------
    async def run_bash(self, command: str) -> Any:
        from pisces.core.session.user_bash import run_rpc_bash  # noqa: PLC0415 - not needed at start-up

        return await run_rpc_bash(self, command)

    def abort_bash(self) -> None:
        if self.bash_runner is not None:
            self.bash_runner.abort()

    def record_bash(self, message: Any) -> None:
        """Store an RPC bash result: at once when idle, or held until the next prompt while a run streams."""
        if self.agent.is_streaming:
            self._pending_bash.append(message)
        else:
            self.agent.messages.append(message)
            self.store.append_message(message)

    def _flush_pending_bash(self) -> None:
        for message in self._pending_bash:
            self.agent.messages.append(message)
            self.store.append_message(message)
        self._pending_bash.clear()

    async def compact(self, custom_instructions: str | None = None) -> Any:
        return await self.compactor.compact_manual(custom_instructions)

    async def export_html(self, output_path: str | None) -> dict[str, Any]:
        from pisces.core.export_html import export_session  # noqa: PLC0415 - not needed at start-up

        return {"path": export_session(self, output_path)}

    async def shutdown(self) -> None:
        try:
            await asyncio.wait_for(self.hooks.shutdown("quit"), timeout=0.5)
        except (asyncio.TimeoutError, Exception):  # noqa: BLE001 - exiting regardless
            pass
        self.retry.cancel()
        if self.bash_runner is not None:
            self.bash_runner.abort()
        if self._compactor_obj is not None:
            self._compactor_obj.abort()
        self.agent.abort()
        try:
            await asyncio.wait_for(self.agent.wait_for_idle(), timeout=0.5)
        except asyncio.TimeoutError:
            pass
        if self.mcp is not None:  # every server stopped, its process group ended
            try:
                await asyncio.wait_for(self.mcp.close(), timeout=8.0)
            except (asyncio.TimeoutError, Exception):  # noqa: BLE001 - exiting regardless
                self.mcp.kill_all()
        self.store.close()


def _js(value: Any) -> str:
    return "undefined" if value is None else str(value)


def _no_key_error(model: Any, registry: Any) -> str:
    return no_api_key_error(model, registry)
