"""find's streaming path (``find_rg``): rg's listing matched a chunk at a time, only the shown head kept
sorted, gives the text and details of the whole-listing path (``match_listing`` then ``format_find``), however
the listing is cut into chunks, for every kind of simple glob, every limit and past the 50KB cut; and it steps
aside (``failed``) exactly where that path has work it does not do."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pisces.core.tools.find import compile_find_pattern, format_find, match_listing
from pisces.core.tools.find_rg import ChunkMatcher, format_keys, rg_listing

_PATTERNS = ["*.py", "*.PY", "*y", "a*", "A*", "a", "a.py", "b.py", "*.b", "py*", "x*"]
_PIECES = ["a", "A", "b", ".", "py", "PY", "x", "-", " ", "\u00e9"]


def _reference(data: bytes, pattern: str, limit: int) -> tuple[str, object]:
    return format_find(match_listing(rg_listing(data), "/r", pattern), limit)


def _streamed(data: bytes, cuts: list[int], pattern: str, limit: int) -> tuple[str, object] | None:
    glob, full = compile_find_pattern(pattern)
    assert ChunkMatcher.fits(glob, full)
    matcher = ChunkMatcher(glob, limit)
    start = 0
    for cut in sorted(set(cuts)) + [len(data)]:
        matcher.feed(data[start:cut])
        start = cut
    found = matcher.result()
    if matcher.failed:
        return None
    return format_keys(*found, limit)


def _listing(paths: list[str]) -> bytes:
    """The files among ``paths`` (a path some other path lies under is a directory), one a line, shuffled."""
    dirs = {q[:i] for q in paths for i, ch in enumerate(q) if ch == "/"}
    files = [p for p in paths if p not in dirs]
    random.Random(len(files)).shuffle(files)
    return "".join(f + "\n" for f in files).encode()


@pytest.mark.parametrize("pattern", _PATTERNS)
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_streamed_small_listings_give_the_whole_listing_result(pattern, data):
    segment = st.lists(st.sampled_from(_PIECES), min_size=1, max_size=3).map("".join)
    path = st.lists(segment.filter(lambda name: name not in (".", "..")), min_size=1, max_size=4).map("/".join)
    paths = data.draw(st.lists(path, max_size=14, unique=True))
    listing = _listing(paths)
    cuts = data.draw(st.lists(st.integers(0, len(listing)), max_size=6))
    limit = data.draw(st.sampled_from([1, 2, 3, 5, 1000]))
    got = _streamed(listing, cuts, pattern, limit)
    if got is not None:
        assert got == _reference(listing, pattern, limit)
    else:  # it steps aside only for a name that is not ASCII or a directory that may match
        glob, _ = compile_find_pattern(pattern)
        lines = listing.decode().split("\n")
        assert not listing.isascii() or any(glob.match(part) for line in lines for part in line.split("/")[:-1])


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize(("pattern", "limit"), [("*.py", 100_000), ("*.py", 1000), ("*.py", 700), ("f1*", 100_000),
                                                ("f12.py", 1000), ("*.PY", 50), ("*.py", 5000),
                                                ("*.py", 3000)])
def test_streamed_big_listings_past_50kb_give_the_whole_listing_result(seed, pattern, limit):
    rng = random.Random(seed)
    files = set()
    while len(files) < 6000:
        depth = rng.randint(0, 3)
        dirs = [f"d{rng.randint(0, 30)}" + "x" * rng.choice([0, 0, 40]) for _ in range(depth)]
        ext = rng.choice([".py", ".py", ".py", ".PY", ".txt", ".pyc"])
        files.add("/".join([*dirs, f"f{rng.randint(0, 99999)}{ext}"]))
    listing = _listing(sorted(files))
    cuts = [rng.randint(0, len(listing)) for _ in range(rng.randint(0, 40))]
    got = _streamed(listing, cuts, pattern, limit)
    assert got is not None  # ASCII, and no directory's name matches: the streaming path answers
    assert got == _reference(listing, pattern, limit)


def test_the_streaming_path_steps_aside_for_a_matching_directory_or_a_non_ascii_name():
    assert _streamed(b"a.py/x.txt\nb.py\n", [], "*.py", 10) is None
    assert _streamed(b"f1/x.txt\nf12\n", [3], "f1*", 10) is None
    assert _streamed(b"f12/x\n", [], "f12", 10) is None
    assert _streamed("\u00e9.py\nb.py\n".encode(), [], "*.py", 10) is None
    assert _streamed(b"./b.py\n", [], "*.py", 10) is None  # rg run on "./": the whole-listing path strips it
    # and answers otherwise
    assert _streamed(b"x/a.pyc\nb.py\n", [1], "*.py", 10) == ("b.py", None)
    assert _streamed(b"", [], "*.py", 10) == ("No files found matching pattern", None)
