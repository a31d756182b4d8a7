"""``anthropic-messages``: the Anthropic Messages API, streamed.

The request is built as pi 0.73.1 builds it (system prompt and last user block marked
``cache_control: ephemeral``, tools with ``eager_input_streaming`` and a cache breakpoint on the last
one, tool results grouped into one user message). ``direct`` sends it as the official SDK would (auth,
headers, retries, HTTP errors) without importing the SDK; ``PISCES_PROVIDER_TRANSPORT=sdk`` (or an
``ANTHROPIC_CUSTOM_HEADERS`` setting) sends it through the SDK instead. The SSE body is read raw from
the response, which avoids building a pydantic object for every delta.

Events follow pi: ``*_end`` at each ``content_block_stop``; usage from ``message_start`` at once,
updated by ``message_delta``. The SDK is imported only when a request goes through it.

The helpers ``transform_messages``, ``sanitize``, ``resolve_api_key``, ``missing_key_message`` and
``cached_client`` are provider-neutral; ``google.py`` uses them too.
"""

from __future__ import annotations

import os
from typing import Any, AsyncIterator, Awaitable, Callable

import msgspec

from pisces.ai.gc_pause import gc_paused
from pisces.ai.providers import direct, import_sdk
from pisces.ai.providers._limits import http_client_options, line_batches
from pisces.ai.providers._shared import (
    append_text,
    append_thinking,
    cached_client,
    describe_transport_error,
    finish_usage,
    format_http_error,
    missing_key_message,
    new_output,
    normalize_tool_call_id,
    parse_partial_json,
    payload_hook,
    resolve_api_key,
    sanitize,
    transform_messages,
    with_retry_after,
)
from pisces.ai.types import (
    AssistantMessage,
    Context,
    DoneEvent,
    ErrorEvent,
    ImageContent,
    Message,
    Model,
    StartEvent,
    StreamOptions,
    TextContent,
    TextDeltaEvent,
    TextEndEvent,
    TextStartEvent,
    ThinkingContent,
    ThinkingDeltaEvent,
    ThinkingEndEvent,
    ThinkingStartEvent,
    ToolCall,
    ToolCallDeltaEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
    ToolResultMessage,
    UserMessage,
)

# Thinking budgets per level (pi's defaults; xhigh gets its own, larger budget).
DEFAULT_THINKING_BUDGETS: dict[str, int] = {"minimal": 1024, "low": 2048, "medium": 8192, "high": 16384,
                                            "xhigh": 32768}
MIN_OUTPUT_TOKENS = 1024  # room kept for the answer when the budget would eat all of max_tokens
INTERLEAVED_THINKING_BETA = "interleaved-thinking-2025-05-14"

_STOP_REASONS = {"end_turn": "stop", "max_tokens": "length", "tool_use": "toolUse", "refusal": "error",
                 "pause_turn": "stop", "stop_sequence": "stop", "sensitive": "error",
                 "model_context_window_exceeded": "length"}


def _cache_control(model: Model) -> dict[str, str] | None:
    retention = os.environ.get("PISCES_CACHE_RETENTION") or os.environ.get("PI_CACHE_RETENTION") or "short"
    if retention == "none":
        return None
    if retention == "long" and "api.anthropic.com" in model.baseUrl:
        return {"type": "ephemeral", "ttl": "1h"}
    return {"type": "ephemeral"}


def _adaptive(model: Model) -> bool:
    mid = model.id
    return any(s in mid for s in ("opus-4-6", "opus-4.6", "sonnet-4-6", "sonnet-4.6"))


def _thinking_level(model: Model, options: StreamOptions) -> str | None:
    level = options.reasoning
    if not model.reasoning or not level or level == "off":
        return None
    return level


def _tool_result_content(content: list[Any]) -> str | list[dict[str, Any]]:
    if not any(isinstance(c, ImageContent) for c in content):
        return sanitize("\n".join(c.text for c in content if isinstance(c, TextContent)))
    blocks: list[dict[str, Any]] = []
    for c in content:
        if isinstance(c, TextContent):
            blocks.append({"type": "text", "text": sanitize(c.text)})
        elif isinstance(c, ImageContent):
            blocks.append({"type": "image", "source": {"type": "base64", "media_type": c.mimeType, "data": c.data}})
    if not any(b["type"] == "text" for b in blocks):
        blocks.insert(0, {"type": "text", "text": "(see attached image)"})
    return blocks


def convert_messages(messages: list[Message], model: Model, cache_control: dict | None) -> list[dict[str, Any]]:
    params: list[dict[str, Any]] = []
    msgs = transform_messages(messages, model, normalize_tool_call_id)
    images_ok = "image" in model.input
    i = 0
    while i < len(msgs):
        msg = msgs[i]
        i += 1
        if isinstance(msg, UserMessage):
            if isinstance(msg.content, str):
                if msg.content.strip():
                    params.append({"role": "user", "content": sanitize(msg.content)})
                continue
            blocks: list[dict[str, Any]] = []
            for c in msg.content:
                if isinstance(c, TextContent):
                    if c.text.strip():
                        blocks.append({"type": "text", "text": sanitize(c.text)})
                elif isinstance(c, ImageContent) and images_ok:
                    blocks.append({"type": "image",
                                   "source": {"type": "base64", "media_type": c.mimeType, "data": c.data}})
            if blocks:
                params.append({"role": "user", "content": blocks})
        elif isinstance(msg, AssistantMessage):
            blocks = []
            for b in msg.content:
                if isinstance(b, TextContent):
                    if b.text.strip():
                        blocks.append({"type": "text", "text": sanitize(b.text)})
                elif isinstance(b, ThinkingContent):
                    if b.redacted is True:
                        blocks.append({"type": "redacted_thinking", "data": b.thinkingSignature or ""})
                    elif not b.thinking.strip():
                        continue
                    elif not isinstance(b.thinkingSignature, str) or not b.thinkingSignature.strip():
                        blocks.append({"type": "text", "text": sanitize(b.thinking)})
                    else:
                        blocks.append({"type": "thinking", "thinking": sanitize(b.thinking),
                                       "signature": b.thinkingSignature})
                elif isinstance(b, ToolCall):
                    blocks.append({"type": "tool_use", "id": b.id, "name": b.name, "input": b.arguments or {}})
            if blocks:
                params.append({"role": "assistant", "content": blocks})
        elif isinstance(msg, ToolResultMessage):
            results = [msg]
            while i < len(msgs) and isinstance(following := msgs[i], ToolResultMessage):
                results.append(following)
                i += 1
            params.append({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": r.toolCallId, "content": _tool_result_content(r.content),
                 "is_error": bool(r.isError)} for r in results]})
    if cache_control and params and params[-1]["role"] == "user":
        last = params[-1]
        if isinstance(last["content"], str):
            last["content"] = [{"type": "text", "text": last["content"], "cache_control": cache_control}]
        elif last["content"] and last["content"][-1].get("type") in ("text", "image", "tool_result"):
            last["content"][-1]["cache_control"] = cache_control
    return params


def build_params(model: Model, context: Context, options: StreamOptions) -> dict[str, Any]:
    """The request body, as pi sends it (without ``stream``'s transport details)."""
    cache_control = _cache_control(model)
    base_max = options.maxTokens or min(model.maxTokens, 32000)
    level = _thinking_level(model, options)
    params: dict[str, Any] = {"model": model.id, "messages": convert_messages(context.messages, model, cache_control),
                              "max_tokens": base_max, "stream": True}
    if isinstance(context.systemPrompt, str) and context.systemPrompt:
        system: dict[str, Any] = {"type": "text", "text": sanitize(context.systemPrompt)}
        if cache_control:
            system["cache_control"] = cache_control
        params["system"] = [system]
    if options.temperature is not None and level is None:
        params["temperature"] = options.temperature
    if isinstance(context.tools, list) and context.tools:
        tools = []
        for t in context.tools:
            schema = t.parameters or {}
            tools.append({"name": t.name, "description": t.description, "eager_input_streaming": True,
                          "input_schema": {"type": "object", "properties": schema.get("properties") or {},
                                           "required": schema.get("required") or []}})
        if cache_control:
            tools[-1]["cache_control"] = cache_control
        params["tools"] = tools
    if level is not None:
        if _adaptive(model):
            params["thinking"] = {"type": "adaptive"}
            effort = {"minimal": "low", "low": "low", "medium": "medium", "high": "high"}.get(level)
            if effort is None:  # xhigh
                effort = "max" if ("opus-4-6" in model.id or "opus-4.6" in model.id) else "high"
            params["output_config"] = {"effort": effort}
        else:
            budgets = {**DEFAULT_THINKING_BUDGETS, **(options.thinkingBudgets or {})}
            budget = int(budgets.get(level, budgets["high"]))
            max_tokens = min(base_max + budget, model.maxTokens)
            if max_tokens <= budget:
                budget = max(0, max_tokens - MIN_OUTPUT_TOKENS)
            params["max_tokens"] = max_tokens
            params["thinking"] = {"type": "enabled", "budget_tokens": budget}
    return params


def _headers(model: Model, options: StreamOptions) -> dict[str, str]:
    headers: dict[str, str] = {}
    if not _adaptive(model):
        headers["anthropic-beta"] = INTERLEAVED_THINKING_BETA
    if isinstance(model.headers, dict):
        headers.update(model.headers)
    headers.update(options.headers or {})
    return headers


def prepare() -> None:
    """Build (and drop) a client once, so that the first request finds the SDK's transport loaded."""
    with gc_paused():
        import_sdk("anthropic").AsyncAnthropic(api_key="unused", base_url="http://127.0.0.1")


def _client(sdk: Any, model: Model, api_key: str, options: StreamOptions) -> Any:
    headers = _headers(model, options)
    timeout = options.timeoutMs / 1000 if options.timeoutMs else None
    key = ("anthropic", api_key, model.baseUrl, tuple(sorted(headers.items())), options.maxRetries, timeout)

    def make() -> Any:
        kwargs: dict[str, Any] = {"api_key": api_key, "default_headers": headers, "max_retries": options.maxRetries}
        if model.baseUrl:
            kwargs["base_url"] = model.baseUrl
        if timeout is not None:
            kwargs["timeout"] = timeout
        return sdk.AsyncAnthropic(**kwargs, http_client=sdk.DefaultAsyncHttpxClient(**http_client_options()))

    return cached_client(key, make)


def _can_send_direct() -> bool:
    """``direct`` can stand in for the SDK: it is not imported yet, and no ANTHROPIC_CUSTOM_HEADERS (which
    only the SDK parses) is set."""
    return not os.environ.get("ANTHROPIC_CUSTOM_HEADERS") and direct.use_direct("anthropic")


async def _open_direct(model: Model, api_key: str, options: StreamOptions, params: dict[str, Any]) -> Any:
    """The request ``AsyncAnthropic.messages.create(stream=True)`` would send, without the SDK."""
    base = model.baseUrl or os.environ.get("ANTHROPIC_BASE_URL") or "https://api.anthropic.com"
    headers = direct.anthropic_headers(api_key, _headers(model, options))
    timeout = options.timeoutMs / 1000 if options.timeoutMs else None
    return await direct.post_stream(base.rstrip("/") + "/v1/messages", headers, params,
                                    max_retries=options.maxRetries, timeout=timeout)


# ---------------------------------------------------------------------------------------------
# Response
# ---------------------------------------------------------------------------------------------
async def iter_sse(response: Any) -> AsyncIterator[tuple[str, bytes]]:
    """(event name, data) pairs from an SSE body. Lines split on LF only (U+2028 inside JSON is content), a
    trailing CR dropped, in linear time however long a line grows; a last line without its LF still counts."""
    event = ""
    data: list[bytes] = []
    async for lines in line_batches(response, keep_tail=True):
        for line in lines:
            if line.endswith(b"\r"):
                line = line[:-1]
            if not line:
                if data:
                    yield event, data[0] if len(data) == 1 else b"\n".join(data)
                event, data = "", []
            elif line.startswith(b"data:"):
                value = line[5:]
                data.append(value[1:] if value.startswith(b" ") else value)
            elif line.startswith(b"event:"):
                event = line[6:].strip().decode("utf-8", "replace")
    if data:
        yield event, b"\n".join(data)


class _StreamFailed(Exception):
    """The stream reported an error (an SSE ``error`` event, a refusal, ...)."""


class _Parser:
    """Turns Anthropic stream events into pi's assistant message events, mutating ``out``."""

    def __init__(self, model: Model, out: AssistantMessage) -> None:
        self.model = model
        self.out = out
        self.blocks: dict[int, int] = {}  # Anthropic block index -> position in out.content
        self.json_parts: dict[int, list[str]] = {}  # position -> streamed tool-call argument pieces
        self.finished = False
        self.stop_seen = False
        self.raw_stop: str | None = None

    def feed(self, ev: dict[str, Any]) -> list[Any]:
        kind = ev.get("type")
        out = self.out
        if kind == "content_block_delta":
            pos = self.blocks.get(ev.get("index", -1))
            if pos is None:
                return []
            block = out.content[pos]
            delta = ev.get("delta") or {}
            dtype = delta.get("type")
            if dtype == "text_delta" and isinstance(block, TextContent):
                text = delta.get("text", "")
                append_text(block, text)
                return [TextDeltaEvent(contentIndex=pos, delta=text, partial=out)]
            if dtype == "thinking_delta" and isinstance(block, ThinkingContent):
                text = delta.get("thinking", "")
                append_thinking(block, text)
                return [ThinkingDeltaEvent(contentIndex=pos, delta=text, partial=out)]
            if dtype == "input_json_delta" and isinstance(block, ToolCall):
                piece = delta.get("partial_json", "")
                self.json_parts[pos].append(piece)
                return [ToolCallDeltaEvent(contentIndex=pos, delta=piece, partial=out)]
            if dtype == "signature_delta" and isinstance(block, ThinkingContent):
                sig = block.thinkingSignature or ""
                block.thinkingSignature = ""  # as append_text: grown in place, not copied per delta
                sig += delta.get("signature", "")
                block.thinkingSignature = sig
            return []
        if kind == "content_block_start":
            cb = ev.get("content_block") or {}
            ctype = cb.get("type")
            pos = len(out.content)
            if ctype == "text":
                out.content.append(TextContent(text=""))
                start: Any = TextStartEvent(contentIndex=pos, partial=out)
            elif ctype == "thinking":
                out.content.append(ThinkingContent(thinking="", thinkingSignature=""))
                start = ThinkingStartEvent(contentIndex=pos, partial=out)
            elif ctype == "redacted_thinking":
                out.content.append(ThinkingContent(thinking="[Reasoning redacted]",
                                                   thinkingSignature=cb.get("data", ""), redacted=True))
                start = ThinkingStartEvent(contentIndex=pos, partial=out)
            elif ctype == "tool_use":
                args = cb.get("input")
                out.content.append(ToolCall(id=cb.get("id", ""), name=cb.get("name", ""),
                                            arguments=args if isinstance(args, dict) else {}))
                self.json_parts[pos] = []
                start = ToolCallStartEvent(contentIndex=pos, partial=out)
            else:
                return []  # server tool blocks etc.: not part of pi's message
            self.blocks[ev.get("index", pos)] = pos
            return [start]
        if kind == "content_block_stop":
            pos = self.blocks.pop(ev.get("index", -1), None)
            if pos is None:
                return []
            block = out.content[pos]
            if isinstance(block, TextContent):
                return [TextEndEvent(contentIndex=pos, content=block.text, partial=out)]
            if isinstance(block, ThinkingContent):
                return [ThinkingEndEvent(contentIndex=pos, content=block.thinking, partial=out)]
            if isinstance(block, ToolCall):
                raw = "".join(self.json_parts.pop(pos, []))
                if raw:
                    block.arguments = parse_partial_json(raw)
                return [ToolCallEndEvent(contentIndex=pos, toolCall=block, partial=out)]
            return []
        if kind == "message_start":
            msg = ev.get("message") or {}
            if msg.get("id"):
                out.responseId = msg["id"]
            if msg.get("model") and msg["model"] != self.model.id:
                out.responseModel = msg["model"]
            u = msg.get("usage") or {}
            usage = out.usage
            usage.input = u.get("input_tokens") or 0
            usage.output = u.get("output_tokens") or 0
            usage.cacheRead = u.get("cache_read_input_tokens") or 0
            usage.cacheWrite = u.get("cache_creation_input_tokens") or 0
            finish_usage(self.model, usage)
            return []
        if kind == "message_delta":
            reason = (ev.get("delta") or {}).get("stop_reason")
            if reason:
                self.raw_stop = reason
                self.stop_seen = True
                out.stopReason = _STOP_REASONS.get(reason, "error")
            u = ev.get("usage") or {}
            usage = out.usage
            if u.get("input_tokens") is not None:
                usage.input = u["input_tokens"]
            if u.get("output_tokens") is not None:
                usage.output = u["output_tokens"]
            if u.get("cache_read_input_tokens") is not None:
                usage.cacheRead = u["cache_read_input_tokens"]
            if u.get("cache_creation_input_tokens") is not None:
                usage.cacheWrite = u["cache_creation_input_tokens"]
            finish_usage(self.model, usage)
            return []
        if kind == "message_stop":
            self.finished = True
            return []
        if kind == "error":
            err = ev.get("error") or {}
            etype, emsg = err.get("type"), err.get("message")
            if etype and emsg:
                raise _StreamFailed(f"{etype}: {emsg}")
            raise _StreamFailed(str(emsg or etype or "Anthropic stream error"))
        return []  # ping and unknown events


def _describe_error(sdk: Any, exc: BaseException, model: Model) -> str:
    if isinstance(exc, _StreamFailed):
        return str(exc)
    if isinstance(exc, direct.StatusError):
        return _status_text(exc)
    if isinstance(exc, direct.TimeoutFailure):
        return f"Request timed out waiting for {model.baseUrl or 'the Anthropic API'}"
    if isinstance(exc, direct.ConnectionFailure):
        return _connection_text(exc, model)
    if sdk is None and isinstance(exc, ImportError):
        return f"The anthropic package is not installed ({exc}); install it with: pip install anthropic"
    if sdk is not None and isinstance(exc, sdk.APIStatusError):
        return _status_text(exc)
    if sdk is not None and isinstance(exc, sdk.APITimeoutError):
        return f"Request timed out waiting for {model.baseUrl or 'the Anthropic API'}"
    if sdk is not None and isinstance(exc, sdk.APIConnectionError):
        return _connection_text(exc, model)
    transport = describe_transport_error(exc)
    if transport:
        return transport
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _status_text(exc: Any) -> str:
    """An HTTP error (the SDK's APIStatusError or direct's StatusError: ``status_code``, ``body``, ``message``)."""
    body = exc.body
    message: Any = None
    if isinstance(body, dict):
        err = body.get("error")
        message = err.get("message") if isinstance(err, dict) else body.get("message")
        if message is None and isinstance(err, str):
            message = err
    elif isinstance(body, str):
        message = body.strip()[:2000]
    if message is None:
        message = exc.message if body is not None else None
    text = format_http_error(exc.status_code, message if isinstance(message, str) else str(message or ""))
    return with_retry_after(text, exc)


def _connection_text(exc: BaseException, model: Model) -> str:
    cause = exc.__cause__
    detail = (str(cause).strip() or type(cause).__name__) if cause is not None else ""
    where = model.baseUrl or "the Anthropic API"
    return f"Connection error: could not reach {where}" + (f" ({detail})" if detail else "")


async def stream(model: Model, context: Context, options: StreamOptions, *,
                 make_client: Callable[[Any], Awaitable[Any]] | None = None) -> AsyncIterator[Any]:
    """The Messages stream; ``make_client(sdk)`` builds another client (Claude on Vertex: AnthropicVertex),
    which brings its own credentials (no API key is looked for then)."""
    out = new_output(model)
    # ``start`` waits for the SSE message_start, so the message_start event already carries the input
    # usage, as pi's does.
    started = False
    api_key = resolve_api_key(model, options) if make_client is None else "(the client's own credentials)"
    if not api_key:
        yield StartEvent(partial=out)
        out.stopReason = "error"
        out.errorMessage = missing_key_message(model.provider)
        yield ErrorEvent(reason="error", error=out)
        return
    sdk: Any = None
    response: Any = None
    error: str | None = None
    try:
        if make_client is None and _can_send_direct():
            params = await payload_hook(options, build_params(model, context, options))
            response = await _open_direct(model, api_key, options, params)
        else:
            sdk = import_sdk("anthropic")
            params = await payload_hook(options, build_params(model, context, options))
            client = _client(sdk, model, api_key, options) if make_client is None else await make_client(sdk)
            # Only the core arguments go through the SDK's signature (which changes between SDK versions:
            # 2.x dropped ``temperature``); the rest is sent as-is in the body.
            core = {k: params.pop(k) for k in ("model", "messages", "max_tokens", "stream")}
            response = (await client.messages.create(**core, extra_body=params or None)).response
        parser = _Parser(model, out)
        decode = msgspec.json.decode
        async for _name, data in iter_sse(response):
            try:
                ev = decode(data)
            except msgspec.DecodeError:
                continue
            if not isinstance(ev, dict):
                continue
            items = parser.feed(ev)
            if not started:
                started = True
                yield StartEvent(partial=out)
            for item in items:
                yield item
            if parser.finished:
                break
        if not parser.finished and not parser.stop_seen:
            raise _StreamFailed("Connection lost: the Anthropic stream ended before the message was complete")
        if out.stopReason == "error":
            reason = parser.raw_stop
            if reason == "refusal":
                raise _StreamFailed("The model refused to answer (stop_reason: refusal)")
            raise _StreamFailed(f"The response stopped with stop_reason '{reason}'")
    except Exception as exc:  # noqa: BLE001 - every failure ends the stream with an error event
        error = _describe_error(sdk, exc, model)
    finally:
        if response is not None:
            try:
                await response.aclose()
            except Exception:  # noqa: BLE001 - closing a broken connection may fail; nothing to do
                pass
    if not started:
        yield StartEvent(partial=out)
    if error is not None:
        out.stopReason = "error"
        out.errorMessage = error
        yield ErrorEvent(reason="error", error=out)
        return
    yield DoneEvent(reason=out.stopReason, message=out)
