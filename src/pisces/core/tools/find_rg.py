"""The find tool's ripgrep path: ``rg --files`` read while it runs, matched a chunk at a time.

rg walks the tree on every core and writes the listing as it goes; the matching used to start only when rg
had finished, so its cost (about a third of rg's own time on 50,000 files) came after rg's. Here the worker
thread reads the pipe as it fills and, for the globs most calls use (a literal with at most one ``*`` at
one end, matched against the name: ``*.py``, ``test_*``, ``Makefile``), matches each chunk of whole lines
at once and sorts its hits: the matching runs while rg still walks, and the final sort merges sorted runs.
Only the head the tool prints (the result limit, then 50KB) is turned back into paths.

The fast path gives exactly what :func:`pisces.core.tools.find.match_listing` and ``format_find`` give (the
tests compare them on cut listings); it steps aside, and the whole listing goes through that slower path,
whenever a chunk is not ASCII, a line is empty or starts with ``./``, or some directory's name may match
the glob (a directory is listed when it holds a listed file: that needs every path, not just the hits).
"""

from __future__ import annotations

import os
import re
import signal as _signal
import subprocess
import threading
from collections.abc import Callable
from typing import Any

from pisces.agent.types import ToolError

from ._common import OPERATION_ABORTED
from ._walk import Glob
from .truncate import DEFAULT_MAX_BYTES, MAX_SAFE_INTEGER, Notice, TruncationResult, listing_result

# a longer literal is matched path by path: the regex may compare the literal at each position of a line, so
# its time is bounded by the listing's length times the literal's (string methods: the listing's length)
REGEX_LITERAL_MAX = 16

_CHUNK = 1 << 17  # the listing is matched this much at a time: a sorted run of some 5,000 paths
_PIPE_SIZE = 1 << 20
_F_SETPIPE_SZ = 1031  # Linux: a larger pipe lets rg write on while a chunk is matched
_STDERR_KEPT = 1 << 16  # what an error message can quote of rg's standard error


def simple_regex(glob: Glob, keys: str) -> re.Pattern[str] | None:
    """A regular expression finding the keys (paths with ``/`` made NUL, one a line) whose name matches a
    simple glob, exactly as :meth:`Glob.match` decides; None when there is none (a glob with classes or
    alternatives, a literal holding a newline or a NUL, a case-insensitive glob over a listing that is not
    ASCII: Unicode case folding is RE2's)."""
    simple = glob.simple
    if simple is None:
        return None
    kind, literal = simple
    if not regex_fits(literal, glob, keys):
        return None
    lit = re.escape(literal)
    flags = re.MULTILINE | (re.IGNORECASE | re.ASCII if glob.ignore_case else 0)
    if kind == "suffix":  # the literal holds no NUL: a line ending with it is a name ending with it
        return re.compile(f"^[^\\n]*{lit}$", flags)
    name = lit if kind == "exact" else f"{lit}[^\\n\\x00]*"
    return re.compile(f"^(?:[^\\n]*\\x00)?{name}$", flags)


def regex_fits(literal: str, glob: Glob, keys: str) -> bool:
    """Whether a simple glob's literal can be matched by a regex over the keys exactly as Glob.match does."""
    return (len(literal) <= REGEX_LITERAL_MAX and "\n" not in literal and "\x00" not in literal
            and not (glob.ignore_case and not keys.isascii()))


def directory_regex(glob: Glob) -> re.Pattern[str] | None:
    """A regex finding, in keys, a directory (a name followed by NUL, a ``/``) whose name may match a simple
    glob; None when the glob is not simple. Its literal must fit (:func:`regex_fits`)."""
    simple = glob.simple
    if simple is None:
        return None
    kind, literal = simple
    lit = re.escape(literal)
    name = {"suffix": lit, "exact": f"(?:^|\\x00){lit}", "prefix": f"(?:^|\\x00){lit}[^\\n\\x00]*"}[kind]
    flags = re.MULTILINE | (re.IGNORECASE | re.ASCII if glob.ignore_case else 0)
    return re.compile(f"{name}\\x00", flags)


class ChunkMatcher:
    """The hits of a simple name glob in a listing fed a piece at a time (``feed``): how many there are and
    the smallest of them in path order, as many as the tool can show (``result``). ``failed`` once the
    listing needs the slow path (see the module).

    Hits are handled as sort keys, their ``/`` made NUL (the lowest character, in no name): sorting the keys
    as plain strings gives the paths' order. Only the head the output can show is kept sorted: at most
    ``limit`` hits, and no more than the first that no longer fits in 50KB (later hits can only push it
    further down). A chunk's hits past the last of that head are dropped after one comparison each."""

    def __init__(self, glob: Glob, limit: int) -> None:
        simple = glob.simple
        assert simple is not None  # callers check with ChunkMatcher.fits first
        self._kind, self._literal = simple
        self._lower = glob.ignore_case
        regex = simple_regex(glob, "")
        assert regex is not None  # a simple glob whose literal fits (fits())
        self._regex = regex
        self._limit = limit
        self._tail = b""
        self._chunks: list[list[str]] = []  # every chunk's hits (for the rare sort of them all, see result)
        self._head: list[str] = []  # the smallest hits so far, sorted
        self._bound: str | None = None  # set when the head is full: a hit shows only if below it
        self._short = False  # the head was cut (by bytes) to fewer than ``limit`` hits
        self.count = 0
        self.chars = 0  # the hits' characters, newlines not counted
        self.failed = False
        self.lines = False  # whether the listing held any line

    @staticmethod
    def fits(glob: Glob, full_path: bool) -> bool:
        """Whether the fast path can match ``glob`` (a simple name glob with a short literal)."""
        simple = glob.simple
        return not full_path and simple is not None and regex_fits(simple[1], glob, "")

    def feed(self, data: bytes) -> None:
        """Match the whole lines of ``data`` (after what was left of the previous piece)."""
        if self.failed:
            return
        if self._tail:
            data = self._tail + data
        cut = data.rfind(b"\n") + 1
        self._tail = data[cut:]
        if cut:
            self._match(data if cut == len(data) else data[:cut])

    def result(self) -> tuple[list[str], int, int]:
        """(head, count, chars): the smallest hits in path order (every hit the output can show, and the
        first that no longer fits), how many hits there are, and the characters of the first
        ``min(count, limit)`` of them. Call after the last ``feed``; check ``failed`` after it."""
        if self._tail and not self.failed:
            tail, self._tail = self._tail, b""
            self._match(tail + b"\n")  # rg ends every line: a last one without a newline is still a line
        if self.count <= self._limit:
            return self._head, self.count, self.chars
        head = self._head
        if self._short:  # the first ``limit`` hits are needed for their size: sort them all (rare)
            head = [key for chunk in self._chunks for key in chunk]
            head.sort()
        del head[self._limit:]
        return head, self.count, sum(map(len, head))

    def _match(self, part: bytes) -> None:
        # part: whole lines, each ending with "\n"
        if not part.isascii():
            self.failed = True
            return
        keys = part.decode("ascii").replace("/", "\x00")
        if not self.lines:
            # rg puts "./" before every path or before none: only when it was given a path ("./"), not here
            if keys.startswith(".\x00"):
                self.failed = True  # the slow path strips it
                return
            self.lines = bool(keys.strip("\n"))  # an empty line is no path (and never a hit)
        folded = keys.lower() if self._lower else keys
        literal = self._literal
        if self._kind == "suffix":
            if literal + "\x00" in folded:  # a directory's name may match: the slow path lists directories
                self.failed = True
                return
            count = folded.count(literal + "\n")
            if count == 0:
                return
            lines = keys.count("\n")
            if count == lines:  # every line ends with the literal: every name does
                hits = keys.split("\n")
                hits.pop()
                self.chars += len(keys) - lines
            else:
                hits = self._regex.findall(keys)
                self.chars += sum(map(len, hits))
        else:
            found = _name_hits(keys, folded, literal, self._kind == "exact")
            if found is None:  # a directory's name matches: the slow path lists directories
                self.failed = True
                return
            hits = found
            if not hits:
                return
            self.chars += sum(map(len, hits))
        self._add(hits)

    def _add(self, hits: list[str]) -> None:
        self.count += len(hits)
        self._chunks.append(hits)
        if self._bound is not None:
            hits = list(filter(self._bound.__gt__, hits))
        else:
            hits = sorted(hits)
        if not hits:
            return
        head = self._head
        head += hits
        head.sort()  # two sorted runs (or a few after the filter): a merge
        # the head the output can show: at most ``limit`` hits, up to the first past 50KB included
        limit = self._limit
        used = -1
        keep = 0
        for key in head:
            used += len(key) + 1
            keep += 1
            if keep >= limit or used > DEFAULT_MAX_BYTES:
                break
        if keep < len(head):
            del head[keep:]
            self._bound = head[-1]
            self._short = self._short or keep < limit


def _name_hits(keys: str, folded: str, literal: str, exact: bool) -> list[str] | None:
    """The lines of ``keys`` (whole lines, ``/`` made NUL) whose name is ``literal`` (``exact``) or starts
    with it; None when a directory's name does (a directory is listed). ``folded`` is ``keys`` lower-cased
    for a case-insensitive glob (the literal too), else ``keys`` itself. A name starts after a newline or a
    NUL: each place where the literal follows one is a name or a directory that matches, so the work is a
    search over the text and a step for each match, not one for each line."""
    hits: list[str] = []
    n = len(literal)
    find = folded.find
    for sep in ("\n", "\x00"):
        needle = sep + literal
        pos = 0 if sep == "\n" and folded.startswith(literal) else -1  # the first line's name: no separator
        if pos < 0:
            pos = find(needle)
            if pos >= 0:
                pos += 1
        while pos >= 0:
            end = find("\n", pos + n)  # every line ends with a newline
            if exact:
                after = folded[pos + n] if pos + n < len(folded) else "\n"
                if after == "\x00":
                    return None
                matched = after == "\n"
            else:
                if find("\x00", pos + n, end) >= 0:
                    return None
                matched = True
            if matched:
                start = pos if sep == "\n" else keys.rfind("\n", 0, pos) + 1
                hits.append(keys[start:end])
            pos = find(needle, pos + n)
            if pos >= 0:
                pos += 1
    return hits


def format_keys(head: list[str], count: int, chars: int, limit: int) -> tuple[str, dict[str, Any] | None]:
    """``format_find`` for sorted ASCII keys (``/`` made NUL): ``head`` holds the first of ``count`` hits
    in path order (at least as many as can show), ``chars`` the characters of the first ``min(count,
    limit)`` of them. The same text and details, with only the printed head turned back into paths."""
    if not count:
        return "No files found matching pattern", None
    notice: Notice | None = (f"{limit} results limit reached. Use limit={limit * 2} for more, or refine pattern",
                             "resultLimitReached", limit) if count >= limit else None
    count = min(count, limit)
    total_bytes = chars + count - 1  # ASCII: a character a byte
    max_bytes = DEFAULT_MAX_BYTES
    if total_bytes <= max_bytes:  # then the head is every hit shown
        text = "\n".join(head[:count]).replace("\x00", "/")
        trunc = TruncationResult(text, False, None, count, total_bytes, count, total_bytes, False, False,
                                 MAX_SAFE_INTEGER, max_bytes)
    elif len(head[0]) > max_bytes:
        trunc = TruncationResult("", True, "bytes", count, total_bytes, 0, 0, False, True, MAX_SAFE_INTEGER,
                                 max_bytes)
    else:  # truncate_head's rule: the whole lines that fit, the newlines between them counted
        used = -1
        kept = 0
        for key in head:
            used += len(key) + 1
            if used > max_bytes:
                break
            kept += 1
        text = "\n".join(head[:kept]).replace("\x00", "/")
        trunc = TruncationResult(text, True, "bytes", count, total_bytes, kept, len(text), False, False,
                                 MAX_SAFE_INTEGER, max_bytes)
    return listing_result(trunc.content, notice, truncation=trunc)


class RgLister:
    """``rg --files`` run from a worker thread, with the matching on the same thread as the listing comes:
    no event-loop round trip per chunk and no thread waiting for the child. ``abort`` stops rg from any
    thread, even before it started."""

    def __init__(self) -> None:
        self.cancel = threading.Event()
        self._procs: list[subprocess.Popen[bytes]] = []

    def abort(self) -> None:
        self.cancel.set()  # first: a process started after this line sees it, one started before is listed
        for proc in list(self._procs):
            kill(proc)

    def list_and_format(self, rg: str, root: str, glob: Glob, full_path: bool, limit: int,
                        slow: Callable[[str], tuple[str, dict[str, Any] | None]]) -> tuple[str, dict[str, Any] | None]:
        """The tool's text and details for ``glob`` over ``rg --files`` in ``root``. ``slow`` formats a whole
        listing (relative paths, one a line) when the fast path steps aside."""
        with _error_file() as errors:
            try:
                proc = subprocess.Popen([rg, "--files", "--hidden", "--no-require-git", "--color=never"],
                                        cwd=root, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=errors)
            except OSError as exc:
                raise ToolError(f"Failed to run ripgrep: {exc.strerror or exc}") from None
            self._procs.append(proc)
            if self.cancel.is_set():
                kill(proc)
            matcher = ChunkMatcher(glob, limit) if ChunkMatcher.fits(glob, full_path) else None
            try:
                chunks = _read(proc, matcher)
            except BaseException:
                kill(proc)
                raise
            finally:
                proc.wait()
            if self.cancel.is_set():
                raise ToolError(OPERATION_ABORTED)
            found = matcher.result() if matcher is not None else None
            if matcher is not None and found is not None and not matcher.failed:
                if proc.returncode not in (0, 1) and not matcher.lines:
                    raise _rg_error(proc, errors)
                return format_keys(*found, limit)
            listing = rg_listing(b"".join(chunks))
            if proc.returncode not in (0, 1) and not listing:
                raise _rg_error(proc, errors)
            return slow(listing)


def _read(proc: subprocess.Popen[bytes], matcher: ChunkMatcher | None) -> list[bytes]:
    """Read rg's listing to its end, feeding it to ``matcher`` ``_CHUNK`` bytes at a time (a buffered read
    waits for that many: one call per chunk, however small rg's writes). Returns the listing's pieces."""
    stdout = proc.stdout
    assert stdout is not None
    try:
        import fcntl  # noqa: PLC0415 - POSIX only, and only here

        fcntl.fcntl(stdout.fileno(), _F_SETPIPE_SZ, _PIPE_SIZE)
    except (ImportError, OSError):  # a smaller pipe only means that rg waits for the reader more often
        pass
    chunks: list[bytes] = []
    try:
        while data := stdout.read(_CHUNK):
            chunks.append(data)
            if matcher is not None:
                matcher.feed(data)
    finally:
        stdout.close()
    return chunks


def _error_file() -> Any:
    """A file for rg's standard error, read once rg is done: in memory where Linux allows it."""
    try:
        return os.fdopen(os.memfd_create("pisces-rg-stderr", os.MFD_CLOEXEC), "w+b")
    except (AttributeError, OSError):
        import tempfile  # noqa: PLC0415 - only where memfd_create is missing

        return tempfile.TemporaryFile()


def _rg_error(proc: subprocess.Popen[bytes], errors: Any) -> ToolError:
    errors.seek(0)
    stderr = errors.read(_STDERR_KEPT)
    return ToolError(stderr.decode("utf-8", "replace").strip() or f"rg exited with code {proc.returncode}")


def kill(proc: subprocess.Popen[bytes]) -> None:
    try:
        proc.send_signal(_signal.SIGTERM)
    except ProcessLookupError:
        pass


def rg_listing(stdout: bytes) -> str:
    """What ``rg --files`` printed in the root, relative paths one a line, without a trailing newline."""
    text = stdout.decode("utf-8", "surrogateescape")
    # no per-line work unless a line is empty or starts with "./"
    if "\n\n" in text or text.startswith("\n") or text.startswith("./") or "\n./" in text:
        return "\n".join(line[2:] if line.startswith("./") else line for line in text.split("\n") if line)
    return text[:-1] if text.endswith("\n") else text


__all__ = ["ChunkMatcher", "RgLister", "format_keys", "rg_listing", "simple_regex", "regex_fits", "directory_regex",
           "REGEX_LITERAL_MAX"]
