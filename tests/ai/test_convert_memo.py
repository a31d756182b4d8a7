"""A long session's request conversion kept between requests (``openai_chat_messages``,
``_shared.MessageMemo``): whatever was kept, the Chat Completions body equals a conversion of fresh copies of
the same messages, byte for byte once encoded, and the tables stay bounded."""

from __future__ import annotations

import json
import random

import msgspec

from pisces.ai.providers import _shared
from pisces.ai.providers._memo import JsonBody, encoded, grown
from pisces.ai.providers._shared import MISS, MessageMemo
from pisces.ai.providers.openai_chat_messages import _CHECKPOINTS, _CONVERTED, convert_messages
from pisces.ai.providers.openai_compat import get_compat
from pisces.ai.providers.openai_completions import build_body
from pisces.ai.tracked_list import TrackedList
from pisces.ai.types import (
    AssistantMessage,
    Context,
    ImageContent,
    Model,
    StreamOptions,
    TextContent,
    ThinkingContent,
    Tool,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)

MODELS = [
    Model(id="scripted-model", name="s", api="openai-completions", provider="scripted", input=["text", "image"]),
    Model(id="mistral-large", name="m", api="openai-completions", provider="mistral", input=["text"],
          baseUrl="https://api.mistral.ai/v1"),
    Model(id="deepseek-r", name="d", api="openai-completions", provider="deepseek", reasoning=True,
          baseUrl="https://api.deepseek.com/v1"),
    Model(id="gpt-x", name="g", api="openai-completions", provider="openai", input=["text", "image"], reasoning=True),
]
ORIGINS = [("scripted", "openai-completions", "scripted-model"), ("anthropic", "anthropic-messages", "claude"),
           ("openai", "openai-responses", "gpt-x")]
WEIRD = ["plain", "ünïcödé ✓", "tab\there\nnew", "\x00\x1f ctl", "quote \" back \\", "\u2028 sep", "  ", ""]


def _call(rng: random.Random, n: int) -> ToolCall:
    call_id = rng.choice([f"call_{n}", f"call_{n}|fc_item_{n}", "x" * 50 + str(n), f"toolu_{n}"])
    args = rng.choice([{"path": "notes.txt"}, {"n": 1.5, "big": 10 ** 20, "nan": float("nan")}, {},
                       {"s": rng.choice(WEIRD), "list": [1, None, True]}])
    sig = rng.choice([None, None, json.dumps({"type": "reasoning.encrypted", "data": "x"}), "not json"])
    return ToolCall(id=call_id, name=rng.choice(["read", "bash"]), arguments=args,
                    **({"thoughtSignature": sig} if sig else {}))


def _history(rng: random.Random, length: int) -> list:
    out: list = []
    calls: list[ToolCall] = []
    for n in range(length):
        kind = rng.random()
        if kind < 0.25:
            content = rng.choice([rng.choice(WEIRD), [TextContent(text=rng.choice(WEIRD))],
                                  [TextContent(text="look"), ImageContent(data="AAAA", mimeType="image/png")],
                                  [ImageContent(data="BBBB", mimeType="image/png")]])
            out.append(UserMessage(content=content, timestamp=n))
        elif kind < 0.6:
            provider, api, model = rng.choice(ORIGINS)
            blocks: list = []
            if rng.random() < 0.4:
                blocks.append(ThinkingContent(thinking=rng.choice(["hmm", " ", "deep"]),
                                              thinkingSignature=rng.choice(["", "reasoning_content", "sig"]),
                                              **({"redacted": True} if rng.random() < 0.1 else {})))
            if rng.random() < 0.7:
                blocks.append(TextContent(text=rng.choice(WEIRD)))
            calls = [_call(rng, n * 10 + k) for k in range(rng.choice([0, 0, 1, 2]))]
            blocks += calls
            out.append(AssistantMessage(content=blocks, api=api, provider=provider, model=model, usage=Usage(),
                                        stopReason=rng.choice(["stop", "toolUse", "toolUse", "error", "aborted"]),
                                        timestamp=n))
        else:
            call_id = calls.pop(0).id if calls and rng.random() < 0.8 else f"orphan_{n}"
            content = [TextContent(text=rng.choice(WEIRD))]
            if rng.random() < 0.2:
                content.append(ImageContent(data="CCCC", mimeType="image/jpeg"))
            out.append(ToolResultMessage(toolCallId=call_id, toolName="read", content=content, isError=False,
                                         timestamp=n))
    return out


def _copies(messages: list) -> list:
    """New objects equal to ``messages`` (nothing kept for them)."""
    return [msgspec.json.decode(msgspec.json.encode(m), type=type(m)) if not _has_nan(m)
            else msgspec.structs.replace(m, content=[msgspec.structs.replace(b) for b in m.content])
            for m in messages]


def _has_nan(m: object) -> bool:
    return any(isinstance(b, ToolCall) and "nan" in b.arguments for b in getattr(m, "content", []) or [])


def _ctx(messages: list) -> Context:
    return Context(systemPrompt="You are a test.", messages=messages,
                   tools=[Tool(name="read", description="Read", parameters={"type": "object"})])


def test_kept_conversions_equal_fresh_ones_request_after_request():
    rng = random.Random(31)
    for _session in range(12):
        history = _history(rng, 80)
        models = [rng.choice(MODELS) for _ in range(3)]
        for end in range(0, len(history) + 1, 7):  # a session growing request after request
            for model in models:  # a model switch converts the same objects under another key
                compat = get_compat(model)
                texts: list[bytes] = []
                kept = convert_messages(model, _ctx(history[:end]), compat, texts)
                again = convert_messages(model, _ctx(history[:end]), compat)
                fresh = convert_messages(model, _ctx(_copies(history[:end])), compat, fresh=True)
                assert kept == fresh == again
                assert b",".join(texts) == b",".join(encoded(p) for p in fresh)
                body = build_body(model, _ctx(history[:end]), StreamOptions())
                assert isinstance(body, JsonBody)
                plain = json.dumps(dict(body), ensure_ascii=False, separators=(",", ":"), allow_nan=True)
                assert body.to_bytes() == plain.encode("utf-8")


def test_grown_joins_to_the_same_text_in_pieces_that_halve():
    rng = random.Random(5)
    for _run in range(20):
        chunks: tuple[bytes, ...] = ()
        every: list[bytes] = []
        for _step in range(rng.randrange(1, 300)):
            more = [rng.choice([b"{}", b'{"a":"' + b"x" * rng.randrange(0, 400) + b'"}', b"[1,2]"])
                    for _ in range(rng.choice([0, 1, 3, 40]))]
            chunks = grown(chunks, more)
            every += more
            assert b",".join(chunks) == b",".join(every)
            sizes = [len(c) for c in chunks]
            assert all(sizes[i] >= 2 * sizes[i + 1] for i in range(len(sizes) - 1)), sizes  # each twice the next
            assert len(chunks) <= max(1, sum(sizes) // 2 + 1).bit_length()  # so: about log2 of the text
    assert grown((b"a",), []) == (b"a",) and grown((), []) == ()


def test_a_long_sessions_checkpoint_keeps_its_json_in_few_pieces():
    model = MODELS[0]
    compat = get_compat(model)
    history = _history(random.Random(8), 900)
    for end in range(1, len(history) + 1, 3):  # a request every three messages, as a session grows
        texts: list[bytes] = []
        kept = convert_messages(model, _ctx(history[:end]), compat, texts)
        assert b",".join(texts) == b",".join(encoded(p) for p in kept)
    assert kept == convert_messages(model, _ctx(_copies(history[:end])), compat, fresh=True)
    latest = _CHECKPOINTS[-1]
    held = latest.params.items[:latest.params.n]
    assert len(held) > 500 and 1 < len(latest.chunks) <= len(held).bit_length()
    assert b",".join(latest.chunks) == b",".join(encoded(p) for p in held)


def test_a_checkpoint_holds_the_requests_own_lists_and_drops_them_once_changed():
    model = MODELS[0]
    compat = get_compat(model)
    history = TrackedList(_history(random.Random(12), 300))
    _CHECKPOINTS.clear()

    def request(end: int) -> list:
        texts: list[bytes] = []
        messages = history.copy()
        del messages[end:]
        kept = convert_messages(model, _ctx(messages), compat, texts)
        assert b",".join(texts) == b",".join(encoded(p) for p in kept)
        assert kept == convert_messages(model, _ctx(_copies(history[:end])), compat, fresh=True)
        return kept

    kept = request(200)
    latest = _CHECKPOINTS[-1]
    assert latest.params.items is kept and latest.params.n <= len(kept)  # held, not copied
    kept.append({"role": "user", "content": "appended by a hook"})  # growth: the checkpoint still holds
    kept = request(230)
    assert _CHECKPOINTS[-1] is not latest and _CHECKPOINTS[-1].params.items is kept
    # a hook's edit of the list a checkpoint holds: the next request does not take the changed params
    kept[1] = {"role": "user", "content": "replaced by a hook"}
    kept.insert(0, {"role": "user", "content": "inserted by a hook"})
    request(260)


def test_a_payload_hook_gets_fresh_dicts_and_the_kept_ones_stay_unchanged():
    rng = random.Random(7)
    history = _history(rng, 40)
    model = MODELS[0]

    async def hook(payload):  # pragma: no cover - only its presence matters here
        return payload

    kept = build_body(model, _ctx(history), StreamOptions())
    hooked = build_body(model, _ctx(history), StreamOptions(onPayload=hook))
    assert not isinstance(hooked, JsonBody) and hooked == dict(kept)
    kept_ids = {id(m) for m in kept["messages"]}
    assert not kept_ids & {id(m) for m in hooked["messages"]}
    for m in hooked["messages"]:  # what a hook may do to the payload in place
        m["content"] = "changed"
    assert build_body(model, _ctx(history), StreamOptions()) == kept


def _plain(body: dict) -> bytes:
    return json.dumps(dict(body), ensure_ascii=False, separators=(",", ":"), allow_nan=True).encode("utf-8")


def test_a_body_changed_after_it_was_built_is_encoded_again():
    history = _history(random.Random(3), 30)
    body = build_body(MODELS[0], _ctx(history), StreamOptions())
    assert isinstance(body, JsonBody)
    body["messages"] = body["messages"][:-1] + [{"role": "user", "content": "replaced"}]
    body["temperature"] = float("nan")
    assert body.to_bytes() == _plain(body)
    body["messages"].append({"role": "user", "content": "appended"})
    assert body.to_bytes() == _plain(body)


def test_a_message_whose_content_list_grew_is_converted_again():
    model = MODELS[0]
    msg = UserMessage(content=[TextContent(text="one")], timestamp=1)
    first = convert_messages(model, _ctx([msg]), get_compat(model))
    msg.content.append(TextContent(text="two"))
    second = convert_messages(model, _ctx([msg]), get_compat(model))
    assert first[-1]["content"] == [{"type": "text", "text": "one"}]
    assert second[-1]["content"] == [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}]


def test_the_tables_follow_the_context_and_stay_bounded():
    model = MODELS[0]
    compat = get_compat(model)
    rng = random.Random(5)
    for _ in range(40):  # forty unrelated 500-message contexts, one after the other
        convert_messages(model, _ctx(_history(rng, 500)), compat)
    assert len(_CONVERTED) <= 4 * 500 + _CONVERTED.margin
    assert len(_shared._TRANSFORMED) <= 4 * 500 + _shared._TRANSFORMED.margin


def test_memo_hits_only_the_same_object_under_the_same_key():
    memo = MessageMemo(margin=0)
    a = UserMessage(content="x", timestamp=1)
    b = UserMessage(content="x", timestamp=1)
    memo.put(a, "k", 1)
    assert memo.get(a, "k") == 1
    assert memo.get(b, "k") is MISS and memo.get(a, "other") is MISS
    a.content = "y"  # a replaced content is a miss
    assert memo.get(a, "k") is MISS


def test_a_message_replaced_in_place_before_the_next_request_is_converted_again():
    # an extension's message_end handler replaces a finished message field by field, in place
    model = MODELS[0]
    compat = get_compat(model)
    history = [UserMessage(content=[TextContent(text=f"q{n}")], timestamp=n) for n in range(6)]
    convert_messages(model, _ctx(history), compat)
    new = UserMessage(content=[TextContent(text="replaced")], timestamp=2)
    for field in new.__struct_fields__:
        setattr(history[2], field, getattr(new, field))
    history.append(UserMessage(content="next", timestamp=9))
    got = convert_messages(model, _ctx(history), compat)
    assert got == convert_messages(model, _ctx(_copies(history)), compat, fresh=True)
    assert got[3]["content"] == [{"type": "text", "text": "replaced"}]


def test_a_context_whose_first_message_is_made_again_each_request_still_resumes():
    # convert_to_llm makes the compaction summary's user message again at every request: equal, not the same
    model = MODELS[0]
    compat = get_compat(model)
    tail = _history(random.Random(11), 60)

    def summary() -> UserMessage:
        return UserMessage(content=[TextContent(text="<summary>the story so far</summary>")], timestamp=1)

    from pisces.ai.providers import openai_chat_messages as ocm

    convert_messages(model, _ctx([summary(), *tail]), compat)
    before = ocm._resume
    found = []
    ocm._resume = lambda *a: found.append(before(*a)) or found[-1]
    try:
        extra = [UserMessage(content="more", timestamp=99)]
        got = convert_messages(model, _ctx([summary(), *tail, *extra]), compat)
    finally:
        ocm._resume = before
    assert found and found[0] is not None
    assert got == convert_messages(model, _ctx(_copies([summary(), *tail, *extra])), compat, fresh=True)
    changed = UserMessage(content=[TextContent(text="<summary>another story</summary>")], timestamp=1)
    assert convert_messages(model, _ctx([changed, *tail]), compat)[1]["content"][0]["text"] == \
        "<summary>another story</summary>"
