"""Helpers shared by the provider modules (no SDK imports here)."""

from __future__ import annotations

import asyncio
import json
import math
import os
import re
import threading
import weakref
from typing import Any, Callable, Iterable

import msgspec

from pisces.ai.models import LOGIN_PROVIDERS, PROVIDER_ENV_KEYS, calculate_cost
from pisces.ai.providers._limits import ProviderLimitError
from pisces.ai.types import (
    AssistantMessage,
    Message,
    Model,
    StreamOptions,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
    now_ms,
)


async def payload_hook(options: StreamOptions, payload: Any) -> Any:
    """The request payload after ``options.onPayload`` (before_provider_request) saw it."""
    hook = options.onPayload
    if hook is None:
        return payload
    out = await hook(payload)
    return payload if out is None else out


def new_output(model: Model) -> AssistantMessage:
    """The empty assistant message a stream starts from (zero usage, stopReason ``stop``)."""
    return AssistantMessage(
        content=[], api=model.api, provider=model.provider, model=model.id, usage=Usage(), stopReason="stop",
        timestamp=now_ms(),
    )


def finish_usage(model: Model, usage: Usage) -> None:
    usage.totalTokens = usage.input + usage.output + usage.cacheRead + usage.cacheWrite
    calculate_cost(model, usage)


def _no_constant(name: str) -> None:
    """``NaN``, ``Infinity``, ``-Infinity``: not JSON. Read as null, which is what JSON.stringify writes for them
    (so pi's sessions and requests carry null), never as a float no JSON encoder will send."""
    return None


def append_text(block: Any, piece: str) -> None:
    """``block.text += piece`` in time proportional to ``piece``, not to the text so far.

    ``block.text += piece`` on a struct copies the whole text every time (the struct still holds it), so a
    reply of N characters in tiny deltas costs N^2/2 bytes of copying: 3 MB in 16-character deltas took 223 s.
    Dropping the struct's reference first leaves the local the string's only owner, and CPython then grows it
    in place (64 MB the same way: under a second)."""
    text = block.text
    block.text = ""
    text += piece
    block.text = text


def append_thinking(block: Any, piece: str) -> None:
    """``block.thinking += piece``, as :func:`append_text`."""
    text = block.thinking
    block.thinking = ""
    text += piece
    block.thinking = text


def parse_partial_json(text: str) -> dict[str, Any]:
    """Best-effort parse of streamed tool-call arguments; incomplete JSON is closed before parsing.
    Non-finite numbers become None: what is stored and what is sent again must be valid JSON."""
    if not text:
        return {}
    try:
        value = loads_finite(text)
        return value if isinstance(value, dict) else {}
    except (ValueError, RecursionError):
        pass
    closed = _close_json(text)
    if closed is not None:
        try:
            value = loads_finite(closed)
            return value if isinstance(value, dict) else {}
        except (ValueError, RecursionError):
            pass
    return {}


def loads_finite(text: str | bytes) -> Any:
    """``json.loads`` (what JSON.parse accepts and msgspec does not, e.g. lone surrogates), with non-finite
    numbers read as None."""
    return json.loads(text, parse_constant=_no_constant)


def has_non_finite(value: Any) -> bool:
    """Whether a JSON-like value holds a NaN or an infinity anywhere (iterative: any depth)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, float):
            if not math.isfinite(item):
                return True
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return False


def finite_json(value: Any) -> Any:
    """``value`` itself when it is valid JSON; else a copy with every NaN/infinity as None (JSON.stringify's null)."""
    if not has_non_finite(value):
        return value
    return msgspec.json.decode(msgspec.json.encode(value))  # msgspec writes non-finite floats as null


def _close_json(text: str) -> str | None:
    stack: list[str] = []
    in_str = False
    esc = False
    for ch in text:
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
            continue
        if ch == '"':
            in_str = True
        elif ch in "{[":
            stack.append("}" if ch == "{" else "]")
        elif ch in "}]":
            if stack:
                stack.pop()
    out = text
    if esc:
        out = out[:-1]
    if in_str:
        out += '"'
    stripped = out.rstrip()
    if stripped.endswith((",", ":")):
        stripped = stripped[:-1]
        if stripped.endswith(":"):
            return None
    return stripped + "".join(reversed(stack))


def format_http_error(status: int | None, message: str | None) -> str:
    """``<status> <provider message>`` as the OpenAI JS SDK formats it (pi shows this text)."""
    msg = (message or "").strip()
    if status is None:
        return msg or "Request failed"
    return f"{status} {msg}".strip() if msg else f"{status} status code (no body)"


# ---------------------------------------------------------------------------------------------
# Helpers every SDK provider uses
# ---------------------------------------------------------------------------------------------
_SURROGATES = re.compile("[\ud800-\udfff]")


def sanitize(text: str) -> str:
    """Drop unpaired UTF-16 surrogates (they cannot be encoded as UTF-8), as pi's sanitizeSurrogates."""
    return _SURROGATES.sub("", text) if _SURROGATES.search(text) else text


def resolve_api_key(model: Model, options: StreamOptions) -> str | None:
    """The key given in the options, else the provider's usual environment variable."""
    if options.apiKey:
        return options.apiKey
    for name in PROVIDER_ENV_KEYS.get(model.provider, ()):
        value = os.environ.get(name)
        if value:
            return value
    return None


def missing_key_message(provider: str) -> str:
    agent_dir = os.environ.get("PISCES_CODING_AGENT_DIR") or os.environ.get("PI_CODING_AGENT_DIR") \
        or "~/.pisces/agent"
    auth = os.path.join(agent_dir, "auth.json")
    names = PROVIDER_ENV_KEYS.get(provider, ())
    login = f", or run `pisces login {provider}`" if provider in LOGIN_PROVIDERS else ""
    if names:
        return f"No API key for provider {provider}: set {names[0]} or add it to {auth}{login}"
    if login:
        return f"No credentials for provider {provider}: run `pisces login {provider}`"
    return (f"No API key for provider {provider}: add it to {auth} "
            f"or give the provider an apiKey in {os.path.join(agent_dir, 'models.json')}")


_CLIENTS: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple, Any]]" = weakref.WeakKeyDictionary()


def cached_client(key: tuple, factory: Callable[[], Any]) -> Any:
    """One SDK client per event loop and configuration: building one loads the TLS trust store (~20 ms)."""
    loop = asyncio.get_running_loop()
    per_loop = _CLIENTS.get(loop)
    if per_loop is None:
        per_loop = _CLIENTS[loop] = {}
    client = per_loop.get(key)
    if client is None:
        if len(per_loop) >= 16:
            per_loop.pop(next(iter(per_loop)))
        client = per_loop[key] = factory()
    return client


def normalize_tool_call_id(tool_id: str) -> str:
    """Anthropic wants ids matching ``^[a-zA-Z0-9_-]+$``, at most 64 characters."""
    return re.sub(r"[^a-zA-Z0-9_-]", "_", tool_id)[:64]


def _no_result(tc: ToolCall) -> ToolResultMessage:
    return ToolResultMessage(toolCallId=tc.id, toolName=tc.name, content=[TextContent(text="No result provided")],
                             isError=True)


MISS: Any = object()
KEEP_ROUNDS = 16


class MessageMemo:
    """What a message converts to for a provider, kept between requests: id(message) -> [message, key,
    content, len(content), value, last round used].

    Every request of a session carries the whole history. Converting each message again at every request
    (pi's transformMessages, the provider's own shape, then JSON) made pisces' own work per request grow with
    the session: at 1,000 prompts about 45 ms of Python a request. A message is complete when it joins the
    context and nothing changes it in place afterwards (the loop appends finished messages; compaction, a
    branch switch, an extension's ``context`` handler hand over other message objects; an extension's
    ``message_end`` handler replaces its content list), so its conversion is kept against the object itself.

    Guarantees:

    - a hit only for the very same message object (the entry holds a reference to it, so its id cannot be
      reused while the entry lives), under an equal key (what the conversion depends on besides the message:
      the model, the provider's flags), with the same ``content`` object of the same length (a list replaced
      or appended to is converted again);
    - bounded: after each request (``sweep``), once the table holds more than twice the entries that request
      used plus ``margin``, the entries no request of the last ``KEEP_ROUNDS`` used are dropped, and if more
      than four times remain, all but that request's: at most ``4 * used + margin`` entries stay. A session's
      table follows its context (what compaction or a branch switch left behind goes), and the sessions of one
      process (subagents) share it without evicting each other's.
    """

    __slots__ = ("_table", "_round", "_used", "margin", "_lock")

    def __init__(self, margin: int = 512) -> None:
        self._table: dict[int, list[Any]] = {}
        self._lock = threading.Lock()  # put and sweep: requests of event loops in other threads
        self._round = 0
        self._used = 0
        self.margin = margin

    def __len__(self) -> int:
        return len(self._table)

    def get(self, msg: Any, key: Any) -> Any:
        """The value kept for ``msg`` under ``key``, or ``MISS``."""
        entry = self._table.get(id(msg))
        if entry is None or entry[0] is not msg or entry[1] != key:
            return MISS
        content = msg.content
        if entry[2] is not content or entry[3] != len(content):
            return MISS
        entry[5] = self._round
        self._used += 1
        return entry[4]

    def put(self, msg: Any, key: Any, value: Any) -> Any:
        content = msg.content
        with self._lock:
            self._table[id(msg)] = [msg, key, content, len(content), value, self._round]
            self._used += 1
        return value

    def sweep(self) -> None:
        """End of a request: drop what was not used lately once the table outgrows what requests use."""
        with self._lock:
            used, self._used = self._used, 0
            current = self._round
            self._round += 1
            if len(self._table) > 2 * used + self.margin:
                table = {k: e for k, e in self._table.items() if e[5] >= current - KEEP_ROUNDS}
                if len(table) > 4 * used + self.margin:  # many other contexts lately: this request's only
                    table = {k: e for k, e in table.items() if e[5] == current}
                self._table = table



_TRANSFORMED = MessageMemo()


def transform_messages(messages: list[Message], model: Model,
                       normalize_id: Callable[[str], str] | None = None) -> list[Message]:
    """pi's transformMessages: make a history safe to replay to ``model``.

    - errored and aborted assistant messages are dropped;
    - another model's thinking becomes plain text (redacted thinking is dropped), its tool-call ids are
      normalised with ``normalize_id`` (tool results follow), and Gemini thought signatures are removed;
    - a tool call left without a result gets a synthetic error result ("No result provided").

    An assistant message's transformation is kept between requests (``_memo``: the same object, model and
    ``normalize_id``, whose result may depend on the model only), so the copies it returns are the same
    objects from one request to the next.
    """
    t = Transformer(model, normalize_id)
    t.feed(messages)
    _TRANSFORMED.sweep()
    return t.out


def sweep_transformed() -> None:
    """The end of a request that used ``Transformer`` directly (see ``MessageMemo.sweep``)."""
    _TRANSFORMED.sweep()


class Transformer:
    """``transform_messages`` one slice of the history after another. Right after a user message nothing
    is pending, so a transformation can start there again from ``id_map`` alone (the tool-call ids renamed
    before it): ``Transformer(model, normalize_id, id_map)`` then feeds the rest."""

    __slots__ = ("model", "normalize_id", "key", "id_map", "out", "pending", "answered")

    def __init__(self, model: Model, normalize_id: Callable[[str], str] | None = None,
                 id_map: dict[str, str] | None = None) -> None:
        self.model = model
        self.normalize_id = normalize_id
        self.key = (model.provider, model.api, model.id, getattr(normalize_id, "__code__", normalize_id))
        self.id_map: dict[str, str] = dict(id_map) if id_map else {}
        self.out: list[Message] = []
        self.pending: tuple[ToolCall, ...] = ()
        self.answered: set[str] = set()

    def _flush_orphans(self) -> None:
        for tc in self.pending:
            if tc.id not in self.answered:
                self.out.append(_no_result(tc))
        self.pending = ()
        self.answered.clear()

    def feed(self, messages: Iterable[Message]) -> None:
        out = self.out
        for msg in messages:
            if isinstance(msg, UserMessage):
                self._flush_orphans()
                out.append(msg)
            elif isinstance(msg, ToolResultMessage):
                new_id = self.id_map.get(msg.toolCallId)
                if new_id and new_id != msg.toolCallId:
                    msg = msgspec.structs.replace(msg, toolCallId=new_id)
                self.answered.add(msg.toolCallId)
                out.append(msg)
            elif isinstance(msg, AssistantMessage):
                self._flush_orphans()
                done = _TRANSFORMED.get(msg, self.key)
                if done is MISS:
                    done = _TRANSFORMED.put(msg, self.key, _transform_assistant(msg, self.model, self.normalize_id))
                sent, renamed, self.pending = done
                if renamed:
                    self.id_map.update(renamed)
                if sent is not None:
                    out.append(sent)
            else:
                out.append(msg)


def _transform_assistant(msg: AssistantMessage, model: Model, normalize_id: Callable[[str], str] | None
                         ) -> tuple[AssistantMessage | None, tuple[tuple[str, str], ...], tuple[ToolCall, ...]]:
    """(the message as sent, or None when it is dropped; the tool-call ids it renames; its tool calls)."""
    if msg.stopReason in ("error", "aborted"):
        return None, (), ()
    same = msg.provider == model.provider and msg.api == model.api and msg.model == model.id
    content: list[Any] = []
    renamed: list[tuple[str, str]] = []
    for block in msg.content:
        if isinstance(block, ThinkingContent):
            if block.redacted is True:
                if same:
                    content.append(block)
            elif same and block.thinkingSignature:
                content.append(block)
            elif not block.thinking or not block.thinking.strip():
                continue
            elif same:
                content.append(block)
            else:
                content.append(TextContent(text=block.thinking))
        elif isinstance(block, TextContent):
            content.append(block if same else TextContent(text=block.text))
        elif isinstance(block, ToolCall):
            tc = block
            args = finite_json(tc.arguments)  # e.g. a history stored before NaN was read as null
            if args is not tc.arguments:
                tc = msgspec.structs.replace(tc, arguments=args)
            if not same and isinstance(tc.thoughtSignature, str):
                tc = ToolCall(id=tc.id, name=tc.name, arguments=tc.arguments)
            if not same and normalize_id is not None:
                new_id = normalize_id(tc.id)
                if new_id != tc.id:
                    renamed.append((tc.id, new_id))
                    tc = msgspec.structs.replace(tc, id=new_id)
            content.append(tc)
    calls = tuple(b for b in content if isinstance(b, ToolCall))
    return msgspec.structs.replace(msg, content=content), tuple(renamed), calls


def describe_transport_error(exc: BaseException) -> str | None:
    """A sentence for an httpx/httpcore error raised while reading a response body, else None."""
    if isinstance(exc, ProviderLimitError):  # the reply broke a bound: its text says which
        return str(exc)
    module = type(exc).__module__ or ""
    if module.startswith(("httpx", "httpcore", "h11", "aiohttp")) or isinstance(exc, (ConnectionError, EOFError)):
        detail = str(exc).strip() or type(exc).__name__
        return f"Connection lost while streaming the response: {detail}"
    return None


# ---------------------------------------------------------------------------------------------
# Request
# ---------------------------------------------------------------------------------------------


def with_retry_after(message: str, exc: BaseException) -> str:
    """Append the server's Retry-After (seconds) to an HTTP error's text, so that pisces' own retry can
    honour it (see pisces.core.session.retry.retry_after_ms)."""
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    value = headers.get("retry-after") if headers is not None else None
    if not value:
        return message
    try:
        seconds = float(value)
    except ValueError:
        return message  # an HTTP date: left to the SDK's own retries
    return f"{message} (retry-after: {seconds:g}s)"
