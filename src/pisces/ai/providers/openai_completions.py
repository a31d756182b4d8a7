"""``openai-completions``: the OpenAI Chat Completions wire (also any OpenAI-compatible server: ollama, vLLM,
llama.cpp, OpenRouter, ...), with pi's request shape and event sequence.

``direct`` sends the request as the official ``openai`` SDK would (auth, headers, retries, HTTP errors)
without importing it; ``PISCES_PROVIDER_TRANSPORT=sdk`` sends it through the SDK. The SSE body is read
raw from the response and parsed here: dicts are cheaper than the SDK's models, expose the non-standard fields
(``reasoning_content``...), and a U+2028 inside a JSON string stays content (line splitting is on LF only).

pi quirk kept on this wire: every ``*_end`` event is emitted after the stream has ended, in content order.

The helpers above the ``Chat Completions`` banner are shared with ``openai_responses``.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import weakref
from typing import Any, AsyncIterator, Callable

import msgspec

from pisces.ai.gc_pause import gc_paused
from pisces.ai.providers import direct, import_sdk
from pisces.ai.providers._limits import http_client_options, line_batches
from pisces.ai.providers._memo import JsonBody
from pisces.ai.providers._shared import (
    append_text,
    append_thinking,
    finish_usage,
    format_http_error,
    loads_finite,
    missing_key_message,
    new_output,
    parse_partial_json,
    payload_hook,
    resolve_api_key,
    with_retry_after,
)
from pisces.ai.providers.openai_chat_messages import convert_messages, js_json
from pisces.ai.providers.openai_compat import apply_thinking, extra_headers, get_compat, resolve_base_url
from pisces.ai.types import (
    UNSET,
    AssistantMessage,
    Context,
    DoneEvent,
    ErrorEvent,
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
)

DEFAULT_MAX_TOKENS_CAP = 32000  # pi sends min(model.maxTokens, 32000) unless the caller sets maxTokens


# =============================================================================================
# Shared helpers (also used by openai_responses)
# =============================================================================================
class ProviderError(Exception):
    """An error whose text is already the sentence the user should see."""


def max_output_tokens(model: Model, options: StreamOptions) -> int:
    return options.maxTokens or min(model.maxTokens, DEFAULT_MAX_TOKENS_CAP)


def map_thinking_level(model: Model, level: str | None) -> str | None:
    """The provider's effort string for a pi thinking level; None when reasoning is off."""
    if not model.reasoning or not level or level == "off":
        return None
    tmap = model.thinkingLevelMap if isinstance(model.thinkingLevelMap, dict) else {}
    mapped = tmap.get(level)
    if isinstance(mapped, str):
        return mapped
    return "high" if level == "xhigh" else level


# One SDK client per event loop, base URL and key (the SDK's connection pool belongs to one loop).
_clients: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[str, str], Any]]" = (
    weakref.WeakKeyDictionary())


def get_client(model: Model, api_key: str) -> Any:
    openai = import_sdk("openai")  # lazy: the SDK costs ~0.3 s to import

    loop = asyncio.get_running_loop()
    per_loop = _clients.setdefault(loop, {})
    base_url = resolve_base_url(model)  # Cloudflare's {CLOUDFLARE_ACCOUNT_ID}...; ValueError names what is unset
    key = (base_url, api_key)
    client = per_loop.get(key)
    if client is None:
        client = openai.AsyncOpenAI(api_key=api_key, base_url=base_url or None,
                                    http_client=openai.DefaultAsyncHttpxClient(**http_client_options()))
        per_loop[key] = client
    return client


def prepare() -> None:
    """Build (and drop) a client once, so that the first request finds the SDK's transport loaded."""
    with gc_paused():
        import_sdk("openai").AsyncOpenAI(api_key="unused", base_url="http://127.0.0.1/v1")


async def open_stream(model: Model, options: StreamOptions, path: str, body: dict[str, Any],
                      make_client: Callable[[Model, str], Any] | None = None) -> Any:
    """POST ``body`` through the SDK (auth, retries, status errors) and return the raw streamed response.
    ``make_client(model, key)`` builds another SDK client than ``AsyncOpenAI`` (Azure's)."""
    api_key = resolve_api_key(model, options)
    if not api_key:
        raise ProviderError(missing_key_message(model.provider))
    if make_client is None and direct.use_direct("openai"):
        return await _open_direct(model, options, path, body, api_key)
    try:
        client = (make_client or get_client)(model, api_key)
        import httpx2  # noqa: PLC0415 - the SDK's HTTP client, already imported with it
    except ImportError as exc:
        raise ProviderError(f"The {model.api} API needs the '{exc.name or 'openai'}' package: "
                            "pip install openai") from exc
    except ValueError as exc:
        raise ProviderError(str(exc)) from exc

    headers = _request_headers(model, options, api_key)
    req: dict[str, Any] = {"max_retries": options.maxRetries}
    if headers:
        req["headers"] = headers
    if options.timeoutMs:
        req["timeout"] = options.timeoutMs / 1000
    response = await client.post(path, cast_to=httpx2.Response, body=body, options=req, stream=True)
    return await _expect_stream(response)


def _request_headers(model: Model, options: StreamOptions, api_key: str) -> dict[str, str]:
    headers: dict[str, str] = dict(model.headers) if isinstance(model.headers, dict) else {}
    if model.api == "openai-completions":
        headers.update(extra_headers(model, api_key, options.sessionId, get_compat(model)))
    headers.update(options.headers or {})
    return headers


async def _open_direct(model: Model, options: StreamOptions, path: str, body: dict[str, Any], api_key: str) -> Any:
    """The same request as ``AsyncOpenAI`` would send, without importing the SDK (see ``direct``)."""
    try:
        base = resolve_base_url(model) or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1"
    except ValueError as exc:
        raise ProviderError(str(exc)) from exc
    url = base.rstrip("/") + "/" + path.lstrip("/")
    headers = direct.openai_headers(api_key, _request_headers(model, options, api_key))
    timeout = options.timeoutMs / 1000 if options.timeoutMs else None
    response = await direct.post_stream(url, headers, body, max_retries=options.maxRetries, timeout=timeout)
    return await _expect_stream(response)


async def _expect_stream(response: Any) -> Any:
    if "json" in response.headers.get("content-type", ""):  # a 200 that is not a stream: some proxies' errors
        try:
            data = json.loads(await response.aread() or b"null")
        except ValueError:
            data = None
        finally:
            await response.aclose()
        if isinstance(data, dict) and data.get("error"):
            raise ProviderError(stream_error_message(data["error"]))
        raise ProviderError("The server answered with JSON instead of an event stream; "
                            "check that the base URL points at an OpenAI-compatible API")
    return response


async def iter_sse(response: Any) -> AsyncIterator[tuple[str | None, str]]:
    """``(event, data)`` for each server-sent event. Lines end at LF (CRLF accepted); ends after ``[DONE]``.
    Lines come a chunk's worth at a time (no async step per line), in linear time however long a line grows;
    a last line without its LF is dropped."""
    event: str | None = None
    data: list[str] = []
    async for lines in line_batches(response, keep_tail=False):
        for raw in lines:
            if raw.endswith(b"\r"):
                raw = raw[:-1]
            if raw.startswith(b"data: "):  # the common line; the same as the general case below
                data.append(raw[6:].decode("utf-8", "replace"))
                continue
            if not raw:
                if data:
                    payload = data[0] if len(data) == 1 else "\n".join(data)
                    yield event, payload
                    if payload.startswith("[DONE]"):
                        return
                event, data = None, []
                continue
            line = raw.decode("utf-8", "replace")
            if line.startswith(":"):
                continue
            name, _, value = line.partition(":")
            if value.startswith(" "):
                value = value[1:]
            if name == "data":
                data.append(value)
            elif name == "event":
                event = value
    if data:
        yield event, "\n".join(data)


def decode_json(payload: str) -> Any:
    try:
        return msgspec.json.decode(payload)
    except msgspec.DecodeError:
        return loads_finite(payload)  # what JSON.parse accepts and msgspec does not (lone surrogates)


def stream_error_message(error: Any) -> str:
    """The text for an in-stream ``{"error": {...}}``: the provider's message as sent (as pi shows it: no
    ``type: `` prefix); the type or code only when there is no message."""
    if isinstance(error, dict):
        message = error.get("message")
        message = message if isinstance(message, str) else (js_json(message) if message else "")
        kind = error.get("type") or error.get("code")
        return message or (f"{kind}" if kind else "") or "The provider reported an error during streaming"
    return str(error) if error else "The provider reported an error during streaming"


def _status_message(exc: Any) -> str:
    """``<status> <provider message>`` as the OpenAI JS SDK words it (pi shows that text)."""
    status = getattr(exc, "status_code", None)
    try:
        text = exc.response.text.strip()
    except Exception:  # noqa: BLE001 - the body could not be read
        text = ""
    try:
        body = json.loads(text) if text else None
    except ValueError:
        return format_http_error(status, text)
    msg: Any = body
    if isinstance(body, dict):  # {"error": {"message": ...}} as OpenAI; {"detail": ...} as FastAPI servers
        err = body.get("error")
        msg = (err.get("message") if isinstance(err, dict) else None) or err or body.get("message") \
            or body.get("detail") or body or None
    return format_http_error(status, msg if isinstance(msg, str) or msg is None else js_json(msg))


def describe_error(exc: BaseException, where: str = "") -> str:
    """A sentence for any failure of the request or of the stream; ``where`` is the base URL, named when the
    host could not be reached."""
    if isinstance(exc, ProviderError):
        return str(exc)
    target = where or "the OpenAI API"
    if isinstance(exc, direct.StatusError):
        return with_retry_after(_status_message(exc), exc)
    if isinstance(exc, direct.TimeoutFailure):
        return f"Request timed out waiting for {target}"
    if isinstance(exc, direct.ConnectionFailure):
        return _connection_message(exc, target)
    openai = sys.modules.get("openai")
    if openai is not None:
        if isinstance(exc, openai.APIStatusError):
            return with_retry_after(_status_message(exc), exc)
        if isinstance(exc, openai.APITimeoutError):
            return f"Request timed out waiting for {target}"
        if isinstance(exc, openai.APIConnectionError):
            return _connection_message(exc, target)
        if isinstance(exc, openai.APIError):
            return exc.message or type(exc).__name__
    httpx2 = sys.modules.get("httpx2")
    if httpx2 is not None:
        if isinstance(exc, httpx2.TimeoutException):
            return f"Request timed out: {exc}" if str(exc) else "Request timed out."
        if isinstance(exc, httpx2.TransportError):
            return f"Connection lost: {exc}" if str(exc) else f"Connection lost ({type(exc).__name__})"
    return str(exc).strip() or type(exc).__name__


def _connection_message(exc: BaseException, target: str) -> str:
    cause = exc.__cause__
    detail = (str(cause).strip() or type(cause).__name__) if cause is not None else ""
    return f"Connection error: could not reach {target}" + (f" ({detail})" if detail else "")


async def close_response(response: Any) -> None:
    """Close the HTTP response even while our task is being cancelled (an abort), so the socket is freed."""
    await asyncio.shield(response.aclose())


def fail(out: AssistantMessage, message: str) -> ErrorEvent:
    out.stopReason = "error"
    out.errorMessage = message
    return ErrorEvent(reason="error", error=out)


class ArgsBuffer:
    """Streamed tool-call arguments; re-parsed often while short, then only as the text grows by a quarter,
    so a 50 KB ``write`` call costs a few parses rather than thousands."""

    __slots__ = ("text", "_parsed_len")

    def __init__(self, text: str = "") -> None:
        self.text = text
        self._parsed_len = 0

    def add(self, tc: ToolCall, delta: str) -> None:
        text = self.text
        self.text = ""  # the only owner now: grown in place (see append_text), not copied per delta
        text += delta
        self.text = text
        n = len(text)
        if n < 2048 or n >= self._parsed_len * 1.25:
            tc.arguments = parse_partial_json(self.text)
            self._parsed_len = n

    def finish(self, tc: ToolCall) -> None:
        tc.arguments = parse_partial_json(self.text)


# =============================================================================================
# Chat Completions (the messages: openai_chat_messages)
# =============================================================================================
def build_body(model: Model, context: Context, options: StreamOptions) -> dict[str, Any]:
    """The request body. Without a payload hook, which could change it in place, its messages are the ones
    kept between requests and the body (a ``JsonBody``) has their JSON text at hand for the transport."""
    compat = get_compat(model)
    fresh = options.onPayload is not None
    texts: list[bytes] | None = None if fresh else []
    body: dict[str, Any] = JsonBody() if texts is not None else {}
    body["model"] = model.id
    body["messages"] = convert_messages(model, context, compat, texts, fresh=fresh)
    body["stream"] = True
    if isinstance(body, JsonBody) and texts is not None:
        body.keep_texts("messages", texts)
    if compat["supportsUsageInStreaming"] is not False:
        body["stream_options"] = {"include_usage": True}
    if compat["supportsStore"]:
        body["store"] = False
    body[compat["maxTokensField"] or "max_completion_tokens"] = max_output_tokens(model, options)
    if options.temperature is not None:
        body["temperature"] = options.temperature
    if isinstance(context.tools, list) and context.tools:
        strict = {"strict": False} if compat["supportsStrictMode"] is not False else {}
        body["tools"] = [{"type": "function", "function": {"name": t.name, "description": t.description,
                                                           "parameters": t.parameters, **strict}}
                         for t in context.tools]
        if compat.get("zaiToolStream"):
            body["tool_stream"] = True
    apply_thinking(body, model, map_thinking_level(model, options.reasoning), compat)
    return body


_STOP_REASONS = {"stop": "stop", "end": "stop", "length": "length", "tool_calls": "toolUse",
                 "function_call": "toolUse", "content_filter": "error"}
_REASONING_FIELDS = ("reasoning_content", "reasoning", "reasoning_text")


def _apply_usage(model: Model, out: AssistantMessage, raw: dict[str, Any]) -> None:
    details = raw.get("prompt_tokens_details") or {}
    cache_write = details.get("cache_write_tokens") or 0
    cache_read = max(0, (details.get("cached_tokens") or 0) - cache_write)
    u = out.usage
    u.cacheRead = cache_read
    u.cacheWrite = cache_write
    u.input = (raw.get("prompt_tokens") or 0) - cache_read - cache_write
    u.output = raw.get("completion_tokens") or 0
    finish_usage(model, u)


async def stream(model: Model, context: Context, options: StreamOptions) -> AsyncIterator[Any]:
    out = new_output(model)
    try:
        body = await payload_hook(options, build_body(model, context, options))
        response = await open_stream(model, options, "/chat/completions", body)
    except Exception as exc:  # noqa: BLE001 - every failure becomes the error event
        yield StartEvent(partial=out)
        yield fail(out, describe_error(exc, model.baseUrl))
        return
    yield StartEvent(partial=out)
    blocks = out.content
    calls: dict[int, tuple[int, ArgsBuffer, ToolCall]] = {}  # stream index -> (content index, arguments, block)
    finish: str | None = None
    try:
        async for _event, payload in iter_sse(response):
            if payload.startswith("[DONE]"):
                finish = finish or "stop"
                break
            chunk = decode_json(payload)
            if not isinstance(chunk, dict):
                continue
            if chunk.get("error"):
                yield fail(out, stream_error_message(chunk["error"]))
                return
            if out.responseId is UNSET and chunk.get("id"):
                out.responseId = chunk["id"]
                if chunk.get("model") and chunk["model"] != model.id:
                    out.responseModel = chunk["model"]
            if chunk.get("usage"):
                _apply_usage(model, out, chunk["usage"])
            choices = chunk.get("choices")
            if not choices:
                continue
            choice = choices[0]
            if not chunk.get("usage") and isinstance(choice.get("usage"), dict):
                _apply_usage(model, out, choice["usage"])  # Moonshot puts usage on the choice
            if choice.get("finish_reason"):
                finish = choice["finish_reason"]
            delta = choice.get("delta")
            if not delta:
                continue
            text = delta.get("content")
            if text:
                if not blocks or not isinstance(blocks[-1], TextContent):
                    blocks.append(TextContent(text=""))
                    yield TextStartEvent(contentIndex=len(blocks) - 1, partial=out)
                append_text(blocks[-1], text)
                yield TextDeltaEvent(contentIndex=len(blocks) - 1, delta=text, partial=out)
            for field in _REASONING_FIELDS:
                thought = delta.get(field)
                if thought:
                    if not blocks or not isinstance(blocks[-1], ThinkingContent):
                        blocks.append(ThinkingContent(thinking="", thinkingSignature=field))
                        yield ThinkingStartEvent(contentIndex=len(blocks) - 1, partial=out)
                    append_thinking(blocks[-1], thought)
                    yield ThinkingDeltaEvent(contentIndex=len(blocks) - 1, delta=thought, partial=out)
                    break
            for tc_delta in delta.get("tool_calls") or ():
                idx = tc_delta.get("index") or 0
                fn = tc_delta.get("function") or {}
                entry = calls.get(idx)
                new_id = tc_delta.get("id")
                if entry is None or (new_id and entry[2].id and entry[2].id != new_id):
                    started = ToolCall(id=new_id or "", name=fn.get("name") or "", arguments={})
                    blocks.append(started)
                    entry = calls[idx] = (len(blocks) - 1, ArgsBuffer(), started)
                    yield ToolCallStartEvent(contentIndex=entry[0], partial=out)
                tc = entry[2]
                if new_id:
                    tc.id = new_id
                if fn.get("name"):
                    tc.name = fn["name"]
                args = fn.get("arguments") or ""
                if args:
                    entry[1].add(tc, args)
                yield ToolCallDeltaEvent(contentIndex=entry[0], delta=args, partial=out)
            for detail in delta.get("reasoning_details") or ():
                if isinstance(detail, dict) and detail.get("type") == "reasoning.encrypted" and detail.get("id") \
                        and detail.get("data"):
                    for b in blocks:
                        if isinstance(b, ToolCall) and b.id == detail["id"]:
                            b.thoughtSignature = js_json(detail)
    except (Exception, asyncio.CancelledError) as exc:  # a dropped connection, a timeout, bad JSON; an abort
        for _ci, buf, call in calls.values():
            buf.finish(call)
        if isinstance(exc, asyncio.CancelledError):
            raise
        yield fail(out, describe_error(exc, model.baseUrl))
        return
    finally:
        await close_response(response)

    if finish is None:  # neither a finish_reason nor [DONE]: the body was cut short
        yield fail(out, "Connection lost: the stream ended before the response was complete")
        return
    # pi emits every *_end after the stream has ended, in content order
    args_of = {ci: buf for ci, buf, _call in calls.values()}
    for ci, block in enumerate(blocks):
        if isinstance(block, TextContent):
            yield TextEndEvent(contentIndex=ci, content=block.text, partial=out)
        elif isinstance(block, ThinkingContent):
            yield ThinkingEndEvent(contentIndex=ci, content=block.thinking, partial=out)
        else:
            args_of[ci].finish(block)
            yield ToolCallEndEvent(contentIndex=ci, toolCall=block, partial=out)
    reason = _STOP_REASONS.get(finish, "stop")
    if reason == "error":
        yield fail(out, f"The provider stopped the response (finish_reason: {finish})")
        return
    if reason == "stop" and any(isinstance(b, ToolCall) for b in blocks):
        reason = "toolUse"
    out.stopReason = reason
    yield DoneEvent(reason=reason, message=out)
