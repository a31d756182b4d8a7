import glob
import json
import os

import pytest

from shared_paths import SHARED

CONFORMANCE = os.path.join(SHARED, "conformance", "pi-0.73.1")
PI_SESSION_FILES = sorted(glob.glob(os.path.join(CONFORMANCE, "*", "sessions", "*.jsonl")))


def pi_file_id(path: str) -> str:
    return f"{path.split(os.sep)[-3]}/{os.path.basename(path)[:24]}"


def json_lines(path: str) -> list[dict]:
    """The file's lines parsed with the stdlib json module (independent of the code under test)."""
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


needs_pi_files = pytest.mark.skipif(not PI_SESSION_FILES, reason="pi conformance files not present")
