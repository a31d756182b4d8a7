"""The CLI skeleton: version, help, clear errors for bad values, and no SDK imported at start-up."""

import json
import os
import subprocess
import sys

import pytest

from pisces import __version__

SDKS = ("openai", "anthropic", "google.genai", "httpx2", "httpx", "pydantic")


def run(*args: str, stdin: str | None = None, env: dict | None = None, timeout: float = 30):
    return subprocess.run([sys.executable, "-m", "pisces", *args], input=stdin, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})})


def test_version_and_help():
    r = run("--version")
    assert r.returncode == 0 and r.stdout.strip() == f"pisces {__version__}"
    h = run("--help")
    assert h.returncode == 0
    for flag in ("--provider", "--model", "--api-key", "--thinking", "--mode", "--print", "--no-session",
                 "--session-dir", "--faux-script", "--export"):
        assert flag in h.stdout


@pytest.mark.parametrize("args,needle", [
    (["--mode", "tui"], "invalid value 'tui' for --mode"),
    (["--thinking", "max"], "invalid value 'max' for --thinking"),
    (["--mode", "rpc", "-p", "x"], "cannot be combined"),
    (["--mode", "rpc", "@file.txt"], "@file arguments are not supported in RPC mode"),
    (["--provider", "faux", "--faux-script", "/nonexistent/script.json", "-p", "hi"], "Cannot read faux script"),
    (["--model", "no-such-provider/no-such-model", "-p", "hi", "--no-session"], "no-such"),
])
def test_bad_values_give_one_clear_error(args, needle):
    r = run(*args)
    assert r.returncode != 0
    assert needle in r.stderr
    assert "Traceback" not in r.stderr


def test_a_pipe_keeps_print_mode_and_a_tty_starts_the_tui():
    r = subprocess.run([sys.executable, "-c", "import sys; sys.stdin.isatty = lambda: True; "
                        "sys.stdout.isatty = lambda: False; from pisces.cli import main; raise SystemExit(main([]))"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "no prompt given" in r.stderr  # stdout is a pipe: print mode, as before


@pytest.mark.parametrize("code", [
    "import pisces",
    "import sys; sys.argv = ['pisces', '--version']\nfrom pisces.cli import main\ntry:\n    main()\nexcept SystemExit:\n    pass",
    "import pisces.ai.stream, pisces.ai.types, pisces.ai.models, pisces.agent.agent, pisces.core.session.build",
])
def test_start_up_imports_no_sdk(code):
    probe = code + "\nimport sys, json\nprint(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in " \
                   "('openai', 'anthropic', 'google', 'httpx2', 'httpx', 'pydantic'))))"
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    loaded = json.loads(r.stdout.strip().splitlines()[-1])
    assert [m for m in loaded if m.startswith(SDKS)] == []


def test_print_mode_with_a_faux_script(tmp_path):
    script = tmp_path / "s.json"
    script.write_text(json.dumps([{"text": "scripted hello"}]))
    r = run("--provider", "faux", "--faux-script", str(script), "--no-session", "-p", "hi")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "scripted hello"


def test_demo_uses_the_bash_tool(tmp_path):
    (tmp_path / "marker-file.txt").write_text("x")
    r = subprocess.run([sys.executable, "-m", "pisces", "--provider", "faux", "--no-session", "--mode", "json",
                        "list the files"], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    events = [json.loads(line) for line in r.stdout.splitlines()]
    starts = [e for e in events if e["type"] == "tool_execution_start"]
    assert starts and starts[0]["toolName"] == "bash"
    ends = [e for e in events if e["type"] == "tool_execution_end"]
    assert "marker-file.txt" in ends[0]["result"]["content"][0]["text"]
    assert events[-1]["type"] in ("agent_end", "agent_settled")
