"""``google-generative-ai``: the Gemini API (generativelanguage), sent without the google-genai SDK (``google_direct``:
the request the SDK would send, its SSE chunks read as plain JSON) unless ``PISCES_PROVIDER_TRANSPORT=sdk`` asks
for the SDK, the payload holds what ``google_direct`` does not convert, or the client is Vertex's.

Contents, tools and thinking settings are built as pi builds them. Gemini sends text in pieces
and function calls whole: consecutive text pieces of one kind (thought or answer) form one block,
a change of kind or a function call closes it. Thought signatures (opaque bytes, base64 on the wire)
are kept on the block that carried them and sent back with it on the next request to the same model.

The SDK is imported by the first request that goes through it only.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import time
from typing import Any, AsyncIterator, Awaitable, Callable, TypeGuard

from pisces.ai.gc_pause import gc_paused
from pisces.ai.providers import google_direct, import_sdk
from pisces.ai.providers._limits import genai_client_args
from pisces.ai.providers._shared import (
    append_text,
    append_thinking,
    cached_client,
    describe_transport_error,
    finish_usage,
    finite_json,
    format_http_error,
    missing_key_message,
    new_output,
    normalize_tool_call_id,
    payload_hook,
    resolve_api_key,
    sanitize,
    transform_messages,
)
from pisces.ai.types import (
    AssistantMessage,
    Context,
    DoneEvent,
    ErrorEvent,
    ImageContent,
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

# Tells Gemini 3 to accept a function call that carries no signature (one replayed from another model).
SKIP_THOUGHT_SIGNATURE = "skip_thought_signature_validator"
_BASE64 = re.compile(r"^[A-Za-z0-9+/_-]+={0,2}$")

_BUDGETS_25_PRO = {"minimal": 128, "low": 2048, "medium": 8192, "high": 32768}
_BUDGETS_25_FLASH = {"minimal": 128, "low": 2048, "medium": 8192, "high": 24576}
_BUDGETS_25_FLASH_LITE = {"minimal": 512, "low": 2048, "medium": 8192, "high": 24576}

_tool_call_counter = [0]


# ---------------------------------------------------------------------------------------------
# Request
# ---------------------------------------------------------------------------------------------
def _is_gemini3_pro(model_id: str) -> bool:
    return re.search(r"gemini-3(?:\.\d+)?-pro", model_id.lower()) is not None


def _is_gemini3_flash(model_id: str) -> bool:
    mid = model_id.lower()
    return re.search(r"gemini-3(?:\.\d+)?-flash", mid) is not None or mid in ("gemini-flash-latest",
                                                                              "gemini-flash-lite-latest")


def requires_tool_call_id(model_id: str) -> bool:
    """Models served through Google APIs that need explicit ids on function calls and responses."""
    return model_id.startswith(("claude-", "gpt-oss-"))


def _valid_signature(sig: Any) -> TypeGuard[str]:
    return isinstance(sig, str) and len(sig) > 0 and len(sig) % 4 == 0 and _BASE64.match(sig) is not None


def _sig_bytes(sig: str) -> bytes:
    try:
        return base64.urlsafe_b64decode(sig) if ("-" in sig or "_" in sig) else base64.b64decode(sig)
    except (binascii.Error, ValueError):
        return b""


def _sig_text(raw: Any) -> str | None:
    if isinstance(raw, (bytes, bytearray)) and raw:
        return base64.b64encode(raw).decode("ascii")
    if isinstance(raw, str) and raw:
        return raw
    return None


def _sig_json(text: Any) -> str | None:
    """A signature as the REST API sends it (base64, either alphabet) in the form the SDK's bytes give."""
    if not isinstance(text, str):
        return None
    try:
        raw = base64.urlsafe_b64decode(text) if ("-" in text or "_" in text) else base64.b64decode(text)
    except (binascii.Error, ValueError):
        return text
    return _sig_text(raw)


def convert_contents(model: Model, context: Context) -> list[dict[str, Any]]:
    """pi's history as Gemini ``contents`` (SDK dict form: snake_case keys, signatures as bytes)."""
    contents: list[dict[str, Any]] = []
    images_ok = "image" in model.input
    needs_id = requires_tool_call_id(model.id)
    gemini3 = "gemini-3" in model.id.lower()

    for msg in transform_messages(context.messages, model, normalize_tool_call_id if needs_id else None):
        if isinstance(msg, UserMessage):
            if isinstance(msg.content, str):
                contents.append({"role": "user", "parts": [{"text": sanitize(msg.content)}]})
                continue
            parts: list[dict[str, Any]] = []
            for c in msg.content:
                if isinstance(c, TextContent):
                    parts.append({"text": sanitize(c.text)})
                elif isinstance(c, ImageContent) and images_ok:
                    parts.append({"inline_data": {"mime_type": c.mimeType, "data": base64.b64decode(c.data)}})
            if parts:
                contents.append({"role": "user", "parts": parts})
        elif isinstance(msg, AssistantMessage):
            same = msg.provider == model.provider and msg.model == model.id
            parts = []
            for b in msg.content:
                if isinstance(b, TextContent):
                    if not b.text.strip():
                        continue
                    part: dict[str, Any] = {"text": sanitize(b.text)}
                    if same and _valid_signature(b.textSignature):
                        part["thought_signature"] = _sig_bytes(b.textSignature)
                    parts.append(part)
                elif isinstance(b, ThinkingContent):
                    if not b.thinking.strip():
                        continue
                    if same:
                        part = {"thought": True, "text": sanitize(b.thinking)}
                        if _valid_signature(b.thinkingSignature):
                            part["thought_signature"] = _sig_bytes(b.thinkingSignature)
                    else:
                        part = {"text": sanitize(b.thinking)}
                    parts.append(part)
                elif isinstance(b, ToolCall):
                    call: dict[str, Any] = {"name": b.name, "args": b.arguments or {}}
                    if needs_id:
                        call["id"] = b.id
                    part = {"function_call": call}
                    sig = b.thoughtSignature if same and _valid_signature(b.thoughtSignature) else None
                    if sig is None and gemini3:
                        sig = SKIP_THOUGHT_SIGNATURE
                    if sig:
                        part["thought_signature"] = _sig_bytes(sig)
                    parts.append(part)
            if parts:
                contents.append({"role": "model", "parts": parts})
        elif isinstance(msg, ToolResultMessage):
            text = "\n".join(c.text for c in msg.content if isinstance(c, TextContent))
            images = [c for c in msg.content if isinstance(c, ImageContent)] if images_ok else []
            value = sanitize(text) if text else ("(see attached image)" if images else "")
            image_parts = [{"inline_data": {"mime_type": c.mimeType, "data": base64.b64decode(c.data)}}
                           for c in images]
            response: dict[str, Any] = {"name": msg.toolName,
                                        "response": {"error": value} if msg.isError else {"output": value}}
            if images and gemini3:
                response["parts"] = image_parts
            if needs_id:
                response["id"] = msg.toolCallId
            part = {"function_response": response}
            last = contents[-1] if contents else None
            if last is not None and last["role"] == "user" and any("function_response" in p for p in last["parts"]):
                last["parts"].append(part)
            else:
                contents.append({"role": "user", "parts": [part]})
            if images and not gemini3:
                contents.append({"role": "user", "parts": [{"text": "Tool result image:"}, *image_parts]})
    return contents


def _budget(model: Model, level: str, custom: dict[str, int] | None) -> int:
    level = "high" if level == "xhigh" else level
    if custom and level in custom:
        return int(custom[level])
    mid = model.id
    if "2.5-pro" in mid:
        return _BUDGETS_25_PRO[level]
    if "2.5-flash-lite" in mid:
        return _BUDGETS_25_FLASH_LITE[level]
    if "2.5-flash" in mid:
        return _BUDGETS_25_FLASH[level]
    return -1  # dynamic: the model decides


def _thinking_config(model: Model, options: StreamOptions) -> dict[str, Any] | None:
    if not model.reasoning:
        return None
    level = options.reasoning
    if not level or level == "off":
        # Gemini 3 cannot switch thinking off: ask for the least and hide it.
        if _is_gemini3_pro(model.id):
            return {"thinking_level": "LOW"}
        if _is_gemini3_flash(model.id):
            return {"thinking_level": "MINIMAL"}
        return {"thinking_budget": 0}
    if _is_gemini3_pro(model.id):
        return {"include_thoughts": True, "thinking_level": "LOW" if level in ("minimal", "low") else "HIGH"}
    if _is_gemini3_flash(model.id):
        tl = {"minimal": "MINIMAL", "low": "LOW", "medium": "MEDIUM"}.get(level, "HIGH")
        return {"include_thoughts": True, "thinking_level": tl}
    return {"include_thoughts": True, "thinking_budget": _budget(model, level, options.thinkingBudgets)}


def build_config(model: Model, context: Context, options: StreamOptions) -> dict[str, Any]:
    """``GenerateContentConfig`` in dict form."""
    config: dict[str, Any] = {}
    if options.temperature is not None:
        config["temperature"] = options.temperature
    config["max_output_tokens"] = options.maxTokens or min(model.maxTokens, 32000)
    if isinstance(context.systemPrompt, str) and context.systemPrompt:
        config["system_instruction"] = sanitize(context.systemPrompt)
    if isinstance(context.tools, list) and context.tools:
        config["tools"] = [{"function_declarations": [
            {"name": t.name, "description": t.description, "parameters_json_schema": t.parameters}
            for t in context.tools]}]
    thinking = _thinking_config(model, options)
    if thinking is not None:
        config["thinking_config"] = thinking
    return config


def prepare() -> None:
    """Build (and drop) a client once, so that the first request finds the SDK's transport loaded."""
    with gc_paused():
        import_sdk("google.genai.types")
        import_sdk("google.genai").Client(api_key="unused")


def _client(genai: Any, types: Any, model: Model, api_key: str, options: StreamOptions) -> Any:
    headers = {**(model.headers if isinstance(model.headers, dict) else {}), **(options.headers or {})}
    key = ("google", api_key, model.baseUrl, tuple(sorted(headers.items())), options.maxRetries, options.timeoutMs)

    def make() -> Any:
        http: dict[str, Any] = {}
        if model.baseUrl:
            http["base_url"] = model.baseUrl
            http["api_version"] = ""  # the base URL already names the version (…/v1beta)
        if headers:
            http["headers"] = headers
        if options.timeoutMs:
            http["timeout"] = int(options.timeoutMs)
        http["async_client_args"] = genai_client_args()  # the bounded reader (pisces.ai.providers._limits)
        if hasattr(types, "HttpRetryOptions"):
            http["retry_options"] = types.HttpRetryOptions(attempts=max(1, options.maxRetries + 1))
        return genai.Client(api_key=api_key, http_options=types.HttpOptions(**http))

    return cached_client(key, make)


def _open_direct(model: Model, api_key: str, options: StreamOptions, model_id: str, body: dict[str, Any]) -> Any:
    """The request ``_client``'s SDK client would send, through ``google_direct``: its chunks, a list per read
    (the request is sent when the first is asked for)."""
    extra = {**(model.headers if isinstance(model.headers, dict) else {}), **(options.headers or {})}
    timeout_s = int(options.timeoutMs) / 1000.0 if options.timeoutMs else None
    return google_direct.reply(
        google_direct.url(model.baseUrl, model_id), google_direct.headers(api_key, extra, timeout_s), body,
        attempts=max(1, options.maxRetries + 1), timeout_s=timeout_s)


# ---------------------------------------------------------------------------------------------
# Response
# ---------------------------------------------------------------------------------------------
class _StreamFailed(Exception):
    pass


def _enum_name(value: Any) -> str:
    return str(getattr(value, "value", value) or "")


class _Parser:
    """Turns Gemini response chunks into pi's assistant message events, mutating ``out``."""

    def __init__(self, model: Model, out: AssistantMessage) -> None:
        self.model = model
        self.out = out
        self.current: TextContent | ThinkingContent | None = None
        self.finish: str | None = None
        self.finish_message: str | None = None
        self.block_reason: str | None = None

    def close_block(self) -> list[Any]:
        block, self.current = self.current, None
        if block is None:
            return []
        pos = len(self.out.content) - 1
        if isinstance(block, TextContent):
            return [TextEndEvent(contentIndex=pos, content=block.text, partial=self.out)]
        return [ThinkingEndEvent(contentIndex=pos, content=block.thinking, partial=self.out)]

    # -- what both readers do with a part, a finish and the usage -------------------------------------
    def _text(self, text: str, thinking: bool, sig: str | None, events: list[Any]) -> None:
        out = self.out
        cur = self.current
        if cur is None or thinking != isinstance(cur, ThinkingContent):
            events.extend(self.close_block())
            pos = len(out.content)
            if thinking:
                cur = ThinkingContent(thinking="")
                events.append(ThinkingStartEvent(contentIndex=pos, partial=out))
            else:
                cur = TextContent(text="")
                events.append(TextStartEvent(contentIndex=pos, partial=out))
            out.content.append(cur)
            self.current = cur
        pos = len(out.content) - 1
        if isinstance(cur, ThinkingContent):
            append_thinking(cur, text)
            if sig:
                cur.thinkingSignature = sig
            events.append(ThinkingDeltaEvent(contentIndex=pos, delta=text, partial=out))
        else:
            append_text(cur, text)
            if sig:
                cur.textSignature = sig
            events.append(TextDeltaEvent(contentIndex=pos, delta=text, partial=out))

    def _tool_call(self, name: str, call_id: Any, args: dict[str, Any], sig: str | None, events: list[Any]) -> None:
        out = self.out
        events.extend(self.close_block())
        if not call_id or any(isinstance(b, ToolCall) and b.id == call_id for b in out.content):
            _tool_call_counter[0] += 1
            call_id = f"{name}_{int(time.time() * 1000)}_{_tool_call_counter[0]}"
        tc = ToolCall(id=call_id, name=name, arguments=args)
        if sig:
            tc.thoughtSignature = sig
        pos = len(out.content)
        out.content.append(tc)
        events.append(ToolCallStartEvent(contentIndex=pos, partial=out))
        events.append(ToolCallDeltaEvent(contentIndex=pos, delta=json.dumps(args, ensure_ascii=False), partial=out))
        events.append(ToolCallEndEvent(contentIndex=pos, toolCall=tc, partial=out))

    def _finished(self, finish: str, message: str | None) -> None:
        self.finish = finish
        self.finish_message = message
        reason = {"STOP": "stop", "MAX_TOKENS": "length"}.get(finish, "error")
        if reason == "stop" and any(isinstance(b, ToolCall) for b in self.out.content):
            reason = "toolUse"
        self.out.stopReason = reason

    def _usage(self, prompt: int, cached: int, candidates: int, thoughts: int) -> None:
        usage = self.out.usage
        usage.input = prompt - cached
        usage.output = candidates + thoughts
        usage.cacheRead = cached
        usage.cacheWrite = 0
        finish_usage(self.model, usage)

    # -- the two readers ------------------------------------------------------------------------------
    def feed(self, chunk: Any) -> list[Any]:
        """A chunk as google-genai's objects."""
        out = self.out
        events: list[Any] = []
        if getattr(chunk, "response_id", None) and not isinstance(out.responseId, str):
            out.responseId = chunk.response_id
        candidates = chunk.candidates or []
        cand = candidates[0] if candidates else None
        content = cand.content if cand is not None else None
        for part in (content.parts if content is not None and content.parts else []):
            sig = _sig_text(part.thought_signature)
            if part.text is not None:
                self._text(part.text, part.thought is True, sig, events)
            if part.function_call is not None:
                fc = part.function_call
                args = finite_json(fc.args) if isinstance(fc.args, dict) else {}  # the SDK reads NaN as a float
                self._tool_call(fc.name or "", fc.id, args, sig, events)
        if cand is not None and cand.finish_reason:
            self._finished(_enum_name(cand.finish_reason), getattr(cand, "finish_message", None))
        feedback = getattr(chunk, "prompt_feedback", None)
        if feedback is not None and getattr(feedback, "block_reason", None):
            self.block_reason = _enum_name(feedback.block_reason)
        um = chunk.usage_metadata
        if um is not None:
            self._usage(um.prompt_token_count or 0, um.cached_content_token_count or 0,
                        um.candidates_token_count or 0, um.thoughts_token_count or 0)
        return events

    def feed_json(self, chunk: Any) -> list[Any]:
        """``feed`` for a chunk as the REST API sends it (camelCase JSON, signatures as base64 text): the same
        events and message as the SDK's objects give."""
        if not isinstance(chunk, dict):
            return []
        out = self.out
        events: list[Any] = []
        rid = chunk.get("responseId")
        if rid and not isinstance(out.responseId, str):
            out.responseId = rid
        candidates = chunk.get("candidates")
        cand = candidates[0] if isinstance(candidates, list) and candidates else None
        if not isinstance(cand, dict):
            cand = None
        content = cand.get("content") if cand is not None else None
        parts = content.get("parts") if isinstance(content, dict) else None
        for part in parts if isinstance(parts, list) else ():
            if not isinstance(part, dict):
                continue
            raw_sig = part.get("thoughtSignature")
            sig = _sig_json(raw_sig) if raw_sig else None
            text = part.get("text")
            if isinstance(text, str):
                self._text(text, part.get("thought") is True, sig, events)
            fc = part.get("functionCall")
            if isinstance(fc, dict):
                raw_args = fc.get("args")
                args = finite_json(raw_args) if isinstance(raw_args, dict) else {}
                self._tool_call(fc.get("name") or "", fc.get("id"), args, sig, events)
        finish = cand.get("finishReason") if cand is not None else None
        if finish:
            self._finished(str(finish), None)  # google-genai drops the Gemini API's finishMessage: worded as through it
        feedback = chunk.get("promptFeedback")
        if isinstance(feedback, dict) and feedback.get("blockReason"):
            self.block_reason = str(feedback["blockReason"])
        um = chunk.get("usageMetadata")
        if isinstance(um, dict):
            self._usage(um.get("promptTokenCount") or 0, um.get("cachedContentTokenCount") or 0,
                        um.get("candidatesTokenCount") or 0, um.get("thoughtsTokenCount") or 0)
        return events

    def failure(self) -> str | None:
        """Why the finished stream is an error, or None."""
        if self.block_reason and not self.out.content:
            return f"Gemini blocked the prompt (block reason: {self.block_reason})"
        if self.finish is None:
            return "Connection lost: the Gemini stream ended without a finish reason"
        if self.out.stopReason == "error":
            detail = f": {self.finish_message}" if self.finish_message else ""
            return f"Gemini stopped the response (finish reason: {self.finish}){detail}"
        return None


def _describe_error(errors: Any, exc: BaseException, model: Model) -> str:
    if isinstance(exc, _StreamFailed):
        return str(exc)
    if errors is None and isinstance(exc, ImportError):
        return f"The google-genai package is not installed ({exc}); install it with: pip install google-genai"
    if isinstance(exc, google_direct.APIError) or (errors is not None and isinstance(exc, errors.APIError)):
        message = exc.message if isinstance(exc.message, str) else None
        if message is None and exc.details is not None:
            message = exc.details if isinstance(exc.details, str) else json.dumps(exc.details, ensure_ascii=False)
        return format_http_error(exc.code if isinstance(exc.code, int) else None, message or exc.status)
    transport = describe_transport_error(exc)
    if transport:
        if "Connect" in type(exc).__name__:
            return f"Connection error: could not reach {model.baseUrl or 'the Gemini API'} ({exc})"
        return transport
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


async def stream(model: Model, context: Context, options: StreamOptions, *,
                 make_client: Callable[[Any, Any], Awaitable[Any]] | None = None) -> AsyncIterator[Any]:
    """The Gemini stream; ``make_client(genai, types)`` builds another client (Gemini on Vertex), which
    brings its own credentials (no API key is looked for then)."""
    out = new_output(model)
    yield StartEvent(partial=out)
    api_key = resolve_api_key(model, options) if make_client is None else "(the client's own credentials)"
    if not api_key:
        out.stopReason = "error"
        out.errorMessage = missing_key_message(model.provider)
        yield ErrorEvent(reason="error", error=out)
        return
    errors: Any = None
    chunks: Any = None
    error: str | None = None
    try:
        payload = await payload_hook(options, {"model": model.id, "contents": convert_contents(model, context),
                                               "config": build_config(model, context, options)})
        rest = google_direct.rest_body(payload) if make_client is None and google_direct.use_direct() else None
        parser = _Parser(model, out)
        if rest is not None:
            chunks = _open_direct(model, api_key, options, *rest)
            feed = parser.feed_json
            async for batch in chunks:
                for chunk in batch:
                    if isinstance(chunk, Exception):
                        raise chunk
                    for item in feed(chunk):
                        yield item
        else:
            genai = import_sdk("google.genai")
            errors, types = import_sdk("google.genai.errors"), import_sdk("google.genai.types")
            client = _client(genai, types, model, api_key, options) if make_client is None \
                else await make_client(genai, types)
            chunks = await client.aio.models.generate_content_stream(
                model=payload["model"], contents=payload["contents"], config=payload["config"])
            async for chunk in chunks:
                for item in parser.feed(chunk):
                    yield item
        for item in parser.close_block():
            yield item
        problem = parser.failure()
        if problem:
            raise _StreamFailed(problem)
    except Exception as exc:  # noqa: BLE001 - every failure ends the stream with an error event
        error = _describe_error(errors, exc, model)
    finally:
        closer = getattr(chunks, "aclose", None)
        if closer is not None:
            try:
                await closer()
            except Exception:  # noqa: BLE001 - already closed or broken; nothing to do
                pass
    if error is not None:
        out.stopReason = "error"
        out.errorMessage = error
        yield ErrorEvent(reason="error", error=out)
        return
    yield DoneEvent(reason=out.stopReason, message=out)
