"""The store's per-entry index of the last compaction on each path: ``latest_compaction()`` and
``walk_back()`` agree with a walk over ``get_branch()`` at every step, across compactions, branches, branch
summaries and a reload from disk."""

from __future__ import annotations

from pisces.ai.types import AssistantMessage, TextContent, UserMessage
from pisces.core.store import SessionManager, latest_compaction


def user(text: str) -> UserMessage:
    return UserMessage(content=[TextContent(text=text)], timestamp=1)


def _agrees(sm: SessionManager) -> None:
    branch = sm.get_branch()
    assert sm.latest_compaction() is latest_compaction(branch)
    assert list(sm.walk_back()) == list(reversed(branch))


def test_the_index_agrees_with_the_branch_walk(tmp_path):
    sm = SessionManager.create(str(tmp_path), str(tmp_path / "sessions"))
    _agrees(sm)  # empty
    first = sm.append_message(user("one"))
    _agrees(sm)
    assert sm.latest_compaction() is None
    sm.append_message(user("two"))
    c1 = sm.append_compaction("S1", first, 100, from_hook=False)
    _agrees(sm)
    assert sm.latest_compaction().id == c1
    after = sm.append_message(user("three"))
    c2 = sm.append_compaction("S2", after, 200, from_hook=False)
    sm.append_message(user("four"))
    _agrees(sm)
    assert sm.latest_compaction().id == c2
    sm.branch(after)  # back before the second compaction
    _agrees(sm)
    assert sm.latest_compaction().id == c1
    sm.append_message(user("on the branch"))
    _agrees(sm)
    assert sm.latest_compaction().id == c1
    sm.branch(first)  # before any compaction
    _agrees(sm)
    assert sm.latest_compaction() is None
    sm.branch_with_summary(first, "what the other branch did")
    _agrees(sm)
    assert sm.latest_compaction() is None
    sm.reset_leaf()
    _agrees(sm)
    sm.append_message(AssistantMessage(content=[TextContent(text="reply")], api="faux", provider="faux", model="m",
                                       timestamp=2))  # the file is written from the first reply on
    _agrees(sm)
    reopened = SessionManager.open(sm.get_session_file(), str(tmp_path / "sessions"))
    assert len(reopened.get_entries()) == len(sm.get_entries())
    _agrees(reopened)
    assert [e.id for e in reopened.walk_back()] == [e.id for e in sm.walk_back()]
    assert reopened.latest_compaction() is None and reopened.get_entry(c2) is not None
