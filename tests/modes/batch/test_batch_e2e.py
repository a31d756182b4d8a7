"""``pisces batch`` against real git repositories, through the real process, with the faux model.

Each test bounds its own time: every process is spawned with a time-out and killed by the fixture."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

GIT_ID = ["-c", "user.name=T", "-c", "user.email=t@example.com"]
BOUND_S = 120


def git(*args: str, cwd: str) -> str:
    return subprocess.run(["git", *GIT_ID, *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def make_repo(path, files: dict[str, str]) -> str:
    os.makedirs(path)
    git("init", "-q", cwd=str(path))
    for name, text in files.items():
        (path / name).write_text(text)
    git("add", "-A", cwd=str(path))
    git("commit", "-qm", "start", cwd=str(path))
    return str(path)


def write_script(path, responses) -> str:
    path.write_text(json.dumps({"responses": responses, "loop": True}))
    return str(path)


def write_manifest(path, rows) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def batch(*args: str, cwd: str, timeout: float = BOUND_S) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pisces", "batch", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def results(out) -> list[dict]:
    with open(os.path.join(out, "results.jsonl"), encoding="utf-8") as f:
        return [json.loads(line) for line in f]


WRITE = [{"toolCalls": [{"name": "write", "arguments": {"path": "new.txt", "content": "made by the agent\n"}}]},
         {"text": "done"}]


def test_a_manifest_of_path_and_url_repos_records_patches_and_never_touches_the_sources(tmp_path):
    src = make_repo(tmp_path / "src", {"a.txt": "one\n"})
    git("commit", "-q", "--allow-empty", "-m", "second", cwd=src)
    first = git("rev-list", "--max-parents=0", "HEAD", cwd=src).strip()
    bare = tmp_path / "remote.git"
    subprocess.run(["git", "clone", "-q", "--bare", src, str(bare)], check=True)
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "b.txt").write_text("not a repository\n")
    script = write_script(tmp_path / "faux.json", WRITE)
    manifest = write_manifest(tmp_path / "m.jsonl", [
        {"id": "by-path", "repo": "src", "prompt": "add a file", "verify": ["test -f new.txt"]},
        {"id": "by-url", "repo": f"file://{bare}", "commit": first, "prompt": "add a file"},
        {"id": "plain-dir", "repo": "plain", "prompt": "add a file"},
        {"id": "bad-verify", "repo": "src", "prompt": "add a file", "verify": ["test -f missing.txt"]},
    ])
    run = batch(manifest, "--faux-script", script, "--out", "out", "--parallel", "2", "--plain",
                cwd=str(tmp_path))
    assert run.returncode == 1, run.stderr  # one item failed its verification
    rows = {r["id"]: r for r in results(tmp_path / "out")}
    assert set(rows) == {"by-path", "by-url", "plain-dir", "bad-verify"}
    assert rows["by-path"]["status"] == "succeeded" and rows["by-path"]["verification"]["passed"] is True
    assert rows["by-url"]["status"] == "succeeded" and rows["plain-dir"]["status"] == "succeeded"
    assert rows["bad-verify"]["status"] == "verify_failed"
    assert rows["bad-verify"]["error"] == "verify failed: test -f missing.txt"
    for row in rows.values():
        patch = (tmp_path / "out" / row["patch"]).read_text()
        assert "+made by the agent" in patch and "new.txt" in patch
        session = (tmp_path / "out" / row["session_file"]).read_text().splitlines()
        assert json.loads(session[0])["type"] == "session"
        assert row["usage"]["input"] > 0 and row["tool_calls"] == 1 and row["exit_code"] == 0
    # the sources are as they were
    assert git("status", "--porcelain", cwd=src) == "" and not os.path.exists(os.path.join(src, "new.txt"))
    assert sorted(os.listdir(plain)) == ["b.txt"]
    # the patch applies to the source
    subprocess.run(["git", "apply", "--check", str(tmp_path / "out" / rows["by-path"]["patch"])], cwd=src,
                   check=True)
    assert "4 items: 3 succeeded, 1 verify_failed" in run.stderr


def test_timeout_and_budget_stop_are_their_own_statuses(tmp_path):
    make_repo(tmp_path / "src", {"a.txt": "one\n"})
    slow = write_script(tmp_path / "slow.json", [{"text": "word " * 400, "delayMs": 50}])
    manifest = write_manifest(tmp_path / "m.jsonl", [{"id": "slow", "repo": "src", "prompt": "x", "timeout": 2}])
    run = batch(manifest, "--faux-script", slow, "--out", "out", "--plain", cwd=str(tmp_path))
    [row] = results(tmp_path / "out")
    assert run.returncode == 1 and row["status"] == "timeout" and row["exit_code"] is None
    assert row["error"] == "the agent did not finish within 2 s"

    two_tools = write_script(tmp_path / "tools.json", [
        {"toolCalls": [{"name": "bash", "arguments": {"command": "echo 1"}}]},
        {"toolCalls": [{"name": "bash", "arguments": {"command": "echo 2"}}]},
        {"toolCalls": [{"name": "bash", "arguments": {"command": "echo 3"}}]},
        {"text": "done"}])
    manifest = write_manifest(tmp_path / "b.jsonl", [
        {"id": "capped", "repo": "src", "prompt": "x", "budget": {"maxToolCalls": 1}}])
    run = batch(manifest, "--faux-script", two_tools, "--out", "out2", "--plain", cwd=str(tmp_path))
    [row] = results(tmp_path / "out2")
    assert run.returncode == 1 and row["status"] == "budget_exceeded", row
    assert row["budget"] == {"reason": "tool_calls", "limit": 1, "spent": 2, "scope": "session"}
    assert row["error"] == "budget exceeded: tool_calls (limit 1, spent 2)"


def test_conflicting_patches_are_each_recorded_against_the_same_base(tmp_path):
    src = make_repo(tmp_path / "src", {"a.txt": "line\n"})
    left = write_script(tmp_path / "left.json", [
        {"toolCalls": [{"name": "write", "arguments": {"path": "a.txt", "content": "left\n"}}]}, {"text": "ok"}])
    manifest = write_manifest(tmp_path / "m.jsonl", [{"id": "left", "repo": "src", "prompt": "x"}])
    assert batch(manifest, "--faux-script", left, "--out", "out", cwd=str(tmp_path)).returncode == 0
    right = write_script(tmp_path / "right.json", [
        {"toolCalls": [{"name": "write", "arguments": {"path": "a.txt", "content": "right\n"}}]}, {"text": "ok"}])
    manifest = write_manifest(tmp_path / "m2.jsonl", [{"id": "right", "repo": "src", "prompt": "x"}])
    assert batch(manifest, "--faux-script", right, "--out", "out", cwd=str(tmp_path)).returncode == 0
    rows = {r["id"]: r for r in results(tmp_path / "out")}
    lp, rp = (str(tmp_path / "out" / rows[k]["patch"]) for k in ("left", "right"))
    subprocess.run(["git", "apply", lp], cwd=src, check=True)
    clash = subprocess.run(["git", "apply", "--check", rp], cwd=src, capture_output=True, text=True)
    assert clash.returncode != 0 and "patch does not apply" in clash.stderr


def test_ctrl_c_leaves_a_valid_results_file_and_a_second_run_does_the_rest(tmp_path):
    make_repo(tmp_path / "src", {"a.txt": "one\n"})
    quick = {"text": "quick"}
    # each item streams for about 3 s: the process is interrupted while the second one runs
    script = write_script(tmp_path / "s.json", [{"text": "word " * 60, "delayMs": 80}])
    rows = [{"id": f"item{i}", "repo": "src", "prompt": "x"} for i in range(4)]
    manifest = write_manifest(tmp_path / "m.jsonl", rows)
    proc = subprocess.Popen([sys.executable, "-m", "pisces", "batch", manifest, "--faux-script", script,
                             "--out", "out", "--parallel", "1", "--plain"], cwd=str(tmp_path),
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + BOUND_S
        out_file = tmp_path / "out" / "results.jsonl"
        while time.monotonic() < deadline and not (out_file.exists() and out_file.read_text().count("\n") >= 1):
            time.sleep(0.05)
        time.sleep(0.5)  # the second item is under way
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    first = results(tmp_path / "out")
    assert [r["id"] for r in first] == ["item0"] and "interrupted" in err
    # a torn line, as a kill mid-write would leave it, is cut off before the next append
    with open(tmp_path / "out" / "results.jsonl", "a") as f:
        f.write('{"id":"item1","status":"succ')
    (tmp_path / "s.json").write_text(json.dumps({"responses": [quick], "loop": True}))
    run = batch(manifest, "--faux-script", script, "--out", "out", "--parallel", "2", "--plain",
                cwd=str(tmp_path))
    assert run.returncode == 0, run.stderr
    assert "1 of 4 items are already in" in run.stderr
    ids = [r["id"] for r in results(tmp_path / "out")]
    assert sorted(ids) == ["item0", "item1", "item2", "item3"] and len(ids) == len(set(ids))


def test_bad_manifests_name_the_line_and_the_field(tmp_path):
    make_repo(tmp_path / "src", {"a.txt": "one\n"})
    cases = [
        ('{"id": "a", "repo": "src"}\n', "m.jsonl:1: give exactly one of prompt and prompt_file"),
        ('{"id": "a", "repo": "src", "prompt": "x"}\n{"id": "a", "repo": "src", "prompt": "y"}\n',
         "m.jsonl:2: id 'a' appears twice"),
        ('{"id": "a", "repo": "nowhere", "prompt": "x"}\n', "is not a directory"),
        ('not json\n', "m.jsonl:1: not JSON"),
        ('{"id": "a", "repo": "src", "prompt": "x", "colour": "red"}\n', "m.jsonl:1: unknown field colour"),
    ]
    for text, expected in cases:
        (tmp_path / "m.jsonl").write_text(text)
        run = batch("m.jsonl", cwd=str(tmp_path))
        assert run.returncode == 2 and expected in run.stderr, (text, run.stderr)
        assert not (tmp_path / "batch-out").exists()


def test_index_runs_one_item(tmp_path):
    make_repo(tmp_path / "src", {"a.txt": "one\n"})
    script = write_script(tmp_path / "faux.json", WRITE)
    manifest = write_manifest(tmp_path / "m.jsonl", [{"id": f"i{i}", "repo": "src", "prompt": "x"} for i in range(3)])
    run = batch(manifest, "--faux-script", script, "--index", "2", "--out", "out", cwd=str(tmp_path))
    assert run.returncode == 0 and [r["id"] for r in results(tmp_path / "out")] == ["i2"]
    run = batch(manifest, "--index", "3", cwd=str(tmp_path))
    assert run.returncode == 2 and "outside the manifest's 3 items" in run.stderr


def test_git_run_by_batch_runs_no_program_named_by_git_configuration(tmp_path):
    """The batch's own git calls (clone, add, the patch's diff) go through ``gitsafe``, the task tool's list:
    an external diff program, a smudge filter and a pager named in the user's git configuration never run."""
    make_repo(tmp_path / "src", {"a.txt": "one\n", ".gitattributes": "*.txt filter=evil\n"})
    home = tmp_path / "home"
    home.mkdir()
    marker = tmp_path / "ran.txt"
    evil = tmp_path / "evil.sh"
    evil.write_text(f"#!/bin/sh\necho \"$0 $*\" >> {marker}\ncat\n")
    evil.chmod(0o755)
    (home / ".gitconfig").write_text(f"[diff]\n\texternal = {evil}\n[filter \"evil\"]\n\tsmudge = {evil}\n"
                                     f"\tclean = {evil}\n[core]\n\tpager = {evil}\n")
    script = write_script(tmp_path / "faux.json", WRITE)
    manifest = write_manifest(tmp_path / "m.jsonl", [{"id": "one", "repo": "src", "prompt": "add a file"}])
    env = {**os.environ, "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"),
           "PISCES_CODING_AGENT_DIR": str(home / ".pisces-agent")}
    run = subprocess.run([sys.executable, "-m", "pisces", "batch", manifest, "--faux-script", script, "--out", "out",
                          "--plain"], cwd=str(tmp_path), capture_output=True, text=True, timeout=BOUND_S,
                         stdin=subprocess.DEVNULL, env=env)
    assert run.returncode == 0, run.stderr
    (row,) = results(tmp_path / "out")
    assert row["status"] == "succeeded" and "new.txt" in open(tmp_path / "out" / row["patch"]).read()
    assert not marker.exists(), marker.read_text()
