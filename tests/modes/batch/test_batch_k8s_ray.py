"""The Kubernetes Indexed Job that ``--emit k8s`` writes (checked against the Kubernetes schema, and its pod
command run here as a pod would run it), and a manifest on a real local Ray cluster."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
from test_batch_e2e import WRITE, batch, make_repo, results, write_manifest, write_script


def _url_manifest(tmp_path, n: int = 3) -> str:
    src = make_repo(tmp_path / "src", {"a.txt": "one\n"})
    bare = tmp_path / "remote.git"
    subprocess.run(["git", "clone", "-q", "--bare", src, str(bare)], check=True)
    return write_manifest(tmp_path / "m.jsonl", [
        {"id": f"item-{i}", "repo": f"file://{bare}", "prompt": "add a file"} for i in range(n)])


def test_emitted_job_is_a_valid_indexed_job(tmp_path):
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    manifest = _url_manifest(tmp_path)
    run = batch(manifest, "--emit", "k8s", "--parallel", "2", "--model", "claude-sonnet-4-5", "--secret", "keys",
                "--job-name", "fix-all", cwd=str(tmp_path))
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    config_map, job = doc["items"]
    for item in (config_map, job):
        kubernetes_validate.validate(item, "1.33.0", strict=True)  # raises on any schema error
    assert job["spec"]["completionMode"] == "Indexed" and job["spec"]["completions"] == 3
    assert job["spec"]["parallelism"] == 2 and job["spec"]["backoffLimitPerIndex"] == 1
    assert config_map["data"]["manifest.jsonl"] == open(manifest).read()
    container = job["spec"]["template"]["spec"]["containers"][0]
    assert container["envFrom"] == [{"secretRef": {"name": "keys"}}]
    assert '--index "$JOB_COMPLETION_INDEX"' in container["command"][2]
    assert "--model claude-sonnet-4-5" in container["command"][2]


def test_local_paths_cannot_go_to_a_cluster(tmp_path):
    make_repo(tmp_path / "src", {"a.txt": "one\n"})
    manifest = write_manifest(tmp_path / "m.jsonl", [{"id": "local", "repo": "src", "prompt": "x"}])
    run = batch(manifest, "--emit", "k8s", cwd=str(tmp_path))
    assert run.returncode == 2 and "give these items a git URL as repo: local" in run.stderr


def test_the_pod_command_runs_one_item_per_index(tmp_path):
    manifest = _url_manifest(tmp_path)
    script = write_script(tmp_path / "faux.json", WRITE)
    run = batch(manifest, "--emit", "k8s", "--install", "", "--faux-script", "/manifest/faux.json",
                cwd=str(tmp_path))
    job = json.loads(run.stdout)["items"][1]
    command = job["spec"]["template"]["spec"]["containers"][0]["command"]
    assert command[:2] == ["sh", "-c"]
    # the pod's volumes, here: the manifest and the script under /manifest, the results volume under /results
    pod_manifest, pod_results = tmp_path / "pod-manifest", tmp_path / "pod-results"
    pod_manifest.mkdir()
    pod_results.mkdir()
    shutil.copy(manifest, pod_manifest / "manifest.jsonl")
    shutil.copy(script, pod_manifest / "faux.json")
    shell = command[2].replace("/manifest/", f"{pod_manifest}/").replace("/results/", f"{pod_results}/")
    bin_dir = os.path.dirname(sys.executable)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "JOB_COMPLETION_INDEX": "1"}
    done = subprocess.run(["sh", "-c", shell], env=env, cwd=str(tmp_path), capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    assert sorted(os.listdir(pod_results)) == ["item-1"]
    [row] = results(pod_results / "item-1")
    assert row["id"] == "item-1" and row["status"] == "succeeded"
    assert "+made by the agent" in (pod_results / "item-1" / row["patch"]).read_text()


def test_a_manifest_on_a_local_ray_cluster(tmp_path):
    pytest.importorskip("ray", reason="Ray is an optional extra (pip install 'pisces-agent[ray]')")
    manifest = _url_manifest(tmp_path, n=2)
    script = write_script(tmp_path / "faux.json", WRITE)
    env_note = {"RAY_AUTH_MODE": "disabled"}
    os.environ.update(env_note)
    try:
        run = batch(manifest, "--faux-script", script, "--executor", "ray", "--parallel", "2", "--out", "out",
                    "--plain", cwd=str(tmp_path), timeout=300)
    finally:
        for key in env_note:
            os.environ.pop(key, None)
    assert run.returncode == 0, run.stderr
    rows = results(tmp_path / "out")
    assert sorted(r["id"] for r in rows) == ["item-0", "item-1"]
    assert all(r["status"] == "succeeded" and (tmp_path / "out" / r["patch"]).exists() for r in rows)
