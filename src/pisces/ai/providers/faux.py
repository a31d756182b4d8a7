"""``faux``: a scripted model built in, usable with no API key.

It replies from a queue of scripted responses. A response is a dict (the JSON script format) or a
function ``f(context, options) -> dict`` called when the request arrives. The dict form:

    {"content": [                                   # blocks in order; or use the shortcuts below
        {"type": "thinking", "thinking": "..."},
        {"type": "text", "text": "..."},
        {"type": "toolCall", "name": "bash", "arguments": {"command": "ls"}, "id": "optional"}],
     "text": "...", "thinking": "...",              # shortcuts: thinking first, then text
     "toolCalls": [{"name": ..., "arguments": {...}}],
     "stopReason": "stop" | "length",               # default: toolUse when there are tool calls
     "error": "message",                            # end with stopReason "error" after the content
     "usage": {"input": N, "output": N, "cacheRead": N, "cacheWrite": N},  # default: estimated
     "chunkSize": 8,                                # characters per streamed delta
     "delayMs": 0}                                  # pause between chunks

An empty queue ends the request with an error message, never a hang. A script file is a JSON list of
responses, or ``{"responses": [...], "loop": true}`` to cycle through them forever.

Subagents (the ``task`` tool) can be scripted apart from the main session, so that parallel subagents do not
race for one queue:

    {"responses": [...],                            # the main session
     "subagents": {"AddTests": [...],               # by task id as the model wrote it ("0-AddTests" works too)
                   "AddTests-repair": [...],        # the verification repair subagent of that task
                   "explore": [...]}}               # by agent name

A subagent's request names itself (``StreamOptions.requester``: allocated id, task id, agent name); the first
of those names present under ``subagents`` selects its queue. A subagent matching no name, and any script
without ``subagents``, takes the next response of the main queue.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections import deque
from typing import Any, AsyncIterator, Callable, Union

from pisces.ai.providers._shared import append_text, append_thinking, finish_usage, new_output
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

FauxResponse = Union[dict, Callable[[Context, StreamOptions], dict]]


class FauxScript:
    """The queue of scripted responses, plus every request seen (for tests)."""

    def __init__(self) -> None:
        self.queue: deque[FauxResponse] = deque()
        self.loop_responses: list[FauxResponse] | None = None
        self._loop_index = 0
        self.requests: list[Context] = []
        self.requesters: list[tuple[str, ...]] = []  # parallel to ``requests``: who asked (empty: main)
        # Contexts are kept for in-process tests; a process serving a script file has nobody to read them,
        # and a long session would keep every request's message list (memory quadratic in its length).
        self.record_requests = True
        self.request_count = 0
        self.subagents: dict[str, deque[FauxResponse]] = {}
        self.default: FauxResponse | None = None
        self.source: str | None = None  # the script file loaded, if any

    def reset(self) -> None:
        self.source = None
        self.queue.clear()
        self.subagents.clear()
        self.requesters.clear()
        self.loop_responses = None
        self._loop_index = 0
        self.requests.clear()
        self.record_requests = True
        self.request_count = 0
        self.default = None

    def enqueue(self, *responses: FauxResponse) -> None:
        self.queue.extend(responses)

    def enqueue_for(self, name: str, *responses: FauxResponse) -> None:
        """Script the subagent called ``name`` (a task id or an agent name)."""
        self.subagents.setdefault(name, deque()).extend(responses)

    def set_loop(self, responses: list[FauxResponse]) -> None:
        self.loop_responses = list(responses)
        self._loop_index = 0

    def subagent_queue(self, requester: tuple[str, ...]) -> tuple[str, deque[FauxResponse]] | None:
        """The scripted queue of the first of ``requester``'s names that has one."""
        for name in requester:
            if name in self.subagents:
                return name, self.subagents[name]
        return None

    def next(self, requester: tuple[str, ...] = ()) -> FauxResponse | None:
        keyed = self.subagent_queue(requester) if requester else None
        if keyed is not None:
            return keyed[1].popleft() if keyed[1] else None
        if self.queue:
            return self.queue.popleft()
        if self.loop_responses:
            r = self.loop_responses[self._loop_index % len(self.loop_responses)]
            self._loop_index += 1
            return r
        return self.default

    def load_file(self, path: str) -> None:
        """Load a JSON script file. Raises ValueError with a clear message when it is malformed."""
        try:
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
        except OSError as exc:
            raise ValueError(f"Cannot read faux script {path}: {exc.strerror or exc}") from None
        except json.JSONDecodeError as exc:
            raise ValueError(f"Faux script {path} is not valid JSON: {exc}") from None
        loop = False
        subagents: Any = {}
        if isinstance(data, dict):
            loop = bool(data.get("loop"))
            subagents = data.get("subagents", {})
            data = data.get("responses", [] if "subagents" in data else None)
            if not isinstance(subagents, dict) or not all(
                    isinstance(v, list) and all(isinstance(r, dict) for r in v) for v in subagents.values()):
                raise ValueError(f"Faux script {path}: 'subagents' must map names to lists of response objects")
        if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
            raise ValueError(f"Faux script {path} must be a list of response objects "
                             "(or {\"responses\": [...], \"loop\": true})")
        for i, r in enumerate(data):
            _validate(r, f"{path}: response {i}")
        for name, responses in subagents.items():
            for i, r in enumerate(responses):
                _validate(r, f"{path}: subagent {name} response {i}")
            self.enqueue_for(name, *responses)
        if loop:
            self.set_loop(data)
        else:
            self.enqueue(*data)
        self.source = path
        self.record_requests = False


SCRIPT = FauxScript()


def _validate(r: dict, where: str) -> None:
    for block in r.get("content", []):
        if not isinstance(block, dict) or block.get("type") not in ("text", "thinking", "toolCall"):
            raise ValueError(f"{where}: content blocks must be objects of type text, thinking or toolCall")
    for tc in r.get("toolCalls", []):
        if not isinstance(tc, dict) or not isinstance(tc.get("name"), str):
            raise ValueError(f"{where}: every tool call needs a 'name'")


def _blocks(r: dict) -> list[dict]:
    if "content" in r:
        return list(r["content"])
    blocks: list[dict] = []
    if r.get("thinking"):
        blocks.append({"type": "thinking", "thinking": r["thinking"]})
    if r.get("text"):
        blocks.append({"type": "text", "text": r["text"]})
    for tc in r.get("toolCalls", []):
        blocks.append({"type": "toolCall", **tc})
    return blocks


def _message_chars(m: Any) -> int:
    n = 0
    if isinstance(m, (UserMessage, ToolResultMessage)):
        content = m.content
        if isinstance(content, str):
            return len(content)
        for b in content:
            n += len(b.text) if isinstance(b, TextContent) else 4800 if isinstance(b, ImageContent) else 0
        return n
    for part in m.content:
        if isinstance(part, TextContent):
            n += len(part.text)
        elif isinstance(part, ThinkingContent):
            n += len(part.thinking)
        elif isinstance(part, ToolCall):
            n += len(part.name) + len(json.dumps(part.arguments))
    return n


# Each message's size, counted once: a request's context is the previous one plus a few messages, so a long
# session would otherwise recount every message at every request. Keyed by identity (the message is kept with
# its count, so an id is never reused while cached); a message of the context is complete, never grown again.
_CHARS: dict[int, tuple[Any, int]] = {}
_CHARS_MAX = 200_000


def _context_chars(context: Context) -> int:
    n = len(context.systemPrompt) if isinstance(context.systemPrompt, str) else 0
    messages = context.messages
    last, total = _LAST
    k = len(last)
    if k and len(messages) >= k and messages[:k] == last:  # the previous context and a few more messages
        chars = total + _messages_chars(messages[k:])
    else:
        chars = _messages_chars(messages)
    _LAST[:] = [list(messages), chars]
    return n + chars


# The last context's messages and their size: the next request's context starts with them (a list compares
# the same objects by identity first, so checking that costs no walk in Python).
_LAST: list[Any] = [[], 0]


def _messages_chars(messages: list[Any]) -> int:
    n = 0
    cache = _CHARS
    for m in messages:
        hit = cache.get(id(m))
        if hit is not None and hit[0] is m:
            n += hit[1]
            continue
        count = _message_chars(m)
        if len(cache) >= _CHARS_MAX:
            cache.clear()
        cache[id(m)] = (m, count)
        n += count
    return n


def _chunks(text: str, size: int) -> list[str]:
    if not text:
        return [""]
    return [text[i:i + size] for i in range(0, len(text), size)]


_call_counter = [0]


async def stream(model: Model, context: Context, options: StreamOptions) -> AsyncIterator[Any]:
    requester = tuple(getattr(options, "requester", ()) or ())
    SCRIPT.request_count += 1
    if SCRIPT.record_requests:
        SCRIPT.requests.append(context)
        SCRIPT.requesters.append(requester)
    out = new_output(model)
    out.responseId = f"faux-{SCRIPT.request_count}"
    yield StartEvent(partial=out)
    keyed = SCRIPT.subagent_queue(requester) if requester else None
    response = SCRIPT.next(requester)
    if response is None:
        out.stopReason = "error"
        whose = f" for subagent '{keyed[0]}'" if keyed is not None else ""
        out.errorMessage = (f"faux: no scripted response left{whose} (request {SCRIPT.request_count}); "
                            "queue one with pisces.ai.providers.faux.SCRIPT.enqueue() or --faux-script FILE")
        yield ErrorEvent(reason="error", error=out)
        return
    if callable(response):
        response = response(context, options)
    size = max(1, int(response.get("chunkSize", 8)))
    delay = float(response.get("delayMs", 0)) / 1000

    async def pause() -> None:
        await asyncio.sleep(delay) if delay > 0 else await asyncio.sleep(0)

    output_chars = 0
    for block in _blocks(response):
        idx = len(out.content)
        kind = block["type"]
        if kind == "text":
            text = str(block.get("text", ""))
            out.content.append(TextContent(text=""))
            yield TextStartEvent(contentIndex=idx, partial=out)
            for piece in _chunks(text, size):
                await pause()
                append_text(out.content[idx], piece)
                yield TextDeltaEvent(contentIndex=idx, delta=piece, partial=out)
            output_chars += len(text)
            yield TextEndEvent(contentIndex=idx, content=text, partial=out)
        elif kind == "thinking":
            text = str(block.get("thinking", ""))
            out.content.append(ThinkingContent(thinking="", thinkingSignature=block.get("signature", "faux")))
            yield ThinkingStartEvent(contentIndex=idx, partial=out)
            for piece in _chunks(text, size):
                await pause()
                append_thinking(out.content[idx], piece)
                yield ThinkingDeltaEvent(contentIndex=idx, delta=piece, partial=out)
            output_chars += len(text)
            yield ThinkingEndEvent(contentIndex=idx, content=text, partial=out)
        else:
            _call_counter[0] += 1
            tc = ToolCall(id=str(block.get("id") or f"faux_call_{_call_counter[0]}"), name=block["name"],
                          arguments={})
            out.content.append(tc)
            yield ToolCallStartEvent(contentIndex=idx, partial=out)
            raw_args = block.get("arguments", {})
            args_json = raw_args if isinstance(raw_args, str) else json.dumps(raw_args)
            for piece in _chunks(args_json, size):
                await pause()
                yield ToolCallDeltaEvent(contentIndex=idx, delta=piece, partial=out)
            try:
                parsed = json.loads(args_json) if args_json else {}
            except ValueError:
                parsed = {}
            tc.arguments = parsed if isinstance(parsed, dict) else {}
            output_chars += len(args_json)
            yield ToolCallEndEvent(contentIndex=idx, toolCall=tc, partial=out)

    usage = response.get("usage") or {}
    out.usage.input = int(usage.get("input", (_context_chars(context) + 3) // 4))
    out.usage.output = int(usage.get("output", (output_chars + 3) // 4))
    out.usage.cacheRead = int(usage.get("cacheRead", 0))
    out.usage.cacheWrite = int(usage.get("cacheWrite", 0))
    finish_usage(model, out.usage)
    if response.get("error"):
        out.stopReason = "error"
        out.errorMessage = str(response["error"])
        yield ErrorEvent(reason="error", error=out)
        return
    has_calls = any(isinstance(b, ToolCall) for b in out.content)
    out.stopReason = response.get("stopReason") or ("toolUse" if has_calls else "stop")
    yield DoneEvent(reason=out.stopReason, message=out)


# ---------------------------------------------------------------------------------------------
# The built-in demo: looks around the working directory with the bash tool, then reports.
# ---------------------------------------------------------------------------------------------
def demo_response(context: Context, options: StreamOptions) -> dict:
    last = context.messages[-1] if context.messages else None
    if isinstance(last, ToolResultMessage):
        text = "".join(b.text for b in last.content if isinstance(b, TextContent)).strip()
        lines = [ln for ln in text.splitlines() if ln.strip()]
        shown = "\n".join(f"- {ln}" for ln in lines[:20])
        more = f"\n- ... and {len(lines) - 20} more" if len(lines) > 20 else ""
        return {"text": f"I ran `{_demo_command()}` and found {len(lines)} entries here:\n{shown}{more}\n\n"
                        "(This reply comes from pisces' built-in scripted `faux` model: no API key was used.)"}
    return {"text": "Let me look at the files in the working directory.",
            "toolCalls": [{"name": "bash", "arguments": {"command": _demo_command()}}]}


def _demo_command() -> str:
    return "ls -1A" if os.name != "nt" else "dir /b"


def use_demo() -> None:
    """Answer every request with the demo (used when ``--provider faux`` has no script)."""
    SCRIPT.default = demo_response
