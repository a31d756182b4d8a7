"""Session files cross between pisces and pi 0.73.1 in both directions.

pisces -> pi: a session pisces wrote (through the real process, faux model, a tool turn) is opened by pi's
RPC mode with ``switch_session``, and pi's ``get_messages`` returns the same messages.
pi -> pisces: the files pi wrote in the recorded conformance runs are opened by ``pisces --mode rpc`` and
``get_messages`` returns what pi itself answered in that run (see tests/core/store for the tree checks).

The pi side needs node and npm (pi is installed from the npm registry by the conformance kit's script);
it is skipped, with the reason, when they are not there.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys

import pytest

from shared_paths import SHARED

INSTALL_PI = os.path.join(SHARED, "conformance", "install_pi.sh")
PI_RUNS = os.path.join(SHARED, "conformance", "pi-0.73.1")


def _pi_cli() -> str:
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("node/npm not found: pi 0.73.1 cannot be run here")
    if not os.path.exists(INSTALL_PI):
        pytest.skip(f"the conformance kit is not beside the repository ({INSTALL_PI})")
    try:
        out = subprocess.run(["bash", INSTALL_PI], capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        pytest.skip("installing pi 0.73.1 from npm timed out")
    cli = out.stdout.strip().splitlines()[-1] if out.stdout.strip() else ""
    if out.returncode != 0 or not os.path.exists(cli):
        pytest.skip(f"pi 0.73.1 could not be installed from npm: {out.stderr.strip()[-300:]}")
    return cli


def _rpc(cmd: list[str], lines: list[dict], env: dict, cwd: str, timeout: float = 60,
         until: str | None = None) -> list[dict]:
    """Send the lines one at a time, each after the previous one's response; then wait for a frame of type
    ``until`` (if given), close stdin and return every frame."""
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env, cwd=cwd)
    frames: list[dict] = []

    def read_until(pred) -> None:
        for line in proc.stdout:
            try:
                frames.append(json.loads(line))
            except ValueError:
                continue
            if pred(frames[-1]):
                return
        raise AssertionError(f"{cmd[0]} ended before the expected frame; stderr: {proc.stderr.read()[-500:]}")

    try:
        for x in lines:
            proc.stdin.write(json.dumps(x) + "\n")
            proc.stdin.flush()
            read_until(lambda f, rid=x["id"]: f.get("type") == "response" and f.get("id") == rid)
        if until is not None:
            read_until(lambda f: f.get("type") == until)
        out, _ = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    for line in out.splitlines():
        try:
            frames.append(json.loads(line))
        except ValueError:
            pass
    return frames


def _response(frames: list[dict], rid: str) -> dict:
    found = [f for f in frames if f.get("type") == "response" and f.get("id") == rid]
    assert found, f"no response {rid} in {frames[-5:]}"
    return found[0]


def _strip(messages: list[dict]) -> list[dict]:
    return json.loads(json.dumps(messages))


def _env(home: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(HOME=home, PISCES_CODING_AGENT_DIR=os.path.join(home, ".pisces", "agent"), TZ="UTC")
    return env


def test_pi_opens_a_session_written_by_pisces(tmp_path):
    cli = _pi_cli()
    home = str(tmp_path / "home")
    work = tmp_path / "work"
    work.mkdir()
    (work / "hello.txt").write_text("hello from a file\n")
    script = tmp_path / "script.json"
    script.write_text(json.dumps([
        {"text": "Reading it.", "toolCalls": [{"name": "read", "arguments": {"path": "hello.txt"}}]},
        {"text": "The file says hello. Ünïcödé and \u2028 survive."},
    ]))
    env = _env(home)
    ours = _rpc([sys.executable, "-m", "pisces", "--mode", "rpc", "--provider", "faux", "--faux-script",
                 str(script)], [{"id": "p", "type": "prompt", "message": "What does hello.txt say?"}], env,
                str(work), until="agent_settled")
    files = glob.glob(os.path.join(home, ".pisces", "agent", "sessions", "*", "*.jsonl"))
    assert _response(ours, "p")["success"] is True
    assert len(files) == 1, files
    session_file = files[0]
    with open(session_file, encoding="utf-8") as f:
        entries = [json.loads(line) for line in f if line.strip()]
    our_messages = [e["message"] for e in entries if e.get("type") == "message"]
    assert [m["role"] for m in our_messages] == ["user", "assistant", "toolResult", "assistant"]

    pi_home = str(tmp_path / "pi-home")
    frames = _rpc(["node", cli, "--mode", "rpc"],
                  [{"id": "s", "type": "switch_session", "sessionPath": session_file},
                   {"id": "m", "type": "get_messages"}], _env(pi_home), str(work))
    assert _response(frames, "s")["success"] is True, _response(frames, "s")
    got = _response(frames, "m")
    assert got["success"] is True, got
    assert _strip(got["data"]["messages"]) == _strip(our_messages)


@pytest.mark.parametrize("scenario", ["02_prompt_text", "03_prompt_bash_tool", "05_rpc_bash", "16_prompt_images"])
def test_pisces_opens_sessions_written_by_pi(tmp_path, scenario):
    files = sorted(glob.glob(os.path.join(PI_RUNS, scenario, "sessions", "*.jsonl")))
    transcript = os.path.join(PI_RUNS, f"{scenario}.transcript.jsonl")
    if not files or not os.path.exists(transcript):
        pytest.skip(f"recorded pi run {scenario} not found beside the repository")
    # what pi answered to its last get_messages in that run
    pi_messages = None
    for line in open(transcript, encoding="utf-8"):
        rec = json.loads(line)
        if rec["dir"] == "out":
            frame = json.loads(rec["line"])
            if frame.get("command") == "get_messages" and frame.get("success"):
                pi_messages = frame["data"]["messages"]
    if pi_messages is None:
        pytest.skip(f"{scenario} has no get_messages answer to compare with")
    copy = tmp_path / os.path.basename(files[-1])
    shutil.copy(files[-1], copy)
    home = str(tmp_path / "home")
    frames = _rpc([sys.executable, "-m", "pisces", "--mode", "rpc"],
                  [{"id": "s", "type": "switch_session", "sessionPath": str(copy)}, {"id": "m", "type": "get_messages"}],
                  _env(home), str(tmp_path))
    assert _response(frames, "s")["success"] is True
    got = _response(frames, "m")["data"]["messages"]
    # pi's last get_messages may precede later turns of the run; the file holds at least those messages
    assert _strip(got[:len(pi_messages)]) == _strip(pi_messages)
