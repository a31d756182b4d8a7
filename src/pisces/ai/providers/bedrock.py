"""``bedrock-converse-stream``: Amazon Bedrock's Converse stream API through boto3 (``pisces[bedrock]``).

Guarantees:
- boto3 is imported on the first Bedrock request only (never at start-up, never for another provider); without
  it, the request ends with an error naming ``pip install 'pisces-agent[bedrock]'``;
- credentials come from the AWS chain as boto3 resolves it (environment keys, ``AWS_PROFILE``, SSO, container
  and instance roles, web identity), or ``AWS_BEARER_TOKEN_BEDROCK`` (botocore's Bedrock API key);
  ``AWS_BEDROCK_SKIP_AUTH=1`` sends dummy keys (a proxy that authenticates by itself), as pi;
- the region and endpoint follow pi: ``AWS_REGION``/``AWS_DEFAULT_REGION``, else the region of the model's
  standard ``bedrock-runtime.<region>.amazonaws.com`` URL, else (no profile) ``us-east-1``; a base URL that is
  not a standard endpoint (a proxy, a VPC endpoint, a test server) is always used as the endpoint;
- the request is pi's (messages with tool results grouped into one user turn, cache points for Claude,
  ``additionalModelRequestFields.thinking`` for Claude reasoning); events follow pi's (text, thinking with its
  signature, tool calls with streamed arguments, usage from ``metadata``);
- boto3 is synchronous: the call and each read of the event stream run on a worker thread, so the event loop
  never blocks; an abort cancels the wait and the response is closed.
"""

from __future__ import annotations

import asyncio
import base64
import os
import re
import socket
import threading
from typing import Any, AsyncIterator, cast

from pisces.ai.providers import import_sdk
from pisces.ai.providers._shared import (
    append_text,
    append_thinking,
    cached_client,
    finish_usage,
    new_output,
    normalize_tool_call_id,
    parse_partial_json,
    payload_hook,
    sanitize,
    transform_messages,
)
from pisces.ai.types import (
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

INSTALL_HINT = "Amazon Bedrock needs boto3: pip install 'pisces-agent[bedrock]' (or pip install boto3)"
_STANDARD = re.compile(r"^bedrock-runtime(?:-fips)?\.([a-z0-9-]+)\.amazonaws\.com(?:\.cn)?$")
_STOP = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length",
         "model_context_window_exceeded": "length", "tool_use": "toolUse"}
_BUDGETS = {"minimal": 1024, "low": 2048, "medium": 8192, "high": 16384, "xhigh": 16384}
_END = object()


# ---------------------------------------------------------------------------------------------
# Region and endpoint (pi's rules)
# ---------------------------------------------------------------------------------------------
def _standard_region(base_url: str) -> str | None:
    host = re.sub(r"^[a-z]+://", "", base_url or "").split("/", 1)[0].split(":", 1)[0].lower()
    m = _STANDARD.match(host)
    return m.group(1) if m else None


def client_settings(model: Model) -> dict[str, Any]:
    """``region_name`` and ``endpoint_url`` for boto3's client (either may be absent: boto3 decides)."""
    configured = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    profile = bool(os.environ.get("AWS_PROFILE"))
    endpoint_region = _standard_region(model.baseUrl)
    explicit = bool(model.baseUrl) and (endpoint_region is None or (not configured and not profile))
    out: dict[str, Any] = {}
    if explicit:
        out["endpoint_url"] = model.baseUrl
    if configured:
        out["region_name"] = configured
    elif endpoint_region and explicit:
        out["region_name"] = endpoint_region
    elif not profile:
        out["region_name"] = "us-east-1"
    return out


# ---------------------------------------------------------------------------------------------
# Request
# ---------------------------------------------------------------------------------------------
def _is_claude(model: Model) -> bool:
    return "anthropic.claude" in model.id.lower() or "anthropic/claude" in model.id.lower()


def _adaptive(model: Model) -> bool:
    mid = model.id.lower()
    return any(s in mid for s in ("opus-4-6", "opus-4-7", "sonnet-4-6", "opus-4.6", "sonnet-4.6"))


def _image(block: ImageContent) -> dict[str, Any]:
    fmt = block.mimeType.split("/", 1)[-1].lower().replace("jpg", "jpeg")
    return {"format": fmt, "source": {"bytes": base64.b64decode(block.data)}}


def _bedrock_id(tool_id: str) -> str:
    return normalize_tool_call_id(tool_id)


def convert_messages(context: Context, model: Model, cache: bool) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    signed = _is_claude(model)
    for m in transform_messages(context.messages, model, _bedrock_id):
        if isinstance(m, UserMessage):
            if isinstance(m.content, str):
                content: list[dict[str, Any]] = [{"text": sanitize(m.content)}]
            else:
                content = [{"text": sanitize(c.text)} if isinstance(c, TextContent) else {"image": _image(c)}
                           for c in m.content]
            out.append({"role": "user", "content": content})
        elif isinstance(m, ToolResultMessage):
            result = {"toolResult": {
                "toolUseId": m.toolCallId,
                "content": [{"image": _image(c)} if isinstance(c, ImageContent) else {"text": sanitize(c.text)}
                            for c in m.content],
                "status": "error" if m.isError else "success"}}
            last = out[-1] if out else None
            if last is not None and last["role"] == "user" and last["content"] and \
                    all("toolResult" in b for b in last["content"]):
                last["content"].append(result)
            else:
                out.append({"role": "user", "content": [result]})
        else:
            blocks: list[dict[str, Any]] = []
            for c in m.content:
                if isinstance(c, TextContent):
                    if c.text.strip():
                        blocks.append({"text": sanitize(c.text)})
                elif isinstance(c, ToolCall):
                    blocks.append({"toolUse": {"toolUseId": c.id, "name": c.name, "input": c.arguments}})
                elif isinstance(c, ThinkingContent) and c.thinking.strip():
                    if signed and not (c.thinkingSignature or "").strip():
                        blocks.append({"text": sanitize(c.thinking)})
                    elif signed:
                        blocks.append({"reasoningContent": {"reasoningText": {
                            "text": sanitize(c.thinking), "signature": c.thinkingSignature}}})
                    else:
                        blocks.append({"reasoningContent": {"reasoningText": {"text": sanitize(c.thinking)}}})
            if blocks:
                out.append({"role": "assistant", "content": blocks})
    if cache and out and out[-1]["role"] == "user":
        out[-1]["content"].append({"cachePoint": {"type": "default"}})
    return out


def build_request(model: Model, context: Context, options: StreamOptions) -> dict[str, Any]:
    retention = os.environ.get("PISCES_CACHE_RETENTION") or os.environ.get("PI_CACHE_RETENTION") or "short"
    cache = retention != "none" and _is_claude(model)
    req: dict[str, Any] = {"modelId": model.id, "messages": convert_messages(context, model, cache)}
    if isinstance(context.systemPrompt, str) and context.systemPrompt:
        system: list[dict[str, Any]] = [{"text": sanitize(context.systemPrompt)}]
        if cache:
            system.append({"cachePoint": {"type": "default"}})
        req["system"] = system
    inference: dict[str, Any] = {}
    level = options.reasoning if model.reasoning and options.reasoning not in (None, "off") else None
    max_tokens = options.maxTokens or min(model.maxTokens, 32000)
    if level and _is_claude(model):
        if _adaptive(model):
            effort = {"minimal": "low", "low": "low", "medium": "medium", "high": "high"}.get(level, "high")
            req["additionalModelRequestFields"] = {"thinking": {"type": "adaptive", "display": "summarized"},
                                                   "output_config": {"effort": effort}}
        else:
            budget = int({**_BUDGETS, **(options.thinkingBudgets or {})}.get(level, _BUDGETS["high"]))
            max_tokens = min(max_tokens + budget, model.maxTokens)
            budget = min(budget, max(1024, max_tokens - 1024))
            req["additionalModelRequestFields"] = {"thinking": {"type": "enabled", "budget_tokens": budget,
                                                                "display": "summarized"}}
    inference["maxTokens"] = max_tokens
    if options.temperature is not None and not level:
        inference["temperature"] = options.temperature
    req["inferenceConfig"] = inference
    if isinstance(context.tools, list) and context.tools:
        req["toolConfig"] = {"tools": [{"toolSpec": {"name": t.name, "description": t.description,
                                                     "inputSchema": {"json": t.parameters or {"type": "object"}}}}
                                       for t in context.tools]}
    return req


# ---------------------------------------------------------------------------------------------
# Client
# ---------------------------------------------------------------------------------------------
def _client(model: Model, options: StreamOptions) -> Any:
    settings = client_settings(model)
    skip_auth = os.environ.get("AWS_BEDROCK_SKIP_AUTH") == "1"
    key = ("bedrock", tuple(sorted(settings.items())), skip_auth, options.maxRetries, options.timeoutMs,
           os.environ.get("AWS_PROFILE"), os.environ.get("AWS_ACCESS_KEY_ID"),
           os.environ.get("AWS_BEARER_TOKEN_BEDROCK"))

    def make() -> Any:
        boto3 = import_sdk("boto3")
        config = import_sdk("botocore.config")
        timeout = options.timeoutMs / 1000 if options.timeoutMs else 300
        cfg = config.Config(retries={"total_max_attempts": max(1, options.maxRetries + 1), "mode": "standard"},
                            read_timeout=timeout, connect_timeout=min(timeout, 60), user_agent_extra="pisces")
        kwargs: dict[str, Any] = dict(settings)
        if skip_auth:
            kwargs.update(aws_access_key_id="dummy-access-key", aws_secret_access_key="dummy-secret-key")
        return boto3.session.Session().client("bedrock-runtime", config=cfg, **kwargs)

    return cached_client(key, make)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, ImportError):
        return f"{INSTALL_HINT} ({exc})"
    response = getattr(exc, "response", None)
    if isinstance(response, dict) and "Error" in response:
        err = response.get("Error") or {}
        meta = response.get("ResponseMetadata") or {}
        status = meta.get("HTTPStatusCode")
        code = err.get("Code") or type(exc).__name__
        text = f"{code}: {err.get('Message') or str(exc)}"
        if code.lower().startswith("throttling") and status in (None, 200):
            status = 429  # an in-stream throttlingException: the rate limit it is, for the retry rules
        text = f"{status} {text}" if status and status != 200 else text
        retry_after = (meta.get("HTTPHeaders") or {}).get("retry-after")
        if retry_after:
            try:
                text += f" (retry-after: {float(retry_after):g}s)"
            except ValueError:
                pass
        return text
    if isinstance(exc, ConnectionError) and str(exc).startswith("Connection lost"):
        return str(exc)
    name = type(exc).__name__
    if name in ("EndpointConnectionError", "ConnectTimeoutError", "ReadTimeoutError", "ConnectionClosedError"):
        return f"Connection error: {exc}"
    if name in ("NoCredentialsError", "PartialCredentialsError"):
        return (f"No AWS credentials for Amazon Bedrock ({exc}): set AWS_PROFILE, AWS_ACCESS_KEY_ID and "
                "AWS_SECRET_ACCESS_KEY, or AWS_BEARER_TOKEN_BEDROCK")
    text = str(exc).strip()
    return f"{name}: {text}" if text else name


# ---------------------------------------------------------------------------------------------
# Response
# ---------------------------------------------------------------------------------------------
class _Parser:
    def __init__(self, model: Model, out: Any) -> None:
        self.model, self.out = model, out
        self.blocks: dict[int, int] = {}  # Bedrock's contentBlockIndex -> index in out.content
        self.json: dict[int, str] = {}
        self.stopped = False

    def _end(self, pos: int) -> Any:
        block = self.out.content[pos]
        if isinstance(block, TextContent):
            return TextEndEvent(contentIndex=pos, content=block.text, partial=self.out)
        if isinstance(block, ThinkingContent):
            return ThinkingEndEvent(contentIndex=pos, content=block.thinking, partial=self.out)
        block.arguments = parse_partial_json(self.json.pop(pos, ""))
        return ToolCallEndEvent(contentIndex=pos, toolCall=block, partial=self.out)

    def feed(self, item: dict[str, Any]) -> list[Any]:
        out = self.out
        events: list[Any] = []
        if "contentBlockStart" in item:
            ev = item["contentBlockStart"]
            tool = (ev.get("start") or {}).get("toolUse")
            if tool is not None:
                pos = len(out.content)
                out.content.append(ToolCall(id=tool.get("toolUseId") or "", name=tool.get("name") or "",
                                            arguments={}))
                self.blocks[ev.get("contentBlockIndex", 0)] = pos
                self.json[pos] = ""
                events.append(ToolCallStartEvent(contentIndex=pos, partial=out))
        elif "contentBlockDelta" in item:
            ev = item["contentBlockDelta"]
            idx, delta = ev.get("contentBlockIndex", 0), ev.get("delta") or {}
            at: int | None = self.blocks.get(idx)
            if "text" in delta:
                if at is None:
                    at = self.blocks[idx] = len(out.content)
                    out.content.append(TextContent(text=""))
                    events.append(TextStartEvent(contentIndex=at, partial=out))
                block = out.content[at]
                if isinstance(block, TextContent):
                    append_text(block, delta["text"])
                    events.append(TextDeltaEvent(contentIndex=at, delta=delta["text"], partial=out))
            elif "reasoningContent" in delta:
                rc = delta["reasoningContent"]
                if at is None:
                    at = self.blocks[idx] = len(out.content)
                    out.content.append(ThinkingContent(thinking="", thinkingSignature=""))
                    events.append(ThinkingStartEvent(contentIndex=at, partial=out))
                block = out.content[at]
                if isinstance(block, ThinkingContent):
                    if rc.get("text"):
                        append_thinking(block, rc["text"])
                        events.append(ThinkingDeltaEvent(contentIndex=at, delta=rc["text"], partial=out))
                    if rc.get("signature"):
                        block.thinkingSignature = (block.thinkingSignature or "") + rc["signature"]
            elif "toolUse" in delta and at is not None and isinstance(out.content[at], ToolCall):
                piece = delta["toolUse"].get("input") or ""
                self.json[at] = self.json.get(at, "") + piece
                out.content[at].arguments = parse_partial_json(self.json[at])
                events.append(ToolCallDeltaEvent(contentIndex=at, delta=piece, partial=out))
        elif "contentBlockStop" in item:
            stop_at = self.blocks.pop(item["contentBlockStop"].get("contentBlockIndex", 0), -1)
            if stop_at >= 0:
                events.append(self._end(stop_at))
        elif "messageStop" in item:
            self.stopped = True
            out.stopReason = _STOP.get(item["messageStop"].get("stopReason", ""), "error")
        elif "metadata" in item:
            usage = (item["metadata"] or {}).get("usage") or {}
            u = out.usage
            u.input = int(usage.get("inputTokens") or 0)
            u.output = int(usage.get("outputTokens") or 0)
            u.cacheRead = int(usage.get("cacheReadInputTokens") or 0)
            u.cacheWrite = int(usage.get("cacheWriteInputTokens") or 0)
            finish_usage(self.model, u)
        return events

    def close_open(self) -> list[Any]:
        return [self._end(pos) for pos in sorted(self.blocks.pop(i) for i in list(self.blocks))]


def _interrupt(events_stream: Any) -> None:
    """Stop a read that a worker thread is blocked in (an abort, a stall): shut the socket down, which wakes
    the blocked ``recv`` at once, then close the stream on another thread. Closing it here would wait: the
    reader holds the buffered socket file's lock until its read returns (a stalled server: for minutes)."""
    raw = getattr(events_stream, "_raw_stream", None)
    conn = getattr(raw, "_connection", None) or getattr(raw, "connection", None)
    sock = getattr(conn, "sock", None)
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
    threading.Thread(target=_close_quietly, args=(events_stream,), daemon=True).start()


def _close_quietly(events_stream: Any) -> None:
    try:
        events_stream.close()
    except Exception:  # noqa: BLE001 - already closed or broken; nothing to do
        pass


async def stream(model: Model, context: Context, options: StreamOptions) -> AsyncIterator[Any]:
    out = new_output(model)
    yield StartEvent(partial=out)
    events_stream: Any = None
    reading = False  # a worker thread is inside the event stream's next()
    error: str | None = None
    parser = _Parser(model, out)
    try:
        client = _client(model, options)
        request = await payload_hook(options, build_request(model, context, options))
        response = await asyncio.to_thread(client.converse_stream, **request)
        events_stream = response["stream"]
        it = iter(events_stream)
        while True:
            reading = True
            item = await asyncio.to_thread(next, it, _END)
            reading = False
            if item is _END:
                break
            for ev in parser.feed(cast("dict[str, Any]", item)):
                yield ev
        for ev in parser.close_open():
            yield ev
        if not parser.stopped:
            raise ConnectionError("Connection lost: the Bedrock stream ended without messageStop")
        if out.stopReason == "error":
            raise RuntimeError("Bedrock stopped the response with an unknown stop reason")
    except Exception as exc:  # noqa: BLE001 - every failure ends the stream with an error event
        error = _describe(exc)
    finally:
        if events_stream is not None:
            if reading:  # cancelled (an abort, a stall) while a worker thread waits on the socket
                _interrupt(events_stream)
            else:
                _close_quietly(events_stream)
    if error is not None:
        out.stopReason = "error"
        out.errorMessage = error
        yield ErrorEvent(reason="error", error=out)
        return
    yield DoneEvent(reason=out.stopReason, message=out)
