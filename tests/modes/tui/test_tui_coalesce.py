"""Streamed deltas coalesced to the frame: the interactive transcript collects text deltas and feeds them once
per frame, and the in-process client hands a delta over without encoding it to JSON. Both must show exactly
what the one-delta-at-a-time path shows, in the same order relative to everything else."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from pisces.agent.types import AgentEndEvent, MessageUpdateEvent
from pisces.ai.types import AssistantMessage, TextContent, TextDeltaEvent, TextStartEvent, ThinkingDeltaEvent
from pisces.modes.host.host import Host
from pisces.modes.tui.client import LocalClient
from pisces.modes.tui.transcript import Transcript


def _delta(text: str, thinking: bool = False) -> dict[str, Any]:
    kind = "thinking_delta" if thinking else "text_delta"
    return {"type": "message_update", "assistantMessageEvent": {"type": kind, "contentIndex": 0, "delta": text}}


ops = st.lists(st.one_of(
    st.tuples(st.just("delta"), st.text(alphabet="ab `#*\nλ界", min_size=1, max_size=40)),
    st.tuples(st.just("thinking"), st.text(alphabet="xy \n", min_size=1, max_size=20)),
    st.tuples(st.just("note"), st.text(alphabet="nm ", min_size=1, max_size=10)),
    st.tuples(st.just("live"), st.just("")),
    st.tuples(st.just("end"), st.just("")),
    st.tuples(st.just("resize"), st.integers(10, 50)),
), max_size=60)


@settings(max_examples=150, deadline=None)
@given(ops)
def test_coalesced_deltas_commit_the_same_rows_in_the_same_order(script: list) -> None:
    """Against the transcript that feeds every delta as it comes: the same committed rows (notes and the end
    of a message interleaved where they came) and the same live tail whenever the live region is drawn."""
    one: list[str] = []
    many: list[str] = []
    a = Transcript(one.extend, 40)
    b = Transcript(many.extend, 40, coalesce=True)
    for t in (a, b):
        t.show_thinking = True
    for op, arg in script:
        for t in (a, b):
            if op == "delta":
                t.on_event(_delta(arg))
            elif op == "thinking":
                t.on_event(_delta(arg, thinking=True))
            elif op == "note":
                t.note(arg)
            elif op == "end":
                t.on_event({"type": "message_end", "message": {"role": "assistant"}})
            elif op == "resize":
                t.resize(arg)
        if op == "live":
            assert a.live() == b.live()
            assert one == many
    a.on_event({"type": "agent_end"})
    b.on_event({"type": "agent_end"})
    assert one == many


def test_coalesced_deltas_wait_for_the_frame_then_come_in_one_feed() -> None:
    rows: list[str] = []
    t = Transcript(rows.extend, 20, coalesce=True)
    for word in ("alpha ", "beta ", "gamma ", "delta ", "epsilon"):
        t.delta(word)
    assert rows == [] and t.stream is None  # collected only: nothing fed yet
    live = t.live()  # the frame feeds them
    assert rows == ["alpha beta gamma"] and live == ["delta epsilon"]
    t.note("a note")  # anything committed afterwards comes after the text fed before it
    t.delta(" more")
    t.on_event({"type": "message_end", "message": {"role": "assistant"}})
    assert rows == ["alpha beta gamma", "a note", "delta epsilon more"]


def test_an_escape_sequence_split_across_deltas_is_removed_whole() -> None:
    """Coalesced, a sequence cut between two deltas is cleaned as one: neither half reaches the screen."""
    rows: list[str] = []
    t = Transcript(rows.extend, 40, coalesce=True)
    t.delta("before \x1b]52;c;")
    t.delta("ZXZpbA==\x07 after")
    t.on_event({"type": "message_end", "message": {"role": "assistant"}})
    assert rows == ["before  after"]


class _Session:
    """What Host needs of a session to broadcast (no approvals, no UI)."""

    extension_options: dict[str, Any] = {}

    def subscribe(self, listener: Any) -> None:
        self.listener = listener


def _update(ame: Any) -> MessageUpdateEvent:
    msg = AssistantMessage(content=[TextContent(text="so far")], api="openai-completions", provider="p", model="m")
    ame.partial = msg
    return MessageUpdateEvent(assistantMessageEvent=ame, message=msg)


def test_the_local_client_hands_deltas_over_as_the_frame_would_carry_them() -> None:
    session = _Session()
    host = Host(session)
    frames: list[dict[str, Any]] = []
    deltas: list[tuple[str, bool]] = []
    client = LocalClient(host, frames.append)
    host.attach(client)
    events = [_update(TextDeltaEvent(contentIndex=0, delta="héllo \x1b[2J\ud800")),
              _update(ThinkingDeltaEvent(contentIndex=1, delta="hmm")),
              _update(TextStartEvent(contentIndex=2)),
              AgentEndEvent(messages=[])]
    for ev in events:  # without on_delta: every event as decoded frame bytes
        session.listener(ev)
    decoded = list(frames)
    assert [f["type"] for f in decoded] == ["message_update"] * 3 + ["agent_end"]
    frames.clear()
    client.on_delta = lambda text, thinking: deltas.append((text, thinking))
    for ev in events:
        session.listener(ev)
    assert deltas == [(decoded[0]["assistantMessageEvent"]["delta"], False),
                      (decoded[1]["assistantMessageEvent"]["delta"], True)]
    assert deltas[0][0] == "héllo \x1b[2J\ud800"  # the exact text: the transcript cleans it, as for any frame
    assert frames == decoded[2:]  # the rest still as frames, unchanged


def test_with_a_second_client_the_tui_gets_frames_and_still_coalesces() -> None:
    """With another client attached (the web mode) the host encodes once for all: the TUI decodes that frame,
    and its transcript still collects the delta until the frame."""
    session = _Session()
    host = Host(session)
    got: list[dict[str, Any]] = []
    deltas: list[Any] = []
    tui = LocalClient(host, got.append)
    tui.on_delta = lambda text, thinking: deltas.append(text)
    other = LocalClient(host, lambda frame: None)
    host.attach(tui)
    host.attach(other)
    session.listener(_update(TextDeltaEvent(contentIndex=0, delta="word")))
    assert deltas == [] and got[0]["assistantMessageEvent"]["delta"] == "word"
    rows: list[str] = []
    t = Transcript(rows.extend, 20, coalesce=True)
    t.on_event(got[0])
    assert t.stream is None and t.live() == ["word"]


def test_the_footer_sees_a_branch_switch_through_its_cache(tmp_path: Any) -> None:
    from pisces.modes.tui import footer

    git = tmp_path / ".git"
    git.mkdir()
    (git / "HEAD").write_text("ref: refs/heads/main\n")
    sub = tmp_path / "a" / "b"
    sub.mkdir(parents=True)
    assert footer.git_branch(str(sub)) == "main"
    assert footer.git_branch(str(sub)) == "main"  # from the cache
    lock = git / "HEAD.lock"  # as git does it: a new file renamed over HEAD
    lock.write_text("ref: refs/heads/feature-x\n")
    lock.replace(git / "HEAD")
    assert footer.git_branch(str(sub)) == "feature-x"
    bare = tmp_path.parent / (tmp_path.name + "-none")
    bare.mkdir()
    assert footer.git_branch(str(bare)) in (None, footer._find_branch(str(bare))[1])


def test_fit_gives_the_same_rows_from_its_cache() -> None:
    from pisces.modes.tui.render import _fit, fit, style, width_of

    rows = [style("─" * 50, 2), "› héllo 界界界 " + style("x" * 40, 1), "↑12 ↓3 · $0.001", "界" * 30]
    for width in (1, 7, 20, 45, 80):
        for row in rows:
            first = fit(row, width)
            assert first == fit(row, width) == _fit(row, width)
            assert width_of(first) <= width


def test_the_idle_warm_up_runs_once_idle_and_never_beside_a_reply() -> None:
    import asyncio
    import threading
    from types import SimpleNamespace

    from pisces.modes.tui import warm

    calls: list[str] = []
    session = SimpleNamespace(model=SimpleNamespace(api="no-such-api"),
                              prepare_first_prompt=lambda: calls.append("system prompt"))

    async def main(busy: bool) -> list[str]:
        calls.clear()
        warm.schedule(session, lambda: busy)
        await asyncio.sleep(warm.WARM_S + 0.2)
        for t in threading.enumerate():
            if t.name == "tui-warm-up":
                t.join(30)
        return [t.name for t in threading.enumerate() if t.name == "tui-warm-up"]

    assert asyncio.run(main(busy=True)) == [] and calls == []
    assert asyncio.run(main(busy=False)) == [] and calls == ["system prompt"]
    import sys
    assert "pisces.modes.tui.highlight" in sys.modules and "pisces.core.session.prompt_input" in sys.modules
