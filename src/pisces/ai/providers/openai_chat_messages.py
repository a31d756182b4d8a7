"""The Chat Completions ``messages`` of a context (pi's convertMessages for openai-completions), each message's
conversion and its JSON text kept between requests (``_memo``), so a long session's request costs Python
work for its new messages only, plus joining the texts of the others.

Guarantees: ``convert_messages`` returns what converting every message again would (the same dicts, in the
same order, equal whatever is cached); with ``texts`` it also fills in the JSON the direct transport would
send for them, in pieces that join with commas. The dicts it returns come from the cache unless ``fresh``: a caller
that hands them to code that may change them in place (an extension's ``before_provider_request``) asks for
fresh ones.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from operator import attrgetter
from typing import Any, Callable

from pisces.ai.providers._memo import encoded, grown
from pisces.ai.providers._shared import KEEP_ROUNDS, MISS, MessageMemo, Transformer, sanitize
from pisces.ai.providers._shared import sweep_transformed as _TRANSFORMED_SWEEP
from pisces.ai.tracked_list import Origin, Prefix, TrackedList, origin_of, same_start
from pisces.ai.types import (
    AssistantMessage,
    Context,
    ImageContent,
    Model,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)

_CONVERTED = MessageMemo()
BRIDGE = {"role": "assistant", "content": "I have processed the tool results."}


def image_url(block: ImageContent) -> str:
    return f"data:{block.mimeType};base64,{block.data}"


def js_json(value: Any) -> str:
    """``JSON.stringify``: compact, non-ASCII kept."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def normalize_call_id(model: Model) -> Callable[[str], str]:
    def normalize(call_id: str) -> str:
        if "|" in call_id:  # a Responses API id "call_id|item_id": keep the call id, as OpenAI allows it
            return re.sub(r"[^a-zA-Z0-9_-]", "_", call_id.split("|", 1)[0])[:40]
        if model.provider == "openai" and len(call_id) > 40:
            return call_id[:40]
        if model.provider == "mistral" and not re.fullmatch(r"[a-zA-Z0-9]{9}", call_id):
            return hashlib.sha1(call_id.encode()).hexdigest()[:9]  # Mistral takes 9 letters or digits only
        return call_id

    return normalize


def _user(msg: UserMessage, takes_images: bool) -> dict[str, Any] | None:
    if isinstance(msg.content, str):
        return {"role": "user", "content": sanitize(msg.content)}
    parts: list[dict[str, Any]] = []
    for item in msg.content:
        if isinstance(item, TextContent):
            parts.append({"type": "text", "text": sanitize(item.text)})
        elif takes_images:
            parts.append({"type": "image_url", "image_url": {"url": image_url(item)}})
    return {"role": "user", "content": parts} if parts else None


def _assistant(msg: AssistantMessage, compat: dict[str, Any], bridge: bool, reasoning: bool) -> dict[str, Any] | None:
    entry: dict[str, Any] = {"role": "assistant", "content": "" if bridge else None}
    texts = [b.text for b in msg.content if isinstance(b, TextContent) and b.text and b.text.strip()]
    if texts:
        entry["content"] = sanitize("".join(texts))
    thinking = [b for b in msg.content if isinstance(b, ThinkingContent) and b.thinking.strip()]
    if thinking and compat.get("requiresThinkingAsText"):
        entry["content"] = [{"type": "text", "text": "\n\n".join(sanitize(b.thinking) for b in thinking)},
                            *({"type": "text", "text": sanitize(t)} for t in texts)]
    elif thinking and isinstance(thinking[0].thinkingSignature, str) and thinking[0].thinkingSignature:
        entry[thinking[0].thinkingSignature] = sanitize("\n".join(b.thinking for b in thinking))
    calls = [b for b in msg.content if isinstance(b, ToolCall)]
    if calls:
        entry["tool_calls"] = [{"id": tc.id, "type": "function",
                                "function": {"name": tc.name, "arguments": js_json(tc.arguments)}}
                               for tc in calls]
        details = []
        for tc in calls:
            if isinstance(tc.thoughtSignature, str):
                try:
                    details.append(json.loads(tc.thoughtSignature))
                except ValueError:
                    pass
        if details:
            entry["reasoning_details"] = details
    if compat.get("requiresReasoningContentOnAssistantMessages") and reasoning:
        entry.setdefault("reasoning_content", "")
    if not entry["content"] and not calls:
        return None  # e.g. an aborted turn with nothing in it
    return entry


def _tool_result(res: ToolResultMessage, compat: dict[str, Any], takes_images: bool
                 ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    text = "\n".join(c.text for c in res.content if isinstance(c, TextContent))
    tool_msg: dict[str, Any] = {"role": "tool", "content": sanitize(text or "(see attached image)"),
                                "tool_call_id": res.toolCallId}
    if compat.get("requiresToolResultName") and res.toolName:
        tool_msg["name"] = res.toolName
    images = [{"type": "image_url", "image_url": {"url": image_url(c)}}
              for c in res.content if isinstance(c, ImageContent)] if takes_images else []
    return tool_msg, images


def _one(msg: Any, compat: dict[str, Any], bridge: bool, reasoning: bool, takes_images: bool, text: bool) -> Any:
    """A message's own part of the request: (dict or None, its JSON text when ``text``[, a tool result's
    images])."""
    if isinstance(msg, ToolResultMessage):
        tool_msg, images = _tool_result(msg, compat, takes_images)
        return tool_msg, encoded(tool_msg) if text else None, images
    param = _user(msg, takes_images) if isinstance(msg, UserMessage) else _assistant(msg, compat, bridge, reasoning)
    return param, encoded(param) if text and param is not None else None


class _Checkpoint:
    """A conversion up to and including a user message: its inputs (and the content lists of those that may
    still change in place, from ``checked`` on, with their lengths), the params they gave and the JSON of those
    in a few pieces that join with commas (``chunks``, see ``_memo.grown``: the next checkpoint adds to them
    without copying the whole history again), and the tool-call ids renamed before it. The inputs and params
    are the request's own lists, held as long as they are not changed (``Prefix``): a long session's
    checkpoint copies neither. The messages that may still change: the last ``RECENT``, and of a history's
    copy only those its history had not sealed when the copy was converted (``TrackedList.seal``: a session
    seals its history once a run's extension handlers are done; the next prompt's request then compares the
    content lists of none but the newest messages)."""

    __slots__ = ("key", "system", "inputs", "origin", "checked", "contents", "lens", "params", "chunks", "id_map",
                 "used")

    def __init__(self, key: tuple, system: Any, inputs: Prefix, params: Prefix,
                 chunks: tuple[bytes, ...], id_map: dict[str, str], origin: Origin | None = None) -> None:
        self.key = key
        self.system = system
        self.inputs = inputs
        self.origin = origin  # the history (and its edit count) the request's messages were a copy of
        final = 0  # how many of the first inputs were final (sealed) when they were converted
        if origin is not None and origin[0].edits == origin[1]:
            final = min(origin[0].final_items(), origin[2])
        self.checked = max(0, inputs.n - RECENT, min(final, inputs.n))
        self.contents = list(map(_CONTENT, inputs.since(self.checked)))
        self.lens = list(map(len, self.contents))
        self.params = params
        self.chunks = chunks
        self.id_map = id_map
        self.used = _round

    def fits(self, key: tuple, system: Any, messages: list[Any]) -> bool:
        """Whether ``messages`` starts with this checkpoint's inputs: equal messages, mostly the same objects
        (a list compares those by identity first; equal ones convert alike, and ``convert_to_llm`` makes a
        compaction summary's message again at every request), those from ``checked`` on with equal content
        lists as long as they were (a message replaced in place: an extension's ``message_end`` handler does
        so while the run goes on, and a run's handlers are done before the next prompt). When both requests'
        messages are copies of one history that only grew in between (``same_start``), its first messages
        are the same objects without comparing them. A checkpoint whose held lists were changed since (a
        payload hook's edit of the params) fits nothing."""
        n = self.inputs.n
        if (key != self.key or len(messages) < n or system != self.system or not self.inputs.held()
                or not self.params.held()):
            return False
        if same_start(messages, self.origin, n):
            recent = messages[self.checked:n]
        else:
            head = messages[:n]
            if not self.inputs.equals(head):
                return False
            recent = head[self.checked:]
        contents = list(map(_CONTENT, recent))
        return contents == self.contents and list(map(len, contents)) == self.lens


_CONTENT = attrgetter("content")
RECENT = 512  # at most the messages whose content lists a checkpoint compares (older ones are not changed in place)
_CHECKPOINTS: list[_Checkpoint] = []  # the latest last: about one per conversation of the process
MAX_CHECKPOINTS = 4
_round = 0  # requests converted so far
_LOCK = threading.Lock()


def _resume(key: tuple, system: Any, messages: list[Any]) -> _Checkpoint | None:
    global _round
    _round += 1
    for k in range(len(_CHECKPOINTS) - 1, -1, -1):
        cp = _CHECKPOINTS[k]
        try:
            fits = cp.fits(key, system, messages)
        except (AttributeError, TypeError):  # a message without a content list: start from the beginning
            fits = False
        if fits:
            _CHECKPOINTS.append(_CHECKPOINTS.pop(k))
            cp.used = _round
            return cp
    return None


def _forget_checkpoints() -> None:
    """At most ``MAX_CHECKPOINTS``, and none that no request used in the last ``KEEP_ROUNDS`` (what they
    hold, e.g. a context before its compaction, is not kept alive for long)."""
    for cp in _CHECKPOINTS[:]:
        if cp.used < _round - KEEP_ROUNDS:
            _CHECKPOINTS.remove(cp)
    del _CHECKPOINTS[:-MAX_CHECKPOINTS]


def convert_messages(model: Model, context: Context, compat: dict[str, Any], texts: list[bytes] | None = None,
                     fresh: bool = False) -> list[dict[str, Any]]:
    """The request's messages. Unless ``fresh``, a conversion starts again after the last user message of an
    earlier one whose messages this context starts with (``_Checkpoint``), and converts each other message
    once (``_CONVERTED``): the same dicts as converting everything again. ``texts`` gets pieces of JSON whose
    join by commas is the params' JSON (a piece per param, or a checkpoint's params in one)."""
    with _LOCK:  # the tables are the process's: requests of event loops in other threads take turns
        return _convert_messages(model, context, compat, texts, fresh)


def _convert_messages(model: Model, context: Context, compat: dict[str, Any], texts: list[bytes] | None,
                      fresh: bool) -> list[dict[str, Any]]:
    normalize = normalize_call_id(model)
    flags = ("image" in model.input, bool(compat.get("requiresAssistantAfterToolResult")), bool(model.reasoning),
             bool(compat.get("requiresThinkingAsText")),
             bool(compat.get("requiresReasoningContentOnAssistantMessages")),
             bool(compat.get("requiresToolResultName")), bool(compat["supportsDeveloperRole"]))
    key = (model.provider, model.api, model.id, flags)
    system = context.systemPrompt
    inputs = context.messages
    # the list a body keeps as it is (``JsonBody.keep_texts`` would otherwise copy it into one)
    params: list[dict[str, Any]] = TrackedList() if texts is not None else []
    pieces: list[bytes] | None = [] if texts is not None or not fresh else None  # joined by commas: their JSON
    cp = None if fresh else _resume(key, system, inputs)
    if cp is not None:
        cp.params.extend_into(params)
        if pieces is not None:
            pieces += cp.chunks
        start = cp.inputs.n
        t = Transformer(model, normalize, cp.id_map)
    else:
        start = 0
        t = Transformer(model, normalize)
        if isinstance(system, str) and system:
            role = "developer" if model.reasoning and compat["supportsDeveloperRole"] else "system"
            params.append({"role": role, "content": sanitize(system)})
            if pieces is not None:
                pieces.append(encoded(params[-1]))
    last_user = len(inputs) - 1  # where the next checkpoint goes: the last user message after ``start``
    while last_user >= start and not isinstance(inputs[last_user], UserMessage):
        last_user -= 1
    cut = -1
    if last_user >= start:
        t.feed(inputs[start:last_user + 1])
        cut = len(t.out)  # the user message is the last one fed
        id_map = dict(t.id_map)
        t.feed(inputs[last_user + 1:])
    else:
        t.feed(inputs[start:])
    cut_at = _convert(t.out, params, pieces, compat, flags, fresh, cut)
    if not fresh:
        _TRANSFORMED_SWEEP()
        _CONVERTED.sweep()
        if cut_at is not None and pieces is not None:
            if cp is not None:  # the new checkpoint goes further along the same conversation
                _CHECKPOINTS.remove(cp)
            try:
                kept = cp.chunks if cp is not None else ()
                _CHECKPOINTS.append(_Checkpoint(key, system, Prefix(inputs, last_user + 1),
                                                Prefix(params, cut_at[0]),
                                                grown(kept, pieces[len(kept):cut_at[1]]), id_map,
                                                origin_of(inputs)))
            except AttributeError:  # a message without a content list: no checkpoint
                pass
        _forget_checkpoints()
    if texts is not None and pieces is not None:
        texts += pieces
    return params


def _convert(messages: list[Any], params: list[dict[str, Any]], texts: list[bytes] | None, compat: dict[str, Any],
             flags: tuple, fresh: bool, cut: int) -> tuple[int, int] | None:
    """Append the params (and their texts) of ``messages``, transformed; returns the lengths of both lists
    right after the ``cut``-th message (1-based), if any."""
    takes_images, bridge, reasoning = flags[0], flags[1], flags[2]
    memo = _CONVERTED
    at: tuple[int, int] | None = None

    def add(param: dict[str, Any], text: bytes | None = None) -> None:
        params.append(param)
        if texts is not None:
            texts.append(encoded(param) if text is None else text)

    i = 0
    n = len(messages)
    while i < n:
        msg = messages[i]
        i += 1
        if bridge and isinstance(msg, UserMessage) and i >= 2 and isinstance(messages[i - 2], ToolResultMessage):
            add(dict(BRIDGE))
        if isinstance(msg, (UserMessage, AssistantMessage, ToolResultMessage)):
            group = [msg]
            if isinstance(msg, ToolResultMessage):
                while i < n and isinstance(following := messages[i], ToolResultMessage):
                    group.append(following)
                    i += 1
            images: list[dict[str, Any]] = []
            for m in group:
                done = MISS if fresh else memo.get(m, flags)
                if done is MISS:
                    done = _one(m, compat, bridge, reasoning, takes_images, not fresh)
                    if not fresh:
                        memo.put(m, flags, done)
                if done[0] is not None:
                    add(done[0], done[1])
                if len(done) > 2:
                    images.extend(done[2])
            if images:
                if bridge:
                    add(dict(BRIDGE))
                add({"role": "user",
                     "content": [{"type": "text", "text": "Attached image(s) from tool result:"}, *images]})
        if i == cut:
            at = (len(params), len(texts) if texts is not None else 0)
    return at
