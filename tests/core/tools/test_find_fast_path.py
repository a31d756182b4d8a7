"""find's fast path for ``*literal`` name globs (string methods over whole relative paths, directories from
the unique parents) gives exactly what matching each name with the compiled glob gives."""

from __future__ import annotations

import pytest

from pisces.core.tools.find import compile_find_pattern, match_paths

FILES = ["a.py", "src/b.py", "src/deep/er/c.PY", "src/x.pyc", "docs/readme.md", "py", "src/.py", "Ka.k",
         "src/\u212aELVIN.K", "src/end\u212a", "weird/na.py/inner.txt", "ß/straße.SS", "top/mid/leaf/z.py"]


def _by_name(files: list[str], root: str, pattern: str) -> list[str]:
    """The reference: every file name and every directory matched one by one with the glob."""
    glob, full = compile_find_pattern(pattern)
    assert not full
    dirs = {f[:i] for f in files for i in range(len(f)) if f[i] == "/"}
    hits = [f for f in files if glob.match(f.rsplit("/", 1)[-1])]
    hits += [d + "/" for d in dirs if glob.match(d.rsplit("/", 1)[-1])]
    return sorted(hits, key=lambda p: p.rstrip("/").replace("/", "\x00"))


@pytest.mark.parametrize("pattern", ["*.py", "*.PY", "*k", "*.k", "*.K", "*.ss", "*.SS", "*.txt", "*er", "*.md"])
def test_the_fast_path_matches_name_by_name(pattern):
    assert match_paths(FILES, "/root", pattern) == _by_name(FILES, "/root", pattern)


def test_directories_are_listed_once_with_a_slash():
    hits = match_paths(["x/na.py/inner.txt", "x/na.py/other.txt", "y.py"], "/r", "*.py")
    assert hits == ["x/na.py/", "y.py"]
