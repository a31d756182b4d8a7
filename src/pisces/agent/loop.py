"""The turn loop: stream the assistant message, run its tool calls, feed results back, until done.

The loop knows nothing of files or sessions. It reads the agent's queues through callbacks, emits every
event synchronously to ``emit`` (subscribers must encode or copy at once: partial messages keep changing),
and never raises for model or tool failures: they become messages.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

import msgspec
from msgspec import UNSET

from pisces.agent.types import (
    AgentEndEvent,
    AgentStartEvent,
    AgentTool,
    AgentToolResult,
    GateDecision,
    MessageEndEvent,
    MessageStartEvent,
    MessageUpdateEvent,
    ResultPatch,
    ToolCallInfo,
    ToolError,
    ToolExecutionEndEvent,
    ToolExecutionStartEvent,
    ToolExecutionUpdateEvent,
    TurnEndEvent,
    TurnStartEvent,
)
from pisces.agent.validation import validate_tool_arguments
from pisces.agent.watchdog import Abandoned, until_aborted
from pisces.ai.abort import AbortSignal
from pisces.ai.stream import stream as default_stream
from pisces.ai.types import (
    AssistantMessage,
    Context,
    DoneEvent,
    ErrorEvent,
    Model,
    StartEvent,
    StreamOptions,
    TextContent,
    Tool,
    ToolCall,
    ToolResultMessage,
    now_ms,
)

# pi's result text for a tool call skipped because the user steered
SKIPPED_FOR_STEERING = "Skipped due to queued user message."

Emit = Callable[[Any], None]


@dataclass
class LoopConfig:
    """What one run needs. Callables are read at each turn, so changes (model, tools) apply mid-run."""

    get_model: Callable[[], Model]
    get_system_prompt: Callable[[], str]
    get_tools: Callable[[], list[AgentTool]]
    get_stream_options: Callable[[], StreamOptions]
    convert_to_llm: Callable[[list[Any]], list[Any]]
    get_steering: Callable[[], list[Any]] = lambda: []
    get_follow_up: Callable[[], list[Any]] = lambda: []
    has_steering: Callable[[], bool] = lambda: False
    get_interrupt_mode: Callable[[], str] = lambda: "immediate"
    transform_context: Callable[[list[Any], AbortSignal], Awaitable[list[Any]]] | None = None
    stream_fn: Callable[..., Any] = default_stream
    # The tool-call gate: ``before_tool_call(info)`` may block a call or replace its arguments (GateDecision);
    # ``after_tool_call(info, result, is_error)`` may patch the result (ResultPatch). A gate that raises blocks
    # the call; an after-hook that raises turns the result into that error.
    before_tool_call: Callable[[ToolCallInfo], Awaitable[GateDecision | None]] | None = None
    after_tool_call: Callable[[ToolCallInfo, AgentToolResult, bool], Awaitable[ResultPatch | None]] | None = None


@dataclass
class RunState:
    messages: list[Any]  # the agent's context; the loop appends to it
    new_messages: list[Any] = field(default_factory=list)


async def run_loop(prompts: list[Any], state: RunState, config: LoopConfig, signal: AbortSignal,
                   emit: Emit) -> list[Any]:
    """Run until the model stops with nothing queued. ``prompts`` may be empty (continue after a retry)."""
    emit(AgentStartEvent())
    emit(TurnStartEvent())
    for p in prompts:
        _add_message(p, state, emit)
    first_turn = True
    pending = config.get_steering()
    while True:
        more_tool_calls = True
        while more_tool_calls or pending:
            if not first_turn:
                emit(TurnStartEvent())
            first_turn = False
            for m in pending:
                _add_message(m, state, emit)
            pending = []
            message = await _stream_assistant(state, config, signal, emit)
            state.new_messages.append(message)
            if message.stopReason in ("error", "aborted"):
                emit(TurnEndEvent(message=message, toolResults=[]))
                emit(AgentEndEvent(messages=state.new_messages))
                return state.new_messages
            calls = [b for b in message.content if isinstance(b, ToolCall)]
            more_tool_calls = bool(calls)
            results: list[ToolResultMessage] = []
            if calls:
                results = await _execute_tool_calls(calls, config, signal, emit, message)
                for r in results:
                    _add_message(r, state, emit)
            emit(TurnEndEvent(message=message, toolResults=results))
            pending = config.get_steering()
        follow = config.get_follow_up()
        if follow:
            pending = follow
            continue
        break
    emit(AgentEndEvent(messages=state.new_messages))
    return state.new_messages


def _start_snapshot(m: AssistantMessage) -> AssistantMessage:
    """The message as it is now, apart from the parts the provider goes on changing (content, usage)."""
    usage = msgspec.structs.replace(m.usage, cost=msgspec.structs.replace(m.usage.cost))
    return msgspec.structs.replace(m, content=list(m.content), usage=usage)


def _add_message(m: Any, state: RunState, emit: Emit) -> None:
    emit(MessageStartEvent(message=m))
    emit(MessageEndEvent(message=m))
    state.messages.append(m)
    state.new_messages.append(m)


async def _stream_assistant(state: RunState, config: LoopConfig, signal: AbortSignal, emit: Emit
                            ) -> AssistantMessage:
    messages = state.messages
    if config.transform_context is not None:
        messages = await config.transform_context(messages, signal)
    tools = config.get_tools()
    context = Context(
        systemPrompt=config.get_system_prompt(),
        messages=config.convert_to_llm(messages),
        tools=[Tool(name=t.name, description=t.description, parameters=t.parameters) for t in tools]
        if tools else UNSET,
    )
    options = config.get_stream_options()
    options.signal = signal
    model = config.get_model()
    started = False
    partial: AssistantMessage | None = None
    final: AssistantMessage | None = None
    # message_start waits for the next event: when that ends the message (an HTTP error before any byte),
    # message_start carries the error as pi's does; otherwise it shows the message as it was at ``start``.
    held_start: AssistantMessage | None = None
    update = MessageUpdateEvent
    async for ev in config.stream_fn(model, context, options):
        cls = type(ev)  # the class, not the tag: this runs for every streamed event
        if cls is StartEvent:
            partial = ev.partial
            held_start = _start_snapshot(partial)
        elif cls is DoneEvent:
            final = ev.message
            break
        elif cls is ErrorEvent:
            final = ev.error
            break
        else:
            if held_start is not None:
                emit(MessageStartEvent(message=held_start))
                held_start = None
                started = True
            elif partial is None:  # a provider that skipped ``start``
                partial = ev.partial
                started = True
                emit(MessageStartEvent(message=partial))
            # pi's shape: the snapshot both in ``message`` and in the event's ``partial`` (the stream encoder
            # writes it once per profile; the lean and deltas profiles leave it out)
            emit(update(assistantMessageEvent=ev, message=partial))
    assert final is not None, "stream ended without a final event"
    if not started:
        emit(MessageStartEvent(message=final))
    # The message joins the context when it is complete (as pi: a streaming reply is not in get_messages).
    state.messages.append(final)
    emit(MessageEndEvent(message=final))
    return final


# ---------------------------------------------------------------------------------------------
# Tool execution
# ---------------------------------------------------------------------------------------------
async def _prepare_call(call: ToolCall, tool: AgentTool | None, config: LoopConfig, signal: AbortSignal,
                        message: AssistantMessage | None) -> tuple[tuple[AgentTool, dict] | None, Any]:
    """(tool, arguments) ready to run, or (None, the error result) for a call that ends before running."""
    if tool is None:
        return None, _error_result(f"Tool {call.name} not found")
    try:
        raw_args = call.arguments
        prepare = getattr(tool, "prepare_arguments", None)  # a tool may repair legacy argument shapes
        if prepare is not None:
            raw_args = prepare(raw_args)
        args, err = validate_tool_arguments(call.name, tool.parameters, raw_args)
        if err is not None:
            return None, _error_result(err)
        if config.before_tool_call is not None:
            decision = await until_aborted(
                config.before_tool_call(ToolCallInfo(call.id, call.name, args, tool, message, signal)), signal)
            if decision is not None and decision.block:
                return None, _error_result(decision.reason or "Tool execution was blocked")
            if decision is not None and isinstance(decision.args, dict):
                args = decision.args
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # noqa: BLE001 - a failing gate blocks the call (fail closed)
        return None, _error_result(str(exc) or type(exc).__name__)
    return (tool, args), None


async def _after_call(gate: Callable[[ToolCallInfo, AgentToolResult, bool], Awaitable[ResultPatch | None]],
                      info: ToolCallInfo, outcome: tuple[AgentToolResult, bool]) -> tuple[AgentToolResult, bool]:
    result, is_error = outcome
    try:
        patch = await until_aborted(gate(info, result, is_error), info.signal)
    except asyncio.CancelledError:
        raise
    except Abandoned:  # aborted and not answering: the tool's own result stands
        return outcome
    except Exception as exc:  # noqa: BLE001 - as pi: the failure becomes the result
        return _error_result(str(exc) or type(exc).__name__), True
    return outcome if patch is None else patch.apply(result, is_error)


def _error_result(text: str, details: Any = None) -> AgentToolResult:
    return AgentToolResult(content=[TextContent(text=text)], details={} if details in (None, UNSET) else details)


async def _execute_tool_calls(calls: list[ToolCall], config: LoopConfig, signal: AbortSignal, emit: Emit,
                              message: AssistantMessage | None = None) -> list[ToolResultMessage]:
    """Run one turn's tool calls. Each call is first prepared in call order, as pi does: its
    ``tool_execution_start``, argument repair and validation, then the ``before_tool_call`` gate; a call that
    fails there ends at once. The prepared calls then run concurrently: ``tool_execution_end`` comes in
    completion order (after ``after_tool_call`` patched the result); the returned toolResult messages keep call
    order. In ``immediate`` interrupt mode a queued steering message stops the calls still running, which get
    pi's "skipped" result."""
    tools = {t.name: t for t in config.get_tools()}
    outcomes: list[tuple[AgentToolResult, bool] | None] = [None] * len(calls)
    signals = [AbortSignal() for _ in calls]
    removers = [signal.add_listener(s.abort) for s in signals]
    skipped: set[int] = set()
    prepared: list[tuple[AgentTool, dict] | None] = []

    def finish(i: int) -> None:
        done = outcomes[i]
        assert done is not None  # finish(i) follows outcomes[i] = ...
        result, is_error = done
        emit(ToolExecutionEndEvent(toolCallId=calls[i].id, toolName=calls[i].name, result=result,
                                   isError=is_error))

    async def run_one(i: int, tool: AgentTool, args: dict) -> None:
        call = calls[i]

        def on_update(partial: AgentToolResult) -> None:
            if outcomes[i] is None:
                emit(ToolExecutionUpdateEvent(toolCallId=call.id, toolName=call.name, args=call.arguments,
                                              partialResult=partial))

        try:
            result = await until_aborted(tool.execute(call.id, args, signals[i], on_update), signals[i])
            if not isinstance(result, AgentToolResult):
                raise TypeError(f"tool {call.name} returned {type(result).__name__}, not AgentToolResult")
            outcome = (result, False)
        except asyncio.CancelledError:
            raise
        except ToolError as exc:
            outcome = (_error_result(str(exc), exc.details), True)
        except Exception as exc:  # noqa: BLE001 - any tool failure is a result the model can read
            outcome = (_error_result(str(exc) or type(exc).__name__), True)
        if i in skipped:
            outcome = (_error_result(SKIPPED_FOR_STEERING), True)
        elif config.after_tool_call is not None:
            info = ToolCallInfo(call.id, call.name, args, tool, message, signals[i])
            outcome = await _after_call(config.after_tool_call, info, outcome)
        outcomes[i] = outcome
        finish(i)
        if config.get_interrupt_mode() == "immediate" and config.has_steering():
            for j, s in enumerate(signals):
                if outcomes[j] is None and j not in skipped:
                    skipped.add(j)
                    s.abort("steering")

    try:
        for i, call in enumerate(calls):
            emit(ToolExecutionStartEvent(toolCallId=call.id, toolName=call.name, args=call.arguments))
            ready, failure = await _prepare_call(call, tools.get(call.name), config, signals[i], message)
            prepared.append(ready)
            if failure is not None:
                outcomes[i] = (failure, True)
                finish(i)
        await asyncio.gather(*(run_one(i, *p) for i, p in enumerate(prepared) if p is not None))
    finally:
        for remove in removers:
            remove()

    results = []
    for call, outcome in zip(calls, outcomes, strict=False):
        assert outcome is not None  # every call has finished by now
        result, is_error = outcome
        results.append(ToolResultMessage(toolCallId=call.id, toolName=call.name, content=result.content,
                                         details=result.details, isError=is_error, timestamp=now_ms()))
    return results
