"""Token estimation, cut points, split turns, the transcript and the file lists: the pure parts."""

from __future__ import annotations

from pisces.ai.types import (
    AssistantMessage,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from pisces.core.compaction import (
    FileOps,
    file_ops_from_message,
    find_cut_point,
    format_file_lists,
    prepare_compaction,
    serialize_conversation,
)
from pisces.core.session.views import estimate_context_tokens, estimate_tokens
from pisces.core.store import BashExecutionMessage, CompactionSummaryMessage, SessionManager, entry_type, message_role


def user(text: str) -> UserMessage:
    return UserMessage(content=[TextContent(text=text)])


def assistant(*blocks, usage: int = 0, stop: str = "stop") -> AssistantMessage:
    return AssistantMessage(content=list(blocks), api="faux", provider="faux", model="faux",
                            usage=Usage(input=usage, totalTokens=usage), stopReason=stop)


def call(name: str, **args) -> ToolCall:
    return ToolCall(id=f"c-{name}", name=name, arguments=args)


def result(text: str, name: str = "bash") -> ToolResultMessage:
    return ToolResultMessage(toolCallId=f"c-{name}", toolName=name, content=[TextContent(text=text)])


def store_with(*messages) -> SessionManager:
    sm = SessionManager.in_memory("/tmp")
    sm.append_model_change("faux", "faux")
    sm.append_thinking_level_change("off")
    for m in messages:
        sm.append_message(m)
    return sm


# ---------------------------------------------------------------------------------------------
# Token estimation
# ---------------------------------------------------------------------------------------------
def test_estimate_tokens_chars_over_four_rounded_up():
    assert estimate_tokens(user("12345")) == 2
    # text + thinking + name + compact JSON of the arguments
    msg = assistant(TextContent(text="abcd"), ThinkingContent(thinking="efgh"), call("read", path="a"))
    assert estimate_tokens(msg) == -(-(4 + 4 + len("read") + len('{"path":"a"}')) // 4)
    assert estimate_tokens(BashExecutionMessage(command="ls", output="a\nb")) == 2
    assert estimate_tokens(CompactionSummaryMessage(summary="x" * 9, tokensBefore=1)) == 3
    assert estimate_tokens(result("y" * 8)) == 2


def test_estimate_context_tokens_uses_last_good_usage_plus_trailing_estimates():
    msgs = [user("a" * 40), assistant(TextContent(text="b"), usage=500), user("c" * 8)]
    est = estimate_context_tokens(msgs)
    assert est["tokens"] == 502 and est["usageTokens"] == 500 and est["lastUsageIndex"] == 1
    # an error reply's usage does not count: the previous good one does
    msgs.append(assistant(TextContent(text=""), usage=9999, stop="error"))
    assert estimate_context_tokens(msgs)["usageTokens"] == 500
    # no usage at all: the sum of estimates
    assert estimate_context_tokens([user("a" * 40)])["tokens"] == 10


# ---------------------------------------------------------------------------------------------
# Cut points
# ---------------------------------------------------------------------------------------------
def test_cut_never_lands_on_a_tool_result():
    sm = store_with(user("first"), assistant(call("bash", command="ls")), result("z" * 400),
                    assistant(TextContent(text="done")))
    path = sm.get_branch()
    # the walk back reaches the budget on the tool result (index 4); the cut moves on to the next assistant
    cut = find_cut_point(path, 0, len(path), keep_recent_tokens=50)
    assert message_role(path[cut.first_kept_index].message) == "assistant"
    assert cut.first_kept_index == 5
    assert cut.is_split_turn and cut.turn_start_index == 2


def test_cut_on_a_user_message_is_not_a_split_turn():
    sm = store_with(user("a" * 80), assistant(TextContent(text="b" * 80)), user("c" * 80),
                    assistant(TextContent(text="d" * 80)))
    path = sm.get_branch()
    cut = find_cut_point(path, 0, len(path), keep_recent_tokens=30)
    assert cut.first_kept_index == 4
    assert not cut.is_split_turn and cut.turn_start_index == -1


def test_settings_entries_just_before_the_cut_are_kept_with_it():
    sm = store_with(user("a" * 80), assistant(TextContent(text="b" * 80)))
    sm.append_thinking_level_change("high")
    sm.append_message(user("c" * 80))
    sm.append_message(assistant(TextContent(text="d" * 80)))
    path = sm.get_branch()
    cut = find_cut_point(path, 0, len(path), keep_recent_tokens=30)
    assert entry_type(path[cut.first_kept_index]) == "thinking_level_change"
    # as in pi, the kept part then no longer starts on the user message, so the turn counts as split
    assert cut.is_split_turn and cut.turn_start_index == 2


def test_everything_fits_keeps_from_the_first_message():
    sm = store_with(user("hi"), assistant(TextContent(text="hello")))
    path = sm.get_branch()
    cut = find_cut_point(path, 0, len(path), keep_recent_tokens=20000)
    # scanned back over the settings entries up to the start
    assert cut.first_kept_index == 0


def test_prepare_split_turn_separates_history_and_turn_prefix():
    sm = store_with(user("old question"), assistant(TextContent(text="old answer")),
                    user("Run echo hi"), assistant(call("read", path="src/a.py")), result("x" * 4000, "read"),
                    assistant(call("edit", path="src/b.py", edits=[])), result("ok", "edit"),
                    assistant(TextContent(text="all done")))
    prep = prepare_compaction(sm.get_branch(), keep_recent_tokens=15)
    assert prep is not None and prep.is_split_turn
    assert [message_role(m) for m in prep.messages_to_summarize] == ["user", "assistant"]
    assert prep.turn_prefix_messages[0].content[0].text == "Run echo hi"
    # the edit call is in the kept part: only the prefix's read counts
    assert prep.file_ops.lists() == (["src/a.py"], [])
    kept = sm.get_entry(prep.first_kept_entry_id)
    assert message_role(kept.message) == "assistant"


def test_prepare_refuses_right_after_a_compaction_and_carries_the_previous_summary():
    sm = store_with(user("q"), assistant(TextContent(text="a"), usage=100))
    first = sm.get_branch()[2].id
    sm.append_compaction("PREVIOUS", first, 100, {"readFiles": ["r.txt"], "modifiedFiles": ["m.txt"]}, False)
    assert prepare_compaction(sm.get_branch(), 20000) is None
    sm.append_message(user("next"))
    prep = prepare_compaction(sm.get_branch(), 20000)
    assert prep.previous_summary == "PREVIOUS"
    assert prep.file_ops.lists() == (["r.txt"], ["m.txt"])
    # the kept part of the previous compaction is in scope again: the cut stays at its first kept entry
    assert prep.first_kept_entry_id == first and prep.messages_to_summarize == []


def test_prepare_empty_session_keeps_from_the_first_entry_with_zero_tokens():
    sm = store_with()
    prep = prepare_compaction(sm.get_branch(), 20000)
    assert prep.first_kept_entry_id == sm.get_branch()[0].id
    assert prep.tokens_before == 0 and prep.messages_to_summarize == []


# ---------------------------------------------------------------------------------------------
# Transcript and file lists
# ---------------------------------------------------------------------------------------------
def test_serialize_conversation_labels_and_truncation():
    text = serialize_conversation([
        user("Please fix it"),
        assistant(ThinkingContent(thinking="hmm"), TextContent(text="On it."),
                  call("bash", command="echo hi", timeout=2.0), call("read", path="ü.py")),
        result("r" * 2500),
        result(""),  # empty results are left out
    ])
    parts = text.split("\n\n")
    assert parts[0] == "[User]: Please fix it"
    assert parts[1] == "[Assistant thinking]: hmm"
    assert parts[2] == "[Assistant]: On it."
    assert parts[3] == '[Assistant tool calls]: bash(command="echo hi", timeout=2); read(path="ü.py")'
    assert parts[4] == "[Tool result]: " + "r" * 2000
    assert parts[5] == "[... 500 more characters truncated]"
    assert len(parts) == 6


def test_file_lists_sorted_and_read_only_excludes_modified():
    ops = FileOps()
    file_ops_from_message(assistant(call("read", path="b"), call("read", path="a"), call("write", path="b"),
                                    call("bash", path="ignored")), ops)
    assert ops.lists() == (["a"], ["b"])
    expected = "\n\n<read-files>\na\n</read-files>\n\n<modified-files>\nb\n</modified-files>"
    assert format_file_lists(*ops.lists()) == expected
    assert format_file_lists([], []) == ""
