"""Every flag pi 0.73.1 accepts (``pi --help``) is accepted; the ones with a meaning here act, the others give
one line on stderr; ``--list-models``, ``--resume``, ``--fork``, ``--no-builtin-tools`` and pi's environment
variable for the agent directory work."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys

import pytest

from pisces.cli import IGNORED_FLAGS, build_parser, ignored_flags_note
from pisces.modes.session_picker import choose

# (flag, value or None) for every option of `pi --help` in 0.73.1, long and short spellings
PI_FLAGS = [
    ("--provider", "faux"), ("--model", "faux"), ("--api-key", "k"), ("--system-prompt", "s"),
    ("--append-system-prompt", "a"), ("--mode", "rpc"), ("--print", None), ("-p", None), ("--continue", None),
    ("-c", None), ("--resume", None), ("-r", None), ("--session", "x.jsonl"), ("--fork", "x.jsonl"),
    ("--session-dir", "d"), ("--no-session", None), ("--models", "a,b"), ("--no-tools", None), ("-nt", None),
    ("--no-builtin-tools", None), ("-nbt", None), ("--tools", "read"), ("-t", "read"), ("--thinking", "high"),
    ("--extension", "e.ts"), ("-e", "e.ts"), ("--no-extensions", None), ("-ne", None), ("--skill", "s"),
    ("--no-skills", None), ("-ns", None), ("--prompt-template", "p"), ("--no-prompt-templates", None),
    ("-np", None), ("--theme", "t"), ("--no-themes", None), ("--no-context-files", None), ("-nc", None),
    ("--export", "s.jsonl"), ("--list-models", None), ("--list-models", "sonnet"), ("--verbose", None),
    ("--offline", None),
]


@pytest.mark.parametrize("flag,value", PI_FLAGS)
def test_every_pi_flag_parses(flag, value):
    args = build_parser().parse_args([flag] + ([value] if value is not None else []))
    assert args is not None


def test_extension_flags_have_the_agreed_destinations():
    args = build_parser().parse_args(["-e", "a.ts", "--extension", "b.ts", "--skill", "s1", "--skill", "s2",
                                      "--prompt-template", "p", "-ne", "-ns", "-np"])
    assert args.extensions == ["a.ts", "b.ts"] and args.skills == ["s1", "s2"] and args.prompt_templates == ["p"]
    assert args.no_extensions and args.no_skills and args.no_prompt_templates


def test_ignored_flags_give_one_line():
    assert ignored_flags_note(build_parser().parse_args([])) is None
    note = ignored_flags_note(build_parser().parse_args(["--no-themes", "--verbose", "-e", "x.py"]))
    assert note is not None and "\n" not in note
    assert "--no-themes" in note and "--verbose" in note
    assert "--extension" not in note  # extensions, skills and prompt-template paths act (docs/extensions.md)
    assert set(IGNORED_FLAGS) >= {"themes", "verbose"}
    assert not set(IGNORED_FLAGS) & {"extensions", "no_extensions", "skills", "no_skills", "prompt_templates",
                                     "no_prompt_templates"}


def run(*args: str, env: dict | None = None, cwd: str | None = None, stdin: str | None = None,
        timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pisces", *args], capture_output=True, text=True, env=env,
                          cwd=cwd, input=stdin, timeout=timeout)


@pytest.fixture
def env(tmp_path):
    agent = tmp_path / "agent"
    agent.mkdir()
    e = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and not k.startswith(("PI_", "PISCES_"))}
    e.update(HOME=str(tmp_path), PISCES_CODING_AGENT_DIR=str(agent))
    return e


def test_wrapper_flags_do_not_stop_rpc_mode(env, tmp_path):
    r = run("--mode", "rpc", "--provider", "faux", "--no-session", "--no-themes", "--offline", "--verbose",
            "-ne", "-ns", "-np", "--theme", "dark", stdin='{"id":"s","type":"get_state"}\n', env=env,
            cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    frames = [json.loads(line) for line in r.stdout.splitlines()]
    assert frames[-1]["id"] == "s" and frames[-1]["success"] is True
    notes = [line for line in r.stderr.splitlines() if line.startswith("pisces: ignoring")]
    assert len(notes) == 1 and "--no-themes" in notes[0]


def test_no_builtin_tools_and_tools(env, tmp_path):
    for flags, active in ((["-nbt"], []), (["--no-builtin-tools", "-t", "read,ls"], ["read", "ls"])):
        r = run("--mode", "rpc", "--provider", "faux", "--no-session", *flags,
                stdin='{"id":"t","type":"get_tools"}\n', env=env, cwd=str(tmp_path))
        data = [json.loads(line) for line in r.stdout.splitlines()][-1]["data"]
        assert data["activeToolNames"] == active


def test_list_models_prints_the_catalogue_with_key_status(env, tmp_path):
    env = {**env, "OPENAI_API_KEY": "sk-test"}
    r = run("--list-models", env=env, cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].split() == ["provider", "model", "context", "max-out", "thinking", "images", "key"]
    rows = [line.split() for line in lines[1:]]
    assert any(row[0] == "anthropic" and "ANTHROPIC_API_KEY" in " ".join(row) for row in rows)
    assert any(row[0] == "openai" and row[-1] == "env:OPENAI_API_KEY" for row in rows)
    assert any(row[:2] == ["faux", "faux"] for row in rows)
    search = run("--list-models", "sonnet", env=env, cwd=str(tmp_path)).stdout.splitlines()[1:]
    # pi's fuzzy search: every word, or the letters in order; the whole catalogue's sonnets are there
    assert any(line.split()[:2] == ["anthropic", "claude-sonnet-4-6"] for line in search)
    assert any(line.split()[:2] == ["openrouter", "anthropic/claude-sonnet-4.6"] for line in search)
    assert not any(line.split()[0] == "faux" for line in search)
    assert run("--list-models", "zzzqqq", env=env, cwd=str(tmp_path)).stdout.strip() == 'No models matching "zzzqqq"'


def test_list_models_filters_by_provider_capability_price_and_key(env, tmp_path):
    from pisces.ai import catalogue

    env = {**env, "GROQ_API_KEY": "gsk-test"}
    r = run("--list-models", "provider:groq is:reasoning max-input:0.2", env=env, cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    rows = [line.split() for line in r.stdout.splitlines()[1:]]
    want = sorted(m.id for m in catalogue.models("groq") if m.reasoning and m.cost.input <= 0.2)
    assert want and [row[1] for row in rows] == want
    assert all(row[0] == "groq" and row[4] == "yes" and row[-1] == "env:GROQ_API_KEY" for row in rows)
    r = run("--list-models", "is:available", env=env, cwd=str(tmp_path))
    assert {line.split()[0] for line in r.stdout.splitlines()[1:]} == {"groq", "faux"}
    r = run("--list-models", "is:images context:1m gemini", env=env, cwd=str(tmp_path))
    rows = [line.split() for line in r.stdout.splitlines()[1:]]
    assert ["google", "gemini-2.5-pro"] in [row[:2] for row in rows]
    assert all(row[5] == "yes" and row[2].endswith("M") for row in rows)  # images, a window of 1M or more
    r = run("--list-models", "context:lots", env=env, cwd=str(tmp_path))
    assert r.returncode == 2 and 'context needs a number, not "lots"' in r.stderr


def test_get_available_models_lists_only_providers_with_credentials(env, tmp_path):
    """Over RPC, as pi: a key from the provider's variable (Groq) or from auth.json (Z.ai) makes all of that
    provider's catalogue models available; no other provider's models are listed."""
    from pisces.ai import catalogue

    (tmp_path / "agent" / "auth.json").write_text(json.dumps({"zai": {"type": "api_key", "key": "zk"}}))
    env = {**env, "GROQ_API_KEY": "gsk-test"}
    r = run("--mode", "rpc", "--no-session", stdin='{"id":"m","type":"get_available_models"}\n', env=env,
            cwd=str(tmp_path))
    reply = [json.loads(line) for line in r.stdout.splitlines() if '"get_available_models"' in line][-1]
    models = reply["data"]["models"]
    assert {m["provider"] for m in models} == {"groq", "zai"}
    assert [m["id"] for m in models if m["provider"] == "groq"] == [m.id for m in catalogue.models("groq")]
    assert len([m for m in models if m["provider"] == "zai"]) == len(catalogue.models("zai"))
    zai = next(m for m in models if m["provider"] == "zai")
    assert zai["baseUrl"] == "https://api.z.ai/api/coding/paas/v4" and zai["compat"]["thinkingFormat"] == "zai"


def _make_session(env, cwd, text):
    r = run("--provider", "faux", "--faux-script", _script(cwd), "-p", text, env=env, cwd=cwd)
    assert r.returncode == 0, r.stderr


def _script(cwd):
    path = os.path.join(cwd, "script.json")
    with open(path, "w") as f:
        json.dump({"responses": [{"text": "ok"}], "loop": True}, f)
    return path


def _state(env, cwd, *flags):
    r = run("--mode", "rpc", "--provider", "faux", *flags, stdin='{"id":"s","type":"get_state"}\n'
            '{"id":"m","type":"get_messages"}\n', env=env, cwd=cwd)
    assert r.returncode == 0, r.stderr
    frames = {f.get("id"): f for f in map(json.loads, r.stdout.splitlines())}
    return frames["s"]["data"], frames["m"]["data"]["messages"]


def test_fork_copies_a_session_into_a_new_one(env, tmp_path):
    cwd = str(tmp_path)
    _make_session(env, cwd, "remember me")
    sessions = os.path.join(env["PISCES_CODING_AGENT_DIR"], "sessions")
    original = [os.path.join(d, f) for d, _, fs in os.walk(sessions) for f in fs][0]
    state, messages = _state(env, cwd, "--fork", original)
    assert state["sessionFile"] != original
    assert [m["content"][0]["text"] for m in messages if m["role"] == "user"] == ["remember me"]
    with open(state["sessionFile"]) as f:
        assert json.loads(f.readline())["parentSession"] == original
    r = run("--fork", original, "--no-session", "-p", "x", env=env, cwd=cwd)
    assert r.returncode == 2 and "--fork cannot be combined with --no-session" in r.stderr


def test_pi_agent_dir_variable_is_used_when_pisces_own_is_unset(env, tmp_path):
    pi_dir = tmp_path / "pi-agent"
    pi_env = {k: v for k, v in env.items() if k != "PISCES_CODING_AGENT_DIR"}
    pi_env["PI_CODING_AGENT_DIR"] = str(pi_dir)
    _make_session(pi_env, str(tmp_path), "in pi's dir")
    assert any(f.endswith(".jsonl") for _, _, fs in os.walk(pi_dir / "sessions") for f in fs)
    # pisces' own variable wins when both are set
    both = {**pi_env, "PISCES_CODING_AGENT_DIR": env["PISCES_CODING_AGENT_DIR"]}
    _make_session(both, str(tmp_path), "in pisces' dir")
    assert os.path.isdir(os.path.join(env["PISCES_CODING_AGENT_DIR"], "sessions"))


def test_resume_without_a_terminal_says_what_to_use(env, tmp_path):
    cwd = str(tmp_path)
    _make_session(env, cwd, "first")
    r = subprocess.run([sys.executable, "-m", "pisces", "--resume", "-p", "again"], capture_output=True, text=True,
                       env=env, cwd=cwd, stdin=subprocess.DEVNULL, start_new_session=True, timeout=60)
    assert r.returncode == 2 and "--resume needs a terminal" in r.stderr and "--session" in r.stderr


class _Info:
    def __init__(self, n: int) -> None:
        self.name = None
        self.firstMessage = f"message {n}"
        self.modified = f"2026-11-2{n}T10:00:00.000Z"
        self.messageCount = n
        self.path = f"/s/{n}.jsonl"


def test_resume_picker_reads_a_number_and_rejects_others():
    sessions = [_Info(3), _Info(2), _Info(1)]
    out = io.StringIO()
    assert choose(sessions, io.StringIO("9\nabc\n2\n"), out).path == "/s/2.jsonl"
    shown = out.getvalue()
    assert "1. 2026-11-23 10:00" in shown and "message 3" in shown and "Not a number from 1 to 3: 9" in shown
    assert choose(sessions, io.StringIO("\n"), io.StringIO()) is None  # Enter cancels
    assert choose(sessions, io.StringIO(""), io.StringIO()) is None  # end of input cancels
