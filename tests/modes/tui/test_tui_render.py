"""The TUI renderer on a virtual terminal (pyte): finished rows reach the scrollback exactly once across
streams, resizes and aborts; text from outside cannot inject escape sequences."""

from __future__ import annotations

import pyte
from hypothesis import given, settings
from hypothesis import strategies as st

from pisces.modes.tui.render import Renderer
from pisces.modes.tui.sanitize import clean
from pisces.modes.tui.transcript import Transcript


class Term:
    def __init__(self, w: int, h: int) -> None:
        self.screen = pyte.HistoryScreen(w, h, history=100000)
        self.stream = pyte.Stream(self.screen)

    def write(self, text: str) -> None:
        self.stream.feed(text)

    def all_rows(self) -> list[str]:
        hist = ["".join(c.data for c in row.values()).rstrip() if isinstance(row, dict) else
                "".join(row[i].data for i in range(self.screen.columns)).rstrip() for row in self.screen.history.top]
        return hist + [line.rstrip() for line in self.screen.display]


ops = st.lists(st.one_of(
    st.tuples(st.just("delta"), st.text(alphabet="ab \n", min_size=1, max_size=30)),
    st.tuples(st.just("live"), st.integers(0, 6)),
    st.tuples(st.just("resize"), st.integers(20, 60)),
    st.tuples(st.just("abort"), st.just(0)),
), max_size=40)


@settings(max_examples=60, deadline=None)
@given(ops)
def test_every_finished_row_appears_exactly_once(script: list) -> None:
    term = Term(40, 12)
    r = Renderer(term.write, 40, 12)
    n = [0]

    def commit(rows: list[str]) -> None:
        tagged = []
        for _row in rows:
            n[0] += 1
            tagged.append(f"R{n[0]:05d}")  # a unique marker per finished row
        r.commit(tagged)

    t = Transcript(commit, 40)
    live_n = 2
    for op, arg in script:
        if op == "delta":
            t.on_event({"type": "message_update", "assistantMessageEvent": {"type": "text_delta", "delta": arg}})
        elif op == "live":
            live_n = arg
        elif op == "resize":
            r.resize(arg, 12)
            term.screen.resize(12, arg)
            t.resize(arg)
        else:
            t.on_event({"type": "agent_end"})
        r.set_live([f"live{i}" for i in range(live_n)] + ["> editor"], (live_n, 2))
        r.flush()
    t.on_event({"type": "agent_end"})
    r.set_live(["> editor"], (0, 2))
    r.flush()
    rows = term.all_rows()
    for i in range(1, n[0] + 1):
        marker = f"R{i:05d}"
        assert sum(row.count(marker) for row in rows) == 1, (marker, rows)


def test_injected_sequences_are_removed() -> None:
    hostile = "a\x1b[2J\x1b[H\x1b]52;c;cHduZWQ=\x07\x1b]0;title\x07\x1b[3J\x9b2J\x1bPq#0\x1b\\b\rc\x07d"
    out = clean(hostile)
    assert "\x1b" not in out and "\x9b" not in out and "\x07" not in out
    assert out == "ab\ncd"


def test_tool_output_cannot_clear_or_move_on_a_terminal() -> None:
    term = Term(40, 8)
    r = Renderer(term.write, 40, 8)
    t = Transcript(r.commit, 40)
    t.note("kept row")
    r.flush()
    t.on_event({"type": "tool_execution_start", "toolCallId": "1", "toolName": "bash", "args": {"command": "x"}})
    t.on_event({"type": "tool_execution_end", "toolCallId": "1", "toolName": "bash",
                "result": {"content": [{"type": "text", "text": "out\x1b[2J\x1b[1;1Hzz\x1b]0;t\x07"}]}})
    r.set_live(["> "], (0, 2))
    r.flush()
    rows = term.all_rows()
    assert any("kept row" in x for x in rows)
    assert any("outzz" in x for x in rows)
    assert term.screen.title == ""


def test_cost_per_delta_does_not_grow_with_the_answer() -> None:
    sizes = []
    for total in (1000, 100000):
        term_out: list[str] = []
        r = Renderer(term_out.append, 120, 40)
        t = Transcript(r.commit, 120)
        chunk = "word " * 2
        for _ in range(total // len(chunk)):
            t.on_event({"type": "message_update", "assistantMessageEvent": {"type": "text_delta", "delta": chunk}})
        r.set_live(t.live() + ["> "], None)
        r.flush()
        before = len("".join(term_out))
        t.on_event({"type": "message_update", "assistantMessageEvent": {"type": "text_delta", "delta": "x"}})
        r.set_live(t.live() + ["> "], None)
        r.flush()
        sizes.append(len("".join(term_out)) - before)
        assert len(t.stream.line) <= 120  # the unfinished part stays one row
    assert sizes[1] <= sizes[0] * 2 + 200


def test_narrow_terminal_does_not_crash() -> None:
    term = Term(20, 6)
    r = Renderer(term.write, 20, 6)
    t = Transcript(r.commit, 20)
    t.user("a long user message that wraps many times at twenty columns")
    t.on_event({"type": "message_update", "assistantMessageEvent": {"type": "text_delta", "delta": "x" * 300}})
    r.set_live(t.live() + ["> " + "y" * 50], (0, 2))
    r.flush()
    assert any("a long" in x for x in term.all_rows())


def test_code_fences_are_highlighted_and_stay_clean() -> None:
    rows: list[str] = []
    t = Transcript(rows.extend, 60)
    t.on_event({"type": "message_update", "assistantMessageEvent": {"type": "text_delta",
                "delta": "```python\ndef f():  # note\n    return 'x\x1b]0;t\x07'\n```\n"}})
    t.on_event({"type": "agent_end"})
    joined = "\n".join(rows)
    assert "\x1b[35mdef" in joined  # the keyword coloured
    assert "\x1b[2;3m# note" in joined  # the comment dimmed
    assert "\x1b]" not in joined and "\x07" not in joined  # the OSC inside the code removed before colouring
