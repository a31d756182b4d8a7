"""A manifest line's ``base_patch``: accepted as a string, refused otherwise, with the line named."""

from __future__ import annotations

import json

import pytest

from pisces.core.executor.spec import ManifestError, read_manifest


def test_base_patch_is_a_manifest_field(tmp_path):
    (tmp_path / "r").mkdir()
    m = tmp_path / "m.jsonl"
    patch = "diff --git a/x b/x\nnew file mode 100644\n--- /dev/null\n+++ b/x\n@@ -0,0 +1 @@\n+x\n"
    m.write_text(json.dumps({"id": "a", "repo": "r", "prompt": "p", "base_patch": patch}) + "\n")
    [item] = read_manifest(str(m))
    assert item.base_patch == patch and item.commit is None
    m.write_text(json.dumps({"id": "a", "repo": "r", "prompt": "p", "base_patch": 3}) + "\n")
    with pytest.raises(ManifestError, match=r"m.jsonl:1: base_patch must be a string"):
        read_manifest(str(m))
