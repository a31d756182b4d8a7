"""Every session file written by pi 0.73.1 loads with the same entries, tree, leaf and context."""

import glob
import json
import os

import msgspec
import pytest
from pi_files import CONFORMANCE, PI_SESSION_FILES, json_lines, needs_pi_files, pi_file_id

from pisces.core.store import (
    CompactionSummaryMessage,
    SessionManager,
    build_session_context,
    convert_to_llm,
    encode_line,
    list_sessions,
    load_session_file,
    message_role,
)

pytestmark = needs_pi_files
files = pytest.mark.parametrize("path", PI_SESSION_FILES, ids=[pi_file_id(p) for p in PI_SESSION_FILES])


def expected_context(lines: list[dict]) -> list[dict]:
    """The context as the file says it, computed with plain dicts: walk leaf -> root, apply a compaction."""
    entries = lines[1:]
    by_id = {e["id"]: e for e in entries}
    path, cur = [], entries[-1]
    while cur is not None:
        path.insert(0, cur)
        cur = by_id.get(cur["parentId"]) if cur["parentId"] else None
    comp_idx = max((i for i, e in enumerate(path) if e["type"] == "compaction"), default=-1)
    if comp_idx < 0:
        return [e["message"] for e in path if e["type"] == "message"]
    comp = path[comp_idx]
    ids = [e["id"] for e in path]
    start = ids.index(comp["firstKeptEntryId"]) if comp["firstKeptEntryId"] in ids[:comp_idx] else comp_idx
    kept = [e["message"] for e in path[start:comp_idx] + path[comp_idx + 1:] if e["type"] == "message"]
    return [{"role": "compactionSummary", "summary": comp["summary"], "tokensBefore": comp["tokensBefore"]}] + kept


@files
def test_entries_tree_and_leaf(path):
    lines = json_lines(path)
    loaded = load_session_file(path)
    assert loaded is not None and loaded.header is not None and not loaded.migrated and loaded.skipped_lines == 0
    assert loaded.header.id == lines[0]["id"] and loaded.header.cwd == lines[0]["cwd"]
    assert [e.id for e in loaded.entries] == [e["id"] for e in lines[1:]]
    assert [e.parentId for e in loaded.entries] == [e["parentId"] for e in lines[1:]]
    sm = SessionManager.open(path)
    assert sm.get_session_id() == lines[0]["id"]
    assert sm.get_leaf_id() == lines[-1]["id"]
    assert sm.get_session_file() == os.path.abspath(path)
    assert sm.is_on_disk()
    roots = sm.get_tree()
    assert len(roots) == 1 and roots[0].entry.id == lines[1]["id"]
    assert [e.id for e in sm.get_branch()] == [e["id"] for e in lines[1:]]  # pi's files here are single chains
    sm.close()


@files
def test_context_matches_the_file(path):
    lines = json_lines(path)
    ctx = SessionManager.open(path).build_session_context()
    mine = msgspec.json.decode(msgspec.json.encode(ctx.messages))
    expected = expected_context(lines)
    assert len(mine) == len(expected)
    for got, want in zip(mine, expected, strict=False):
        if want["role"] == "compactionSummary":
            assert {k: got[k] for k in want} == want
        else:
            assert got == want
    levels = [e["thinkingLevel"] for e in lines[1:] if e["type"] == "thinking_level_change"]
    assert ctx.thinking_level == (levels[-1] if levels else "off")
    model = None
    for e in lines[1:]:
        if e["type"] == "model_change":
            model = (e["provider"], e["modelId"])
        elif e["type"] == "message" and e["message"]["role"] == "assistant":
            model = (e["message"]["provider"], e["message"]["model"])
    assert tuple(ctx.model) == model


@files
def test_round_trip_every_line(path):
    with open(path, "rb") as f:
        raw = [line for line in f.read().split(b"\n") if line.strip()]
    loaded = load_session_file(path)
    assert json.loads(encode_line(loaded.header)) == json.loads(raw[0])
    for line, entry in zip(raw[1:], loaded.entries, strict=True):
        encoded = encode_line(entry)
        assert encoded.endswith(b"\n") and encoded.count(b"\n") == 1
        assert json.loads(encoded) == json.loads(line)


def _get_messages_responses(scenario: str) -> list[list[dict]]:
    out = []
    with open(os.path.join(CONFORMANCE, f"{scenario}.transcript.jsonl"), encoding="utf-8") as f:
        for record in map(json.loads, f):
            if record["dir"] != "out":
                continue
            frame = json.loads(record["line"])
            if frame.get("type") == "response" and frame.get("command") == "get_messages" and frame.get("success"):
                out.append(frame["data"]["messages"])
    return out


SCENARIOS = sorted({p.split(os.sep)[-3] for p in PI_SESSION_FILES
                    if os.path.exists(os.path.join(CONFORMANCE, p.split(os.sep)[-3] + ".transcript.jsonl"))})


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_context_matches_pi_get_messages(scenario):
    """pi's own get_messages answers: the last one is a prefix of (or equal to) the context we build from one of
    the scenario's files, byte-for-byte after parsing (compaction summary timestamps included)."""
    responses = _get_messages_responses(scenario)
    if not responses:
        pytest.skip("no get_messages in this run")
    contexts = []
    for path in glob.glob(os.path.join(CONFORMANCE, scenario, "sessions", "*.jsonl")):
        ctx = build_session_context(load_session_file(path).entries)
        contexts.append(msgspec.json.decode(msgspec.json.encode(ctx.messages)))
    last = responses[-1]
    assert any(c[: len(last)] == last for c in contexts)


def _file_of(scenario: str) -> str:
    return glob.glob(os.path.join(CONFORMANCE, scenario, "sessions", "*.jsonl"))[0]


def test_bash_execution_becomes_user_text():
    ctx = SessionManager.open(_file_of("05_rpc_bash")).build_session_context()
    llm = convert_to_llm(ctx.messages)
    assert [message_role(m) for m in llm] == ["user"] * 8 + ["assistant"]
    texts = [m.content[0].text for m in llm]
    assert texts[0] == "Ran `echo hi`\n```\nhi\n\n```"
    assert texts[1] == "Ran `echo out; echo err 1>&2; exit 3`\n```\nout\nerr\n\n```\n\nCommand exited with code 3"
    assert texts[3] == "Ran `true`\n(no output)"
    assert texts[6] == "Ran `echo started; sleep 5; echo never`\n```\nstarted\n\n```\n\n(command cancelled)"
    assert texts[4].startswith("Ran `seq 1 3000`\n```\n1002\n")
    assert texts[7] == "What did the commands print?"


def test_compaction_summary_leads_the_context():
    ctx = SessionManager.open(_file_of("06_compact")).build_session_context()
    first = ctx.messages[0]
    assert isinstance(first, CompactionSummaryMessage)
    assert first.summary == "## Goal\nScripted summary #2." and first.tokensBefore == 700
    assert first.timestamp == 1795300609799  # the compaction entry's ISO timestamp, in ms
    llm = convert_to_llm(ctx.messages)
    assert llm[0].content[0].text == (
        "The conversation history before this point was compacted into the following summary:\n\n"
        "<summary>\n## Goal\nScripted summary #2.\n</summary>"
    )
    assert [message_role(m) for m in llm] == ["user"] * 1 + ["user", "assistant"] * 3


def test_thinking_level_and_model_follow_the_path():
    ctx = SessionManager.open(_file_of("18_reasoning_thinking")).build_session_context()
    assert ctx.thinking_level == "off"
    assert tuple(ctx.model) == ("scripted", "scripted-reasoning")


def test_session_name_and_listing():
    path = _file_of("09_session_name_export")
    assert SessionManager.open(path).get_session_name() == "my-feature-work"
    [info] = list_sessions(os.path.dirname(path))
    assert info.name == "my-feature-work" and info.messageCount == 2
    assert info.firstMessage == "Say hello" and info.allMessagesText == "Say hello Hello!"
    assert info.created == "2026-11-21T22:36:54.710Z"
    assert info.modified == "2026-11-21T22:36:54.771Z"  # the last user/assistant message's own timestamp


def test_forked_file_from_pi_has_parent_session():
    files = sorted(glob.glob(os.path.join(CONFORMANCE, "04_fork_switch_new", "sessions", "*.jsonl")))
    infos = {i.path: i for i in list_sessions(os.path.dirname(files[0]))}
    assert len(infos) == 3
    assert "parentSessionPath" not in msgspec.structs.asdict(infos[files[0]]) or infos[files[0]].parentSessionPath is msgspec.UNSET
    assert infos[files[1]].parentSessionPath.endswith(os.path.basename(files[0]))
    encoded = json.loads(msgspec.json.encode(infos[files[0]]))
    assert "parentSessionPath" not in encoded and "name" not in encoded


def _wire_user_texts(request: dict) -> list[str]:
    texts = []
    for m in request["messages"]:
        if m["role"] != "user":
            continue
        content = m["content"]
        texts.append(content if isinstance(content, str)
                     else "".join(c.get("text", "") for c in content if c.get("type") == "text"))
    return texts


def _main_openai_requests(scenario: str) -> list[dict]:
    path = os.path.join(CONFORMANCE, scenario, "llm_requests.jsonl")
    if not os.path.exists(path):
        return []
    out = []
    with open(path, encoding="utf-8") as f:
        for record in map(json.loads, f):
            request = record.get("request")
            if record.get("api") != "openai" or not request:
                continue
            system = request["messages"][0]
            if system["role"] == "system" and system["content"].startswith("You are an expert coding assistant"):
                out.append(request)
    return out


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_every_llm_request_pi_sent_is_the_context_at_some_leaf(scenario):
    """The user texts of each request pi sent equal convert_to_llm(build_session_context(leaf)) for some leaf
    of the scenario's files: the wording of bash, compaction-summary and user messages is pi's exactly."""
    requests = _main_openai_requests(scenario)
    if not requests:
        pytest.skip("no OpenAI-wire requests in this run")
    candidates = []
    for path in glob.glob(os.path.join(CONFORMANCE, scenario, "sessions", "*.jsonl")):
        entries = load_session_file(path).entries
        for entry in entries:
            llm = convert_to_llm(build_session_context(entries, entry.id).messages)
            candidates.append([
                "".join(c.text for c in m.content if getattr(c, "text", None) is not None)
                if not isinstance(m.content, str) else m.content
                for m in llm if message_role(m) == "user"
            ])
    for request in requests:
        assert _wire_user_texts(request) in candidates
