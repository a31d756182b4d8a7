"""``pisces batch MANIFEST --emit k8s``: a Kubernetes Indexed Job that runs the manifest, one pod per item.

The output is a ``v1 List`` (JSON, which kubectl reads as YAML): a ConfigMap holding the manifest and an
Indexed Job (``completionMode: Indexed``) with one completion per item. Each pod runs
``pisces batch /manifest/manifest.jsonl --index $JOB_COMPLETION_INDEX`` and writes its result into its own
folder of the results volume (``/results/item-<index>``), so pods never append to one shared file. Kubernetes
schedules the pods and retries a failed index (``backoffLimitPerIndex``); pisces needs no Kubernetes client.
Items must name their repository by git URL: a pod cannot see this machine's paths.
"""

from __future__ import annotations

import json
import shlex
from typing import Any

from pisces.core.executor.spec import ItemSpec

MANIFEST_DIR = "/manifest"
RESULTS_DIR = "/results"


def pod_command(run_flags: list[str]) -> str:
    """The shell command each pod runs (``$JOB_COMPLETION_INDEX`` is set by Kubernetes)."""
    flags = " ".join(shlex.quote(f) for f in run_flags)
    return (f'pisces batch {MANIFEST_DIR}/manifest.jsonl --index "$JOB_COMPLETION_INDEX" '
            f'--out "{RESULTS_DIR}/item-$JOB_COMPLETION_INDEX" --plain' + (f" {flags}" if flags else ""))


def emit(items: list[ItemSpec], manifest_text: str, run_flags: list[str], *, name: str, image: str,
         install: str, parallel: int, results_claim: str, secret: str | None, namespace: str | None,
         retries: int = 1, cpu: str = "1", memory: str = "2Gi") -> dict[str, Any]:
    local = [i.id for i in items if not i.is_url]
    if local:
        raise ValueError(f"a pod cannot see this machine's paths: give these items a git URL as repo: "
                         f"{', '.join(local[:10])}{' ...' if len(local) > 10 else ''}")
    meta: dict[str, Any] = {"name": name, "labels": {"app.kubernetes.io/name": "pisces-batch"}}
    if namespace:
        meta["namespace"] = namespace
    script = (install.strip() + " && " if install.strip() else "") + pod_command(run_flags)
    container: dict[str, Any] = {
        "name": "pisces",
        "image": image,
        "command": ["sh", "-c", script],
        "volumeMounts": [{"name": "manifest", "mountPath": MANIFEST_DIR, "readOnly": True},
                         {"name": "results", "mountPath": RESULTS_DIR}],
        "resources": {"requests": {"cpu": cpu, "memory": memory}, "limits": {"memory": memory}},
    }
    if secret:
        container["envFrom"] = [{"secretRef": {"name": secret}}]
    config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {**meta, "name": f"{name}-manifest"},
                  "data": {"manifest.jsonl": manifest_text}}
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": meta,
        "spec": {
            "completionMode": "Indexed",
            "completions": len(items),
            "parallelism": max(1, min(parallel, len(items))),
            "backoffLimitPerIndex": retries,
            "maxFailedIndexes": len(items),
            "template": {
                "metadata": {"labels": {"app.kubernetes.io/name": "pisces-batch"}},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [container],
                    "volumes": [
                        {"name": "manifest", "configMap": {"name": f"{name}-manifest"}},
                        {"name": "results", "persistentVolumeClaim": {"claimName": results_claim}},
                    ],
                },
            },
        },
    }
    return {"apiVersion": "v1", "kind": "List", "items": [config_map, job]}


def dumps(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
