"""Agent: the loop's state, its steering and follow-up queues, queue and interrupt modes, and abort."""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable

from pisces.agent.loop import LoopConfig, RunState, run_loop
from pisces.agent.types import AgentTool
from pisces.ai.abort import AbortSignal
from pisces.ai.stream import stream as default_stream
from pisces.ai.tracked_list import TrackedList
from pisces.ai.types import AssistantMessage, Message, Model, StreamOptions, ToolResultMessage, UserMessage

QUEUE_MODES = ("all", "one-at-a-time")
INTERRUPT_MODES = ("immediate", "wait")

Listener = Callable[[Any], None]


def default_convert_to_llm(messages: list[Any]) -> list[Message]:
    """Keep only the roles an LLM understands."""

    return [m for m in messages if isinstance(m, (UserMessage, AssistantMessage, ToolResultMessage))]


class AgentBusyError(RuntimeError):
    pass


class Agent:
    def __init__(
        self,
        *,
        model: Model,
        system_prompt: str | Callable[[], str] = "",
        tools: list[AgentTool] | None = None,
        thinking_level: str = "off",
        messages: list[Any] | None = None,
        convert_to_llm: Callable[[list[Any]], list[Message]] = default_convert_to_llm,
        stream_options: Callable[[Model], StreamOptions] | None = None,
        transform_context: Callable[[list[Any], AbortSignal], Awaitable[list[Any]]] | None = None,
        steering_mode: str = "one-at-a-time",
        follow_up_mode: str = "one-at-a-time",
        interrupt_mode: str = "immediate",
        stream_fn: Callable[..., Any] = default_stream,
    ) -> None:
        self.model = model
        self.system_prompt = system_prompt
        self.tools: list[AgentTool] = list(tools or [])
        self.thinking_level = thinking_level
        # the history grows at its end; a TrackedList tells the request path when it changed otherwise
        self.messages: TrackedList = TrackedList(messages or [])
        self.convert_to_llm = convert_to_llm
        self.stream_options = stream_options
        self.transform_context = transform_context
        self.steering_mode = steering_mode
        self.follow_up_mode = follow_up_mode
        self.interrupt_mode = interrupt_mode
        self.stream_fn = stream_fn
        self.before_tool_call: Callable[..., Awaitable[Any]] | None = None  # the tool-call gate (see LoopConfig)
        self.after_tool_call: Callable[..., Awaitable[Any]] | None = None
        self.gate_chain: Any = None  # pisces.agent.gate.GateChain, when several collaborators share the gate
        self.steering_queue: list[Any] = []
        self.follow_up_queue: list[Any] = []
        self.is_streaming = False
        self._listeners: tuple[Listener, ...] = ()  # replaced, never changed in place: _emit needs no copy
        self._signal: AbortSignal | None = None
        self._idle = asyncio.Event()
        self._idle.set()

    # -- events -------------------------------------------------------------------------------
    def subscribe(self, listener: Listener) -> Callable[[], None]:
        self._listeners = (*self._listeners, listener)

        def unsubscribe() -> None:
            if listener in self._listeners:
                rest = list(self._listeners)
                rest.remove(listener)
                self._listeners = tuple(rest)

        return unsubscribe

    def _emit(self, event: Any) -> None:
        # the listeners as they were when the event came: one that (un)subscribes from a listener takes effect
        # from the next event
        for listener in self._listeners:
            listener(event)

    # -- queues -------------------------------------------------------------------------------
    def steer(self, message: Any) -> None:
        self.steering_queue.append(message)

    def follow_up(self, message: Any) -> None:
        self.follow_up_queue.append(message)

    def clear_queues(self) -> tuple[list[Any], list[Any]]:
        steering, follow = self.steering_queue, self.follow_up_queue
        self.steering_queue, self.follow_up_queue = [], []
        return steering, follow

    def _take(self, queue: list[Any], mode: str) -> list[Any]:
        if not queue:
            return []
        if mode == "all":
            taken = list(queue)
            queue.clear()
            return taken
        return [queue.pop(0)]

    def _take_steering(self) -> list[Any]:
        return self._take(self.steering_queue, self.steering_mode)

    def _take_follow_up(self) -> list[Any]:
        return self._take(self.follow_up_queue, self.follow_up_mode)

    # -- running ------------------------------------------------------------------------------
    def _config(self) -> LoopConfig:
        return LoopConfig(
            get_model=lambda: self.model,
            get_system_prompt=self._system_prompt,
            get_tools=lambda: self.tools,
            get_stream_options=self._options,
            convert_to_llm=self.convert_to_llm,
            get_steering=self._take_steering,
            get_follow_up=self._take_follow_up,
            has_steering=lambda: bool(self.steering_queue),
            get_interrupt_mode=lambda: self.interrupt_mode,
            transform_context=self.transform_context,
            stream_fn=self.stream_fn,
            before_tool_call=self.before_tool_call,
            after_tool_call=self.after_tool_call,
        )

    def _system_prompt(self) -> str:
        """``system_prompt`` may be text or a function that builds it (called at each request)."""
        prompt = self.system_prompt
        return prompt() if callable(prompt) else prompt

    def _options(self) -> StreamOptions:
        opts = self.stream_options(self.model) if self.stream_options else StreamOptions()
        if opts.reasoning is None and self.thinking_level != "off":
            opts.reasoning = self.thinking_level
        return opts

    async def prompt(self, messages: list[Any]) -> list[Any]:
        """Run the loop with these new messages; returns the messages the run produced."""
        return await self._run(list(messages))

    async def continue_(self) -> list[Any]:
        """Run the loop again from the current context (after an error was removed, for a retry)."""
        return await self._run([])

    async def _run(self, prompts: list[Any]) -> list[Any]:
        if self.is_streaming:
            raise AgentBusyError("Agent is already processing.")
        self.is_streaming = True
        self._idle.clear()
        self._signal = AbortSignal()
        try:
            state = RunState(messages=self.messages)
            return await run_loop(prompts, state, self._config(), self._signal, self._emit)
        finally:
            self.is_streaming = False
            self._signal = None
            self._idle.set()

    def abort(self) -> None:
        if self._signal is not None:
            self._signal.abort()

    @property
    def signal(self) -> AbortSignal | None:
        """The current run's abort signal (None when idle)."""
        return self._signal

    @property
    def aborted(self) -> bool:
        return self._signal is not None and self._signal.aborted

    async def wait_for_idle(self) -> None:
        await self._idle.wait()

    def replace_messages(self, messages: list[Any]) -> None:
        self.messages[:] = messages
