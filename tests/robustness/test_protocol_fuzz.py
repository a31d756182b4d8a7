"""Hypothesis-generated commands and raw byte garbage against the real ``pisces --mode rpc`` process.

Guarantees checked (DESIGN.md §5):
- every line gets exactly one response: a JSON object with a non-null ``id`` gets one response carrying that
  id (pisces echoes ids on errors too), any other line one response without an id (a non-JSON line gets a
  ``parse`` response), ``extension_ui_response`` gets none (pi's behaviour);
- the process stays alive whatever it reads;
- stdout carries only frames: LF-terminated, strict UTF-8, strict JSON objects with a string ``type``;
- stdin EOF ends the process with exit status 0.

One process serves a whole test; after each example a barrier (``abort`` then ``get_state``) makes sure
nothing of the example is still in flight, and the example's responses are counted exactly. At the end the
responses of the whole run are counted once more, so a late duplicate cannot hide between examples.
"""

from __future__ import annotations

import itertools
import json
from collections import Counter

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from robust_harness import NO_ID, SILENT, Agent, expected_reply, response_key, write_faux_script

FAUX_REPLIES = [
    {"text": "ok"},
    {"text": "listing", "toolCalls": [{"name": "ls", "arguments": {}}]},
    {"thinking": "hmm", "text": "done \u2028 with a line separator"},
]
FUZZ_SETTINGS = dict(max_examples=300, deadline=None, derandomize=True, database=None,
                     suppress_health_check=list(HealthCheck))


# ------------------------------------------------------------------------------------------------
# The process and the exchange
# ------------------------------------------------------------------------------------------------
def start_agent(tmp_path) -> Agent:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    (work / "garbage.jsonl").write_bytes(b"not a session\n\x00\xff{\n")
    script = write_faux_script(str(tmp_path / "script.json"), FAUX_REPLIES)
    return Agent(["--provider", "faux", "--faux-script", script], home=str(tmp_path / "home"), cwd=str(work))


class Exchange:
    """Sends examples to one agent and keeps the books: what each line must get, what came back."""

    def __init__(self, agent: Agent) -> None:
        self.agent = agent
        self.expected: Counter[str] = Counter()
        self.barriers = itertools.count()
        self.barrier_keys: set[str] = set()

    def run(self, lines: list[bytes]) -> None:
        agent = self.agent
        assert agent.alive(), agent.describe("the agent died")
        start = agent.count()
        want = Counter(expected_reply(line) for line in lines)
        want.pop(SILENT, None)
        self.expected.update(want)
        for line in lines:
            agent.send_line(line)

        def got() -> Counter[str]:
            return Counter(response_key(f) for f in agent.frames[start:] if f.get("type") == "response")

        try:
            agent.wait_until(lambda: all(got()[k] >= n for k, n in want.items()), timeout=20,
                             what="one response per line")
        except AssertionError as exc:
            missing = {k: n - got()[k] for k, n in want.items() if got()[k] < n}
            raise AssertionError(f"lines left unanswered (id: how many): {missing}\n{exc}") from None
        # Barrier: abort waits until the agent is idle; get_state is answered in order after it.
        for kind in ("abort", "get_state"):
            bid = f"__barrier-{next(self.barriers)}"
            self.barrier_keys.add(json.dumps(bid))
            agent.request({"id": bid, "type": kind}, timeout=30)
        seen = Counter(response_key(f) for f in agent.snapshot(start) if f.get("type") == "response")
        for key in self.barrier_keys:
            seen.pop(key, None)
        assert seen == want, agent.describe(
            f"responses do not match the lines\n  lines: {[line[:120] for line in lines]}\n"
            f"  expected: {dict(want)}\n  got: {dict(seen)}")
        window = agent.snapshot(start)
        runs = [f["type"] for f in window if f.get("type") in ("agent_start", "agent_end")]
        assert runs == ["agent_start", "agent_end"] * (len(runs) // 2) and len(runs) % 2 == 0, agent.describe(
            f"every run that starts must end once the agent is idle again: {runs}")
        assert agent.alive(), agent.describe("the agent died")
        assert not agent.violations, agent.describe("stdout carried something that is not a frame")

    def finish(self) -> None:
        agent = self.agent
        agent.close_stdin()
        code = agent.wait_exit(10)
        assert code == 0, agent.describe(f"stdin EOF must end the process with 0, got {code}")
        agent.wait_until(lambda: agent.eof, timeout=5, what="stdout EOF")
        assert not agent.violations, agent.describe("stdout carried something that is not a frame")
        seen = Counter(response_key(f) for f in agent.frames if f.get("type") == "response")
        for key in self.barrier_keys:
            assert seen.pop(key, 0) == 1, f"barrier {key} answered more than once"
        assert seen == self.expected, (f"over the whole run: expected {sum(self.expected.values())} responses, "
                                       f"got {sum(seen.values())}; difference {dict(seen - self.expected)} / "
                                       f"{dict(self.expected - seen)}")


# ------------------------------------------------------------------------------------------------
# Strategies: commands
# ------------------------------------------------------------------------------------------------
def _command_names() -> list[str]:
    from pisces.modes.host.commands import COMMANDS
    from pisces.modes.host.protocol import ALIASES

    return sorted(set(COMMANDS) | set(ALIASES) | {"extension_ui_response"})


scalars = (st.none() | st.booleans() | st.integers(min_value=-(2 ** 70), max_value=2 ** 70)
           | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=12))
json_values = st.recursive(scalars, lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=6), c,
                                                                                          max_size=3),
                           max_leaves=6)
non_strings = json_values.filter(lambda v: not isinstance(v, str))
texts = st.text(max_size=40) | st.sampled_from(["", " ", "/", "hello\u2028world", "x\u0000y", "é" * 20,
                                                  "/nonexistent-template arg"])

# Fields with a side effect outside the test's directories only ever get safe values.
FIELDS = {
    "message": texts | json_values,
    "streamingBehavior": st.sampled_from(["steer", "followUp", "later"]) | json_values,
    "images": json_values | st.lists(st.fixed_dictionaries({
        "type": st.just("image"), "data": st.sampled_from(["aGk=", "!!not base64"]),
        "mimeType": st.sampled_from(["image/png", "text/plain"])}), max_size=2),
    "provider": st.sampled_from(["faux", "anthropic", "openai", "nope"]) | json_values,
    "modelId": st.sampled_from(["faux", "claude-sonnet-4-5", "gpt-4o", ""]) | json_values,
    "level": st.sampled_from(["off", "minimal", "low", "medium", "high", "xhigh", "max"]) | json_values,
    "mode": st.sampled_from(["all", "one-at-a-time", "immediate", "wait", "sometimes"]) | json_values,
    "enabled": st.booleans() | json_values,
    "customInstructions": texts | json_values,
    "command": st.sampled_from(["echo hi", "true", "printf 'a\\342\\200\\250b'", "exit 3", "echo err >&2",
                                "printf '\\377\\376'"]) | non_strings,
    "sessionPath": st.sampled_from(["s1.jsonl", "garbage.jsonl", ".", "missing/dir/s.jsonl", ""]) | non_strings,
    "parentSession": texts | json_values,
    "entryId": st.text(max_size=10) | json_values,
    "targetId": st.text(max_size=10) | json_values,
    "name": texts | json_values,
    "label": texts | json_values,
    "toolNames": st.lists(st.sampled_from(["read", "bash", "edit", "write", "grep", "find", "ls", "nope"]),
                          max_size=4) | json_values,
    "outputPath": st.sampled_from(["out.html", "sub/dir/x.html", ""]) | non_strings,
    "scope": st.sampled_from(["cwd", "all", "current", "everywhere"]) | json_values,
    "sessionDir": st.sampled_from([".", "nope", "garbage.jsonl"]) | non_strings,
    "summarize": st.booleans() | json_values,
    "replaceInstructions": st.booleans() | json_values,
    "__proto__": json_values,
    "value": json_values,
    "confirmed": json_values,
}

GOOD = {  # well-formed values, so that most generated commands get past validation and do something
    "message": texts,
    "streamingBehavior": st.sampled_from(["steer", "followUp"]),
    "images": st.lists(st.fixed_dictionaries({"type": st.just("image"), "data": st.just("aGk="),
                                              "mimeType": st.just("image/png")}), max_size=1),
    "provider": st.just("faux"),
    "modelId": st.just("faux"),
    "level": st.sampled_from(["off", "minimal", "low", "medium", "high", "xhigh"]),
    "enabled": st.booleans(),
    "summarize": st.booleans(),
    "toolNames": st.lists(st.sampled_from(["read", "bash", "ls", "grep"]), max_size=3),
}
RELEVANT = {
    "prompt": ["message", "images", "streamingBehavior"], "abort_and_prompt": ["message"],
    "steer": ["message", "images"], "queue_message": ["message"], "follow_up": ["message", "images"],
    "new_session": ["parentSession"], "reset": ["parentSession"], "set_model": ["provider", "modelId"],
    "set_thinking_level": ["level"], "set_steering_mode": ["mode"], "set_queue_mode": ["mode"],
    "set_follow_up_mode": ["mode"], "set_interrupt_mode": ["mode"], "set_auto_compaction": ["enabled"],
    "set_auto_retry": ["enabled"], "compact": ["customInstructions"], "bash": ["command"],
    "export_html": ["outputPath"], "switch_session": ["sessionPath"], "fork": ["entryId"], "branch": ["entryId"],
    "set_session_name": ["name"], "list_sessions": ["scope", "sessionDir"], "get_sessions": ["scope"],
    "navigate_tree": ["targetId", "summarize", "customInstructions", "label"],
    "set_entry_label": ["targetId", "label"], "set_label": ["targetId", "label"],
    "set_active_tools": ["toolNames"], "extension_ui_response": ["value", "confirmed"],
}
# commands that start runs or change the session are drawn more often than the read-only ones
BUSY = ["prompt", "prompt", "prompt", "steer", "follow_up", "abort_and_prompt", "abort", "bash", "compact",
        "new_session", "fork", "clone", "switch_session", "navigate_tree", "set_model", "cycle_model",
        "set_thinking_level", "set_auto_retry", "export_html", "set_session_name", "set_entry_label"]

EVERY_ARGS = {
    "prompt": {"message": "hello"}, "steer": {"message": "steer"}, "queue_message": {"message": "q"},
    "follow_up": {"message": "later"}, "abort_and_prompt": {"message": "again"}, "set_model":
    {"provider": "faux", "modelId": "faux"}, "set_thinking_level": {"level": "low"}, "set_steering_mode":
    {"mode": "all"}, "set_queue_mode": {"mode": "one-at-a-time"}, "set_follow_up_mode": {"mode": "all"},
    "set_interrupt_mode": {"mode": "wait"}, "set_auto_compaction": {"enabled": True}, "set_auto_retry":
    {"enabled": True}, "bash": {"command": "echo hi"}, "export_html": {"outputPath": "out.html"},
    "switch_session": {"sessionPath": "s1.jsonl"}, "set_session_name": {"name": "fuzzed"},
    "set_active_tools": {"toolNames": ["read", "bash"]}, "navigate_tree": {"targetId": "nope"},
    "set_entry_label": {"targetId": "nope", "label": "l"}, "set_label": {"targetId": "nope", "label": "l"},
    "extension_ui_response": {"value": "x"},
}

ids = (st.text(max_size=12).filter(lambda s: not s.startswith("__barrier")) | st.integers()
       | st.integers(min_value=2 ** 64, max_value=2 ** 200) | st.floats(allow_nan=False, allow_infinity=False)
       | st.booleans() | st.lists(scalars, max_size=2) | st.dictionaries(st.text(max_size=4), scalars, max_size=2))


@st.composite
def commands(draw) -> dict:
    cmd: dict = {}
    shape = draw(st.sampled_from(["id", "id", "id", "no id", "null id"]))
    if shape == "id":
        cmd["id"] = draw(ids)
    elif shape == "null id":
        cmd["id"] = None
    kind = draw(st.integers(0, 19))
    ctype = draw(st.sampled_from(BUSY)) if kind < 10 else draw(st.sampled_from(_command_names()))
    if kind == 19:
        if draw(st.booleans()):
            cmd["type"] = draw(json_values)
    else:
        cmd["type"] = ctype
    for name in RELEVANT.get(ctype, []):
        how = draw(st.integers(0, 7))
        if how == 0:
            continue  # missing
        cmd[name] = draw(FIELDS[name]) if how == 1 or name not in GOOD else draw(GOOD[name])
    for name in draw(st.lists(st.sampled_from(sorted(FIELDS)), max_size=2, unique=True)):
        cmd.setdefault(name, draw(FIELDS[name]))
    return cmd


def encode(cmd: dict, ascii_only: bool, crlf: bool) -> bytes:
    line = json.dumps(cmd, ensure_ascii=ascii_only).encode("utf-8")
    return line + b"\r" if crlf else line


@st.composite
def command_batches(draw) -> list[bytes]:
    cmds = draw(st.lists(commands(), min_size=1, max_size=6))
    seen: set[str] = set()
    for cmd in cmds:  # ids unique within a batch, so each response is attributable
        if cmd.get("id") is not None:
            key = expected_reply(json.dumps({"id": cmd["id"]}).encode())
            if key in seen:
                del cmd["id"]
            else:
                seen.add(key)
    return [encode(c, draw(st.booleans()), draw(st.integers(0, 7)) == 0) for c in cmds]


# ------------------------------------------------------------------------------------------------
# Strategies: raw garbage
# ------------------------------------------------------------------------------------------------
def nested(depth: int, with_id: bool) -> bytes:
    core = b"[" * depth + b"]" * depth
    return b'{"id":"deep","type":"get_state","x":' + core + b"}" if with_id else core


NASTY = [
    b"", b" ", b"\r", b"\r\r", b"\t", b"\x00", b"\x00" * 64, b"\xff\xfe\xfd", b"\xef\xbb\xbf{}", b"null", b"[]",
    b"[1,2,3]", b'"just a string"', b"42", b"1e400", b"-0", b"true", b"NaN", b"Infinity", b"-Infinity",
    b'{"id":NaN,"type":"get_state"}', b'{"id":Infinity,"type":"get_state"}',
    b'{"id":1e400,"type":"get_state"}', b'{"id":-1e400,"type":"get_state"}', b'{"id":1e-400,"type":"get_state"}',
    b'{"id":' + b"9" * 5000 + b',"type":"get_state"}', b'{"id":-' + b"7" * 400 + b',"type":"nope"}',
    b'{"id":123456789012345678901234567890,"type":"get_state"}', b'{"id":18446744073709551616,"type":"get_state"}',
    b'{"id":"n1","type":"set_thinking_level","level":1e999}', b'{"id":"n2","type":"prompt","message":1e999}',
    b'{"id":"n3","type":"set_active_tools","toolNames":[' + b"1" * 3000 + b"]}",
    b'{"id":"nul1","type":"prompt","message":"a\x00b"}', b'{"id":"nul2","type":"prompt","message":"a\\u0000b"}',
    b'{"id":"nul3\\u0000","type":"get_state"}', b'{"id":"bad\xff\xfe","type":"get_state"}',
    b'{"id":"cesu\xed\xa0\x80","type":"prompt","message":"\xed\xb0\x80"}',
    b'{"id":"lone\\ud800","type":"get_state"}', b'{"id":"lone2","type":"prompt","message":"x\\udfff\\ud800y"}',
    b'{"id":"lone3","type":"nope\\ud83d"}', b'{"id":"lone4","type":"set_session_name","name":"\\udc00"}',
    b'{"id":"ls\xe2\x80\xa8x","type":"get_state"}', b'{"id":"ps","type":"prompt","message":"a\xe2\x80\xa9b"}',
    b'\xe2\x80\xa8{"id":"ws","type":"get_state"}', b'{"id":"crlf","type":"get_state"}\r',
    b'{"id":"dup","id":"dup-2","type":"get_state"}', b'{"id":"ty","type":"get_state","type":"bogus"}',
    b'{"id":"ext","type":"extension_ui_response","value":"x"}', b'{"type":"extension_ui_response","id":7}',
    b'{"id":{"nested":[1,{"a":null}]},"type":"nope"}', b'{"id":[],"type":"get_state"}', b'{"id":false}',
    b'{"id":"trail","type":"get_state"} x', b'{"id":"trunc","type":"get_st', b'{"id":"x"}{"id":"y"}',
    nested(10, True), nested(100, False), nested(20_000, True), nested(20_000, False), b"{" * 50_000,
    b'{"a":' * 30_000,
]


@st.composite
def mutated(draw) -> bytes:
    line = bytearray(encode(draw(commands()), draw(st.booleans()), False))
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(["cut", "insert", "replace"]))
        at = draw(st.integers(0, len(line)))
        if op == "cut":
            del line[at:]
        else:
            junk = draw(st.binary(min_size=1, max_size=4)).replace(b"\n", b"\\")
            if op == "replace":
                del line[at:at + len(junk)]
            line[at:at] = junk
    return bytes(line)


@st.composite
def huge_number_command(draw) -> bytes:
    digits = draw(st.integers(1, 600))
    number = draw(st.sampled_from([b"9" * digits, b"-" + b"1" * digits, b"1e" + str(digits).encode(),
                                   b"1e-" + str(digits).encode(), b"0." + b"3" * digits]))
    where = draw(st.sampled_from(["id", "field"]))
    if where == "id":
        return b'{"id":' + number + b',"type":"get_state"}'
    return b'{"id":"num","type":"' + draw(st.sampled_from(_command_names())).encode() + b'","level":' + number + b"}"


garbage_lines = (st.binary(max_size=200).map(lambda b: b.replace(b"\n", b""))
                 | st.sampled_from(NASTY) | mutated() | huge_number_command())


@st.composite
def garbage_batches(draw) -> list[bytes]:
    lines = draw(st.lists(garbage_lines, min_size=1, max_size=8))
    out: list[bytes] = []
    seen: set[str] = set()
    for line in lines:  # keep ids unique within a batch (a repeated one is sent without its id key... or not)
        key = expected_reply(line)
        if key not in (NO_ID, SILENT) and key in seen:
            continue
        seen.add(key)
        out.append(line)
    return out or [b"\x00"]


# ------------------------------------------------------------------------------------------------
# Tests
# ------------------------------------------------------------------------------------------------
def test_generated_commands_each_get_one_answer(tmp_path):
    agent = start_agent(tmp_path)
    try:
        agent.wait_for(lambda f: f.get("type") == "ready")
        exchange = Exchange(agent)
        # every command name once, well-formed and then with no fields, whatever hypothesis draws
        exchange.run([json.dumps({"id": f"every-{name}", "type": name, **EVERY_ARGS.get(name, {})}).encode()
                      for name in _command_names()])
        exchange.run([json.dumps({"id": f"bare-{name}", "type": name}).encode() for name in _command_names()])

        @settings(**FUZZ_SETTINGS)
        @given(command_batches())
        def check(lines: list[bytes]) -> None:
            exchange.run(lines)

        check()
        exchange.finish()
    finally:
        agent.cleanup()


def test_raw_garbage_never_kills_the_process(tmp_path):
    agent = start_agent(tmp_path)
    try:
        agent.wait_for(lambda f: f.get("type") == "ready")
        exchange = Exchange(agent)
        exchange.run(NASTY)  # every hand-written case once, whatever hypothesis draws

        @settings(**FUZZ_SETTINGS)
        @given(garbage_batches())
        def check(lines: list[bytes]) -> None:
            exchange.run(lines)

        check()
        exchange.finish()
    finally:
        agent.cleanup()


def test_ten_megabyte_lines(tmp_path):
    """A 10 MB prompt is answered and run; a 10 MB non-JSON line gets one short parse error; both in one read."""
    agent = start_agent(tmp_path)
    try:
        agent.wait_for(lambda f: f.get("type") == "ready")
        exchange = Exchange(agent)
        big_text = ("0123456789abcdé\u2028" * (10 * 1024 * 1024 // 18)).encode("utf-8")
        lines = [
            b'{"id":"big-prompt","type":"prompt","message":"' + big_text + b'"}',
            b"x" * (10 * 1024 * 1024),
            b'{"id":"big-unterminated","type":"prompt","message":"' + big_text,
            b'{"id":"big-name","type":"set_session_name","name":"' + b"n" * (10 * 1024 * 1024) + b'"}',
        ]
        exchange.run(lines)
        parse = [f for f in agent.frames if f.get("command") == "parse"]
        assert parse and all(len(f["error"]) < 1000 for f in parse), "a parse error quotes at most a snippet"
        ends = [f for f in agent.frames if f.get("type") == "agent_end"]
        assert len(ends) == 1, f"the 10 MB prompt ran once: {len(ends)} agent_end"
        exchange.finish()
    finally:
        agent.cleanup()
