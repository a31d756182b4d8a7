"""``pisces batch MANIFEST.jsonl``: one prompt per repository over a manifest, on this machine, a Ray cluster,
or as a Kubernetes Indexed Job (docs/batch.md)."""
