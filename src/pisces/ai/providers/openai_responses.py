"""``openai-responses``: the OpenAI Responses API (``POST /responses``), with pi's request shape and events.

Facts kept from pi:
- a tool call's id is ``"<call_id>|<item_id>"``, so both halves can be replayed;
- a thinking block's ``thinkingSignature`` is the JSON of the whole reasoning item (with its
  ``encrypted_content``), replayed verbatim as an input item; a text block's ``textSignature`` is
  ``{"v":1,"id":<message item id>}``;
- ``*_end`` events come at each ``response.output_item.done`` (unlike the Chat Completions wire).

Transport, SSE parsing, error wording and message transformation are shared with ``openai_completions``.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any, AsyncIterator

from pisces.ai.providers._shared import (
    append_text,
    append_thinking,
    finish_usage,
    new_output,
    payload_hook,
    sanitize,
    transform_messages,
)
from pisces.ai.providers.openai_chat_messages import image_url, js_json
from pisces.ai.providers.openai_completions import (
    ArgsBuffer,
    close_response,
    decode_json,
    describe_error,
    fail,
    iter_sse,
    map_thinking_level,
    max_output_tokens,
    open_stream,
    prepare,  # noqa: F401  (the registry's warm-up hook: the same client as Chat Completions)
    stream_error_message,
)
from pisces.ai.types import (
    UNSET,
    AssistantMessage,
    Context,
    DoneEvent,
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

# providers whose "call_id|item_id" tool-call ids are normalised when replayed from another model
_RESPONSES_ID_PROVIDERS = frozenset({"openai", "openai-codex", "opencode"})


# ---------------------------------------------------------------------------------------------
# Request
# ---------------------------------------------------------------------------------------------
def short_hash(text: str) -> str:
    """pi's shortHash (a 53-bit mix of two 32-bit hashes, base 36), over UTF-16 code units."""
    m = 0xFFFFFFFF
    h1, h2 = 0xDEADBEEF, 0x41C6CE57
    units = text.encode("utf-16-le")
    for i in range(0, len(units), 2):
        ch = units[i] | (units[i + 1] << 8)
        h1 = ((h1 ^ ch) * 2654435761) & m
        h2 = ((h2 ^ ch) * 1597334677) & m
    h1 = (((h1 ^ (h1 >> 16)) * 2246822507) & m) ^ (((h2 ^ (h2 >> 13)) * 3266489909) & m)
    h2 = (((h2 ^ (h2 >> 16)) * 2246822507) & m) ^ (((h1 ^ (h1 >> 13)) * 3266489909) & m)
    return _base36(h2) + _base36(h1)


def _base36(n: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        n, r = divmod(n, 36)
        out = digits[r] + out
        if not n:
            return out


def _text_signature(sig: Any) -> tuple[str | None, str | None]:
    """(item id, phase) from a textSignature: ``{"v":1,"id":...}`` or a legacy bare id."""
    if not isinstance(sig, str) or not sig:
        return None, None
    if sig.startswith("{"):
        try:
            parsed = json.loads(sig)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict) and parsed.get("v") == 1 and isinstance(parsed.get("id"), str):
            phase = parsed.get("phase")
            return parsed["id"], phase if phase in ("commentary", "final_answer") else None
    return sig, None


def _normalize_call_id(model: Model):
    def normalize(call_id: str) -> str:
        if model.provider not in _RESPONSES_ID_PROVIDERS or "|" not in call_id:
            return call_id
        call, item = call_id.split("|", 1)
        call = re.sub(r"[^a-zA-Z0-9_-]", "_", call)
        item = re.sub(r"[^a-zA-Z0-9_-]", "_", item)
        if not item.startswith("fc"):
            item = f"fc_{item}"
        return f"{call[:64].rstrip('_')}|{item[:64].rstrip('_')}"

    return normalize


def convert_input(model: Model, context: Context) -> list[dict[str, Any]]:
    """Context messages as Responses API input items."""
    messages = transform_messages(context.messages, model, _normalize_call_id(model))
    takes_images = "image" in model.input
    items: list[dict[str, Any]] = []
    if isinstance(context.systemPrompt, str) and context.systemPrompt:
        items.append({"role": "developer" if model.reasoning else "system",
                      "content": sanitize(context.systemPrompt)})
    msg_index = 0
    for msg in messages:
        if isinstance(msg, UserMessage):
            if isinstance(msg.content, str):
                parts = [{"type": "input_text", "text": sanitize(msg.content)}]
            else:
                parts = []
                for c in msg.content:
                    if isinstance(c, TextContent):
                        parts.append({"type": "input_text", "text": sanitize(c.text)})
                    elif takes_images:
                        parts.append({"type": "input_image", "detail": "auto", "image_url": image_url(c)})
            if not parts:
                continue
            items.append({"role": "user", "content": parts})
        elif isinstance(msg, AssistantMessage):
            other_model = msg.model != model.id and msg.provider == model.provider and msg.api == model.api
            produced: list[dict[str, Any]] = []
            for block in msg.content:
                if isinstance(block, ThinkingContent):
                    if isinstance(block.thinkingSignature, str) and block.thinkingSignature:
                        try:
                            produced.append(json.loads(block.thinkingSignature))
                        except ValueError:
                            pass  # not a reasoning item (another wire's signature): nothing to replay
                elif isinstance(block, TextContent):
                    item_id, phase = _text_signature(block.textSignature)
                    if not item_id:
                        item_id = f"msg_{msg_index}"
                    elif len(item_id) > 64:
                        item_id = f"msg_{short_hash(item_id)}"
                    item = {"type": "message", "role": "assistant",
                            "content": [{"type": "output_text", "text": sanitize(block.text), "annotations": []}],
                            "status": "completed", "id": item_id}
                    if phase:
                        item["phase"] = phase
                    produced.append(item)
                elif isinstance(block, ToolCall):
                    call_id, _, item_id = block.id.partition("|")
                    fc: dict[str, Any] = {"type": "function_call"}
                    if item_id and not (other_model and item_id.startswith("fc_")):
                        fc["id"] = item_id
                    fc.update(call_id=call_id, name=block.name, arguments=js_json(block.arguments))
                    produced.append(fc)
            if not produced:
                continue
            items.extend(produced)
        elif isinstance(msg, ToolResultMessage):
            text = "\n".join(c.text for c in msg.content if isinstance(c, TextContent))
            has_images = any(isinstance(c, ImageContent) for c in msg.content)
            output: Any
            if has_images and takes_images:
                output = [{"type": "input_text", "text": sanitize(text)}] if text else []
                output.extend({"type": "input_image", "detail": "auto", "image_url": image_url(c)}
                              for c in msg.content if isinstance(c, ImageContent))
            else:
                output = sanitize(text or "(see attached image)")
            items.append({"type": "function_call_output", "call_id": msg.toolCallId.split("|", 1)[0],
                          "output": output})
        msg_index += 1
    return items


def build_body(model: Model, context: Context, options: StreamOptions) -> dict[str, Any]:
    items = convert_input(model, context)
    body: dict[str, Any] = {"model": model.id, "input": items, "stream": True}
    if options.sessionId:
        body["prompt_cache_key"] = options.sessionId
    body["store"] = False
    body["max_output_tokens"] = max_output_tokens(model, options)
    if options.temperature is not None:
        body["temperature"] = options.temperature
    if isinstance(context.tools, list) and context.tools:
        body["tools"] = [{"type": "function", "name": t.name, "description": t.description,
                          "parameters": t.parameters, "strict": False} for t in context.tools]
    if model.reasoning:
        effort = map_thinking_level(model, options.reasoning)
        if effort:
            body["reasoning"] = {"effort": effort, "summary": "auto"}
            body["include"] = ["reasoning.encrypted_content"]
        elif model.name.startswith("gpt-5"):
            # pi's workaround: GPT-5 has no "reasoning off", this developer note makes it answer directly
            items.append({"role": "developer", "content": [{"type": "input_text", "text": "# Juice: 0 !important"}]})
    return body


# ---------------------------------------------------------------------------------------------
# Stream
# ---------------------------------------------------------------------------------------------
_STATUS = {"completed": "stop", "incomplete": "length", "failed": "error", "cancelled": "error"}


def _apply_usage(model: Model, out: AssistantMessage, raw: dict[str, Any]) -> None:
    cached = (raw.get("input_tokens_details") or {}).get("cached_tokens") or 0
    u = out.usage
    u.input = (raw.get("input_tokens") or 0) - cached
    u.output = raw.get("output_tokens") or 0
    u.cacheRead = cached
    u.cacheWrite = 0
    finish_usage(model, u)


def _failure_message(response: dict[str, Any]) -> str:
    error = response.get("error")
    if isinstance(error, dict) and error:
        return f"{error.get('code') or 'unknown'}: {error.get('message') or 'no message'}"
    details = response.get("incomplete_details")
    if isinstance(details, dict) and details.get("reason"):
        return f"incomplete: {details['reason']}"
    return "Unknown error (no error details in response)"


async def stream(model: Model, context: Context, options: StreamOptions, *,
                 open_response: Any = open_stream) -> AsyncIterator[Any]:
    """The Responses stream; ``open_response`` (``open_stream``'s signature) lets Azure send it its own way."""
    out = new_output(model)
    try:
        body = await payload_hook(options, build_body(model, context, options))
        response = await open_response(model, options, "/responses", body)
    except Exception as exc:  # noqa: BLE001 - every failure becomes the error event
        yield StartEvent(partial=out)
        yield fail(out, describe_error(exc, model.baseUrl))
        return
    yield StartEvent(partial=out)
    blocks = out.content
    item: dict[str, Any] | None = None  # the output item being streamed, with its parts as announced
    block: Any = None  # its content block
    args: ArgsBuffer | None = None
    status: str | None = None
    try:
        async for sse_event, payload in iter_sse(response):
            if payload.startswith("[DONE]"):
                break
            ev = decode_json(payload)
            if not isinstance(ev, dict):
                continue
            kind = ev.get("type")
            idx = len(blocks) - 1
            if kind == "response.output_text.delta":
                parts = item.get("content") if item is not None else None
                if isinstance(block, TextContent) and (not parts or parts[-1].get("type") == "output_text"):
                    delta = ev.get("delta") or ""
                    append_text(block, delta)
                    yield TextDeltaEvent(contentIndex=idx, delta=delta, partial=out)
            elif kind == "response.function_call_arguments.delta":
                if isinstance(block, ToolCall) and args is not None:
                    delta = ev.get("delta") or ""
                    args.add(block, delta)
                    yield ToolCallDeltaEvent(contentIndex=idx, delta=delta, partial=out)
            elif kind == "response.reasoning_summary_text.delta":
                if isinstance(block, ThinkingContent):
                    delta = ev.get("delta") or ""
                    append_thinking(block, delta)
                    yield ThinkingDeltaEvent(contentIndex=idx, delta=delta, partial=out)
            elif kind == "response.output_item.added":
                added = ev.get("item") or {}
                itype = added.get("type")
                if itype == "reasoning":
                    item, block = added, ThinkingContent(thinking="")
                    blocks.append(block)
                    yield ThinkingStartEvent(contentIndex=len(blocks) - 1, partial=out)
                elif itype == "message":
                    item, block = added, TextContent(text="")
                    blocks.append(block)
                    yield TextStartEvent(contentIndex=len(blocks) - 1, partial=out)
                elif itype == "function_call":
                    item = added
                    block = ToolCall(id=f"{added.get('call_id')}|{added.get('id')}", name=added.get("name") or "",
                                     arguments={})
                    args = ArgsBuffer()
                    if added.get("arguments"):
                        args.add(block, added["arguments"])
                    blocks.append(block)
                    yield ToolCallStartEvent(contentIndex=len(blocks) - 1, partial=out)
            elif kind == "response.reasoning_summary_part.added":
                if item is not None and item.get("type") == "reasoning":
                    item.setdefault("summary", []).append(dict(ev.get("part") or {"type": "summary_text", "text": ""}))
            elif kind == "response.reasoning_summary_part.done":
                if isinstance(block, ThinkingContent) and item is not None and item.get("summary"):
                    append_thinking(block, "\n\n")  # pi's separator between summary parts while streaming
                    yield ThinkingDeltaEvent(contentIndex=idx, delta="\n\n", partial=out)
            elif kind == "response.content_part.added":
                part = ev.get("part") or {}
                if item is not None and item.get("type") == "message" and part.get("type") in ("output_text",
                                                                                                 "refusal"):
                    item.setdefault("content", []).append(dict(part))
            elif kind == "response.refusal.delta":
                if isinstance(block, TextContent) and item is not None and item.get("content") and \
                        item["content"][-1].get("type") == "refusal":
                    delta = ev.get("delta") or ""
                    append_text(block, delta)
                    yield TextDeltaEvent(contentIndex=idx, delta=delta, partial=out)
            elif kind == "response.function_call_arguments.done":
                if isinstance(block, ToolCall) and isinstance(ev.get("arguments"), str):
                    args = ArgsBuffer(ev["arguments"])
                    args.finish(block)
            elif kind == "response.output_item.done":
                done = ev.get("item") or {}
                dtype = done.get("type")
                if dtype == "reasoning" and isinstance(block, ThinkingContent):
                    block.thinking = "\n\n".join(s.get("text") or "" for s in done.get("summary") or ())
                    block.thinkingSignature = js_json(done)
                    yield ThinkingEndEvent(contentIndex=idx, content=block.thinking, partial=out)
                    item = block = None
                elif dtype == "message" and isinstance(block, TextContent):
                    block.text = "".join((c.get("text") if c.get("type") == "output_text" else c.get("refusal"))
                                         or "" for c in done.get("content") or ())
                    sig: dict[str, Any] = {"v": 1, "id": done.get("id")}
                    if done.get("phase"):
                        sig["phase"] = done["phase"]
                    block.textSignature = js_json(sig)
                    yield TextEndEvent(contentIndex=idx, content=block.text, partial=out)
                    item = block = None
                elif dtype == "function_call" and isinstance(block, ToolCall):
                    if args is None or not args.text:
                        args = ArgsBuffer(done.get("arguments") or "{}")
                    args.finish(block)
                    block.id = f"{done.get('call_id')}|{done.get('id')}"
                    block.name = done.get("name") or block.name
                    yield ToolCallEndEvent(contentIndex=idx, toolCall=block, partial=out)
                    item = block = None
                    args = None
            elif kind in ("response.created", "response.in_progress"):
                resp = ev.get("response") or {}
                if out.responseId is UNSET and resp.get("id"):
                    out.responseId = resp["id"]
            elif kind in ("response.completed", "response.incomplete", "response.done"):
                resp = ev.get("response") or {}
                if resp.get("id"):
                    out.responseId = resp["id"]
                if isinstance(resp.get("usage"), dict):
                    _apply_usage(model, out, resp["usage"])
                status = resp.get("status") or ("incomplete" if kind == "response.incomplete" else "completed")
            elif kind == "response.failed":
                yield fail(out, _failure_message(ev.get("response") or {}))
                return
            elif ev.get("error"):
                yield fail(out, stream_error_message(ev["error"]))
                return
            elif kind == "error" or sse_event == "error":
                code, message = ev.get("code"), ev.get("message") or "Unknown error"
                yield fail(out, f"Error Code {code}: {message}" if code else message)
                return
    except (Exception, asyncio.CancelledError) as exc:  # a dropped connection, a timeout, bad JSON; an abort
        if isinstance(block, ToolCall) and args is not None:
            args.finish(block)
        if isinstance(exc, asyncio.CancelledError):
            raise
        yield fail(out, describe_error(exc, model.baseUrl))
        return
    finally:
        await close_response(response)

    if status is None:  # no response.completed: the body was cut short
        yield fail(out, "Connection lost: the stream ended before the response was complete")
        return
    reason = _STATUS.get(status, "stop")
    if reason == "error":
        yield fail(out, f"The response ended with status {status}")
        return
    if reason == "stop" and any(isinstance(b, ToolCall) for b in blocks):
        reason = "toolUse"
    out.stopReason = reason
    yield DoneEvent(reason=reason, message=out)
