"""``TrackedList`` (the agent's history) and what the request path builds on it: every change other than growth
at the end is counted, copies say where they came from, and a history edited in any way between requests
still gives the request a fresh conversion would give, byte for byte, while one that only grew is resumed
without a pass over its old messages."""

from __future__ import annotations

import json
import random

import msgspec
import pytest
from test_convert_memo import MODELS, _copies, _ctx, _history

from pisces.ai.providers import openai_chat_messages as ocm
from pisces.ai.providers._memo import JsonBody
from pisces.ai.providers.openai_chat_messages import convert_messages
from pisces.ai.providers.openai_compat import get_compat
from pisces.ai.providers.openai_completions import build_body
from pisces.ai.tracked_list import TrackedList, same_start
from pisces.ai.types import StreamOptions, TextContent, UserMessage
from pisces.core.store.messages import BashExecutionMessage, convert_to_llm

EDITS = [
    ("setitem", lambda xs: xs.__setitem__(0, "new")),
    ("setslice", lambda xs: xs.__setitem__(slice(0, 1), ["a", "b"])),
    ("delitem", lambda xs: xs.__delitem__(0)),
    ("delslice", lambda xs: xs.__delitem__(slice(1, None))),
    ("insert", lambda xs: xs.insert(1, "in")),
    ("insert at the end", lambda xs: xs.insert(len(xs), "end")),
    ("pop", lambda xs: xs.pop()),
    ("pop first", lambda xs: xs.pop(0)),
    ("remove", lambda xs: xs.remove(xs[0])),
    ("clear", lambda xs: xs.clear()),
    ("sort", lambda xs: xs.sort(key=str)),
    ("reverse", lambda xs: xs.reverse()),
    ("imul", lambda xs: xs.__imul__(2)),
    ("init again", lambda xs: xs.__init__(["other"])),
]


@pytest.mark.parametrize("name,edit", EDITS, ids=[e[0] for e in EDITS])
def test_every_change_other_than_growth_counts(name, edit):
    xs = TrackedList(["x", "y", "z"])
    edit(xs)
    assert xs.edits == 1, name
    assert not xs.unchanged_since(0, 0)


def test_growth_at_the_end_does_not_count():
    xs = TrackedList(["x"])
    xs.append("y")
    xs.extend(["z"])
    xs += ["w"]
    assert xs == ["x", "y", "z", "w"] and xs.edits == 0
    assert xs.unchanged_since(0, 4) and xs.unchanged_since(0, 1) and not xs.unchanged_since(0, 5)


def test_copies_say_where_they_came_from():
    log = TrackedList(["a", "b"])
    first = log.copy()
    assert first == log and first.origin == (log, 0, 2) and first.edits == 0 and log.origin is None
    log.append("c")
    second = log.copy()
    assert same_start(second, first.origin, len(first))
    assert not same_start(second, first.origin, len(second))  # more than the first copy took
    assert not same_start(second, first.origin, len(second) + 1)  # longer than the copy
    log[0] = "A"  # edited in between: the copies no longer share their start
    third = log.copy()
    assert not same_start(third, first.origin, len(first))
    fourth = log.copy()
    fourth.pop()  # a copy changed after it was taken is not trusted either
    assert not same_start(fourth, third.origin, 1)
    assert not same_start(list(third), third.origin, 1)  # a plain list never is
    assert not same_start(third, None, 0)
    fifth, sixth = log.copy(), log.copy()
    fifth.append("added to the copy")  # appended to a copy: its own, not the history's
    assert not same_start(sixth, fifth.origin, len(fifth)) and same_start(sixth, fifth.origin, len(log))


def test_encoded_as_a_plain_list():
    xs = TrackedList([1, "é", {"k": [None, True]}])
    assert json.dumps(xs) == json.dumps(list(xs))
    assert msgspec.json.encode(xs) == msgspec.json.encode(list(xs))


def test_convert_to_llm_checks_only_what_came_since_and_sees_every_edit():
    rng = random.Random(17)
    log = TrackedList()
    for step in range(300):
        roll = rng.random()
        if roll < 0.7 or len(log) < 3:
            log.append(UserMessage(content=f"m{step}", timestamp=step))
        elif roll < 0.8:  # a message the LLM does not take as it is, put in the middle
            log[rng.randrange(len(log))] = BashExecutionMessage(command="ls", output="x", exitCode=0,
                                                                  cancelled=False, truncated=False,
                                                                  timestamp=step,
                                                                  excludeFromContext=rng.random() < 0.5)
        elif roll < 0.9:
            del log[rng.randrange(len(log))]
        else:
            log.insert(rng.randrange(len(log)), UserMessage(content=f"i{step}", timestamp=step))
        got = convert_to_llm(log)
        assert msgspec.json.encode(got) == msgspec.json.encode(convert_to_llm(list(log)))
        if all(isinstance(m, UserMessage) for m in log):
            assert type(got) is TrackedList and got.origin == (log, log.edits, len(log))


def _requests(model, log: TrackedList, rng: random.Random, steps: int):
    """Requests of a history that grows and sometimes is edited: each body as a fresh conversion gives it."""
    compat = get_compat(model)
    pool = _history(rng, 400)
    for step in range(steps):
        roll = rng.random()
        if roll < 0.75 or len(log) < 4:
            log.extend(pool[: rng.randrange(1, 6)])
            del pool[:5]
            pool += _history(rng, 5)
        elif roll < 0.85:
            log[rng.randrange(len(log))] = UserMessage(content=[TextContent(text=f"replaced {step}")], timestamp=1)
        elif roll < 0.9:
            log.pop()
        elif roll < 0.95:  # a message changed in place, field by field (an extension's message_end handler)
            victim = log[-1]
            if hasattr(victim, "content") and isinstance(victim.content, list):
                victim.content = [*victim.content, TextContent(text="more")]
        else:
            log[:] = log[: len(log) // 2]  # what replace_messages does
        messages = convert_to_llm(log)
        body = build_body(model, _ctx(messages), StreamOptions())
        assert isinstance(body, JsonBody)
        fresh = convert_messages(model, _ctx(_copies(list(log))), compat, fresh=True)
        assert body["messages"] == fresh
        plain = json.dumps(dict(body), ensure_ascii=False, separators=(",", ":"), allow_nan=True)
        assert body.to_bytes() == plain.encode("utf-8")


def test_a_history_edited_between_requests_gives_fresh_bodies_and_one_that_grew_is_resumed(monkeypatch):
    taken = []
    real = ocm.same_start

    def spy(*args):
        taken.append(real(*args))
        return taken[-1]

    monkeypatch.setattr(ocm, "same_start", spy)
    rng = random.Random(23)
    for model in MODELS:
        _requests(model, TrackedList(), rng, 60)
    assert True in taken and False in taken  # both ways were exercised


def test_a_body_kept_as_a_tracked_list_is_encoded_again_after_any_change():
    model = MODELS[0]
    history = _history(random.Random(4), 30)
    for name, edit in EDITS:
        body = build_body(model, _ctx(history), StreamOptions())
        assert isinstance(body, JsonBody) and type(body["messages"]) is TrackedList
        if name in ("sort", "reverse", "remove"):
            edit_list = body["messages"]
            edit_list.append({"role": "user", "content": "x"})  # make the change visible in the bytes
        edit(body["messages"])
        plain = json.dumps(dict(body), ensure_ascii=False, separators=(",", ":"), allow_nan=True)
        assert body.to_bytes() == plain.encode("utf-8"), name


@pytest.mark.parametrize("name,edit", EDITS, ids=[e[0] for e in EDITS])
def test_a_seal_covers_the_items_then_and_ends_with_any_edit(name, edit):
    xs = TrackedList(["x", "y", "z"])
    assert xs.final_items() == 0  # nothing is final until the owner says so
    xs.seal()
    xs.append("w")  # growth: the sealed items stay sealed, the new one is not
    assert xs.final_items() == 3 and xs.copy().final_items() == 0  # a copy has its own (none)
    edit(xs)
    assert xs.final_items() == 0, name


def test_a_checkpoint_compares_the_contents_of_messages_not_final_when_it_was_made():
    """A sealed history's checkpoint compares only the content lists of messages sealed after it was made; a
    message replaced in place before its seal (an extension's ``message_end`` handler during the run) is
    still seen by the next request, even when the history has been sealed since."""
    model = MODELS[0]
    compat = get_compat(model)
    history = TrackedList(_history(random.Random(5), 600))
    history.seal()  # the runs so far are over
    history.append(UserMessage(content=[TextContent(text="the next prompt")], timestamp=1))
    ocm._CHECKPOINTS.clear()

    def request() -> list:
        texts: list[bytes] = []
        kept = convert_messages(model, _ctx(history.copy()), compat, texts)
        assert kept == convert_messages(model, _ctx(_copies(history)), compat, fresh=True)
        assert b",".join(texts) == b",".join(json.dumps(p, ensure_ascii=False, separators=(",", ":"),
                                                        allow_nan=True).encode() for p in kept)
        return kept

    request()
    made = ocm._CHECKPOINTS[-1]
    assert made.inputs.n == 601 and made.checked == 600  # the new prompt's message only
    history[-1].content = [TextContent(text="replaced in place by a handler")]  # during the run: no edit
    history.seal()  # the run is over
    kept = request()  # the checkpoint was made before that message was final: its change is seen
    assert "replaced in place by a handler" in json.dumps(kept[-1])
    assert ocm._CHECKPOINTS[-1].checked == 601  # and now it is final: nothing left to compare
