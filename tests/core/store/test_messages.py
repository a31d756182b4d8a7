import json

import msgspec
import pytest

from pisces.ai.types import AssistantMessage, ImageContent, TextContent, ToolResultMessage, UserMessage
from pisces.core.store import (
    BashExecutionMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    CustomMessage,
    convert_to_llm,
    decode_message,
    message_role,
)


def enc(obj):
    return json.loads(msgspec.json.encode(obj))


def text_of(m):
    return m.content[0].text


def test_bash_execution_text_variants():
    base = dict(command="ls", timestamp=5)
    cases = [
        (BashExecutionMessage(output="a\n", exitCode=0, **base), "Ran `ls`\n```\na\n\n```"),
        (BashExecutionMessage(output="", exitCode=0, **base), "Ran `ls`\n(no output)"),
        (BashExecutionMessage(output="x", exitCode=2, **base), "Ran `ls`\n```\nx\n```\n\nCommand exited with code 2"),
        (BashExecutionMessage(output="x", cancelled=True, **base), "Ran `ls`\n```\nx\n```\n\n(command cancelled)"),
        (BashExecutionMessage(output="x", exitCode=None, **base), "Ran `ls`\n```\nx\n```"),
        (BashExecutionMessage(output="x", exitCode=1, truncated=True, fullOutputPath="/tmp/f.log", **base),
         "Ran `ls`\n```\nx\n```\n\nCommand exited with code 1\n\n[Output truncated. Full output: /tmp/f.log]"),
        (BashExecutionMessage(output="x", exitCode=0, truncated=True, **base), "Ran `ls`\n```\nx\n```"),
    ]
    for msg, want in cases:
        [out] = convert_to_llm([msg])
        assert isinstance(out, UserMessage) and out.timestamp == 5
        assert text_of(out) == want


def test_excluded_bash_is_dropped():
    msg = BashExecutionMessage(command="ls", output="", exitCode=0, excludeFromContext=True)
    assert convert_to_llm([msg]) == []


def test_custom_and_summaries():
    img = ImageContent(data="AAA", mimeType="image/png")
    out = convert_to_llm([
        CustomMessage(customType="x", content="hello", display=True, timestamp=1),
        CustomMessage(customType="x", content=[TextContent(text="a"), img], display=False, timestamp=2),
        BranchSummaryMessage(summary="went left", fromId="abc", timestamp=3),
        CompactionSummaryMessage(summary="S", tokensBefore=10, timestamp=4),
    ])
    assert [message_role(m) for m in out] == ["user"] * 4
    assert out[0].content == [TextContent(text="hello")]
    assert out[1].content == [TextContent(text="a"), img]
    assert text_of(out[2]) == ("The following is a summary of a branch that this conversation came back from:\n\n"
                               "<summary>\nwent left</summary>")
    assert text_of(out[3]) == ("The conversation history before this point was compacted into the following "
                               "summary:\n\n<summary>\nS\n</summary>")
    assert [m.timestamp for m in out] == [1, 2, 3, 4]


def test_llm_roles_pass_through_and_unknown_dropped():
    u = UserMessage(content="hi", timestamp=1)
    a = AssistantMessage(content=[], api="x", provider="p", model="m", timestamp=2)
    t = ToolResultMessage(toolCallId="c", toolName="bash", content=[], timestamp=3)
    assert convert_to_llm([u, a, {"role": "weird"}, t]) == [u, a, t]


def test_shapes_absent_not_null():
    cancelled = BashExecutionMessage(command="sleep 9", output="", cancelled=True, timestamp=7)
    assert enc(cancelled) == {"role": "bashExecution", "command": "sleep 9", "output": "", "cancelled": True,
                              "truncated": False, "timestamp": 7}
    custom = CustomMessage(customType="t", content="c", display=False, timestamp=1)
    assert enc(custom) == {"role": "custom", "customType": "t", "content": "c", "display": False, "timestamp": 1}
    assert enc(BranchSummaryMessage(summary="s", fromId="f", timestamp=1)) == {
        "role": "branchSummary", "summary": "s", "fromId": "f", "timestamp": 1}
    assert enc(CompactionSummaryMessage(summary="s", tokensBefore=3, timestamp=1)) == {
        "role": "compactionSummary", "summary": "s", "tokensBefore": 3, "timestamp": 1}


@pytest.mark.parametrize("data", [
    {"role": "user", "content": "plain", "timestamp": 1},
    {"role": "user", "content": [{"type": "text", "text": "t"}, {"type": "image", "data": "A", "mimeType": "image/png"}],
     "timestamp": 1},
    {"role": "assistant", "content": [{"type": "thinking", "thinking": "h", "thinkingSignature": "reasoning_content"},
                                      {"type": "toolCall", "id": "c1", "name": "bash", "arguments": {"command": "ls"}}],
     "api": "openai-completions", "provider": "p", "model": "m",
     "usage": {"input": 1, "output": 2, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 3,
               "cost": {"input": 0.1, "output": 0.2, "cacheRead": 0, "cacheWrite": 0, "total": 0.30000000000000004}},
     "stopReason": "toolUse", "timestamp": 9, "responseId": "r"},
    {"role": "toolResult", "toolCallId": "c1", "toolName": "bash", "content": [{"type": "text", "text": "o"}],
     "details": {}, "isError": True, "timestamp": 2},
    {"role": "bashExecution", "command": "c", "output": "o", "exitCode": 0, "cancelled": False, "truncated": True,
     "fullOutputPath": "/tmp/x", "timestamp": 3},
    {"role": "custom", "customType": "k", "content": "c", "display": True, "details": {"a": 1}, "timestamp": 4},
    {"role": "branchSummary", "summary": "s", "fromId": "root", "timestamp": 5},
    {"role": "compactionSummary", "summary": "s", "tokensBefore": 0, "timestamp": 6},
])
def test_decode_message_round_trips(data):
    msg = decode_message(data)
    assert message_role(msg) == data["role"]
    assert enc(msg) == data
    assert enc(decode_message(json.dumps(data).encode())) == data


def test_decode_message_rejects_unknown_role():
    with pytest.raises(msgspec.ValidationError):
        decode_message({"role": "nope", "timestamp": 1})


def test_unicode_is_not_escaped():
    msg = UserMessage(content=[TextContent(text="héllo \u2028 ✓")], timestamp=1)
    raw = msgspec.json.encode(msg)
    assert "héllo \u2028 ✓".encode() in raw
