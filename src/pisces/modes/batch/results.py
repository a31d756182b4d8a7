"""The output directory of a batch: ``results.jsonl`` (one line per finished item), ``patches/<id>.patch`` and
``sessions/<id>.jsonl``.

Each result line is written whole with one ``write`` on an ``O_APPEND`` descriptor and synced, after the item's
patch and session file are in place (written to a temporary name, synced, renamed). A kill at any moment leaves
at most a torn last line, which the next run cuts off before it appends: the file stays valid JSON lines, and an
item is either recorded with its files or not recorded at all (then a resumed run does it again).
"""

from __future__ import annotations

import json
import os
from typing import Any

RESULTS = "results.jsonl"


def _atomic_write(path: str, data: bytes) -> None:
    tmp = f"{path}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)


class ResultsDir:
    def __init__(self, path: str) -> None:
        self.path = os.path.abspath(path)
        os.makedirs(os.path.join(self.path, "patches"), exist_ok=True)
        os.makedirs(os.path.join(self.path, "sessions"), exist_ok=True)
        self.file = os.path.join(self.path, RESULTS)
        self.done: dict[str, dict[str, Any]] = {}
        self._load()
        self._fd = os.open(self.file, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def _load(self) -> None:
        """The items already recorded; a torn last line (a kill mid-write) is cut off."""
        try:
            with open(self.file, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return
        good = 0
        for line in data.splitlines(keepends=True):
            if not line.endswith(b"\n"):
                break
            try:
                row = json.loads(line)
            except ValueError:
                break
            if isinstance(row, dict) and isinstance(row.get("id"), str):
                self.done[row["id"]] = row
            good += len(line)
        if good < len(data):
            with open(self.file, "r+b") as f:
                f.truncate(good)

    def record(self, result: dict[str, Any]) -> dict[str, Any]:
        """Write the item's files, then its line; returns the line as written."""
        row = {k: v for k, v in result.items() if k not in ("patch_text", "session_text")}
        patch = result.get("patch_text") or ""
        if patch:
            rel = os.path.join("patches", f"{row['id']}.patch")
            _atomic_write(os.path.join(self.path, rel), patch.encode("utf-8", "surrogateescape"))
            row["patch"] = rel
        session = result.get("session_text")
        if session:
            rel = os.path.join("sessions", f"{row['id']}.jsonl")
            _atomic_write(os.path.join(self.path, rel), session.encode("utf-8"))
            row["session_file"] = rel
        line = json.dumps(row, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"
        os.write(self._fd, line)
        os.fsync(self._fd)
        self.done[row["id"]] = row
        return row

    def close(self) -> None:
        os.close(self._fd)
