"""The ``grep`` tool: search file contents with ripgrep, or with a pure-Python search that gives the same
output when ``rg`` is not installed.

rg is looked up on PATH, then next to the running Python (the ``ripgrep`` wheel puts it in the venv's
bin). It runs as pi runs it (``--json --line-number --color=never --hidden``, so .gitignore applies inside
git repositories), and results come in rg's ``--sort path`` order, so that they, and which ones the match
limit keeps, are stable: a directory is searched by rg's parallel walk and the matches sorted here, unless
they turn out many, when rg runs again with ``--sort path`` and stops at the limit (see ``_search_rg``).
"""

from __future__ import annotations

import asyncio
import base64
import os
import shutil
import signal as _signal
import sys
import threading
from dataclasses import dataclass, field
from typing import Any, BinaryIO, Iterator

import msgspec

from pisces.agent.types import AgentTool, AgentToolResult, ToolError, ToolUpdate
from pisces.ai.abort import AbortSignal
from pisces.core.safe_open import NotRegularFileError, check_regular, open_regular

from ._common import OPERATION_ABORTED, check_aborted, number_param, run_abortable, text_result
from ._walk import Overrides, Walker, _error_text
from .paths import refusal_message, resolve_to_cwd
from .schemas import GREP_SCHEMA
from .truncate import DEFAULT_MAX_BYTES, GREP_MAX_LINE_LENGTH, listing_result, truncate_line

DEFAULT_LIMIT = 100

GREP_DESCRIPTION = (
    "Search file contents for a pattern. Returns matching lines with file paths and line numbers. Respects "
    f".gitignore. Output is truncated to {DEFAULT_LIMIT} matches or {DEFAULT_MAX_BYTES // 1024}KB (whichever is "
    f"hit first). Long lines are truncated to {GREP_MAX_LINE_LENGTH} chars."
)


def find_rg() -> str | None:
    """``rg`` on PATH, else the one installed next to this Python (the ``ripgrep`` wheel)."""
    found = shutil.which("rg")
    if found:
        return found
    candidate = os.path.join(os.path.dirname(sys.executable), "rg")
    return candidate if os.path.isfile(candidate) and os.access(candidate, os.X_OK) else None


_AUTO = object()


class RgBackedTool(AgentTool):
    """A tool that runs ripgrep when it can (grep, find) and walks in pure Python otherwise."""

    def __init__(self, cwd: str, *, rg_path: Any = _AUTO) -> None:
        """``rg_path``: a ripgrep binary, None for the pure-Python fallback, or (default) found automatically."""
        self.cwd = cwd
        self.rg_path = find_rg() if rg_path is _AUTO else rg_path


@dataclass(slots=True)
class _Match:
    path: str
    line_number: int
    line_text: str | None  # the matched line as rg reported it (None: take it from the file)


@dataclass(slots=True)
class _Search:
    matches: list[_Match]
    limit_reached: bool
    errors: list[str] = field(default_factory=list)  # paths that could not be searched, as rg words it


# ---------------------------------------------------------------------------------------------
# ripgrep
# ---------------------------------------------------------------------------------------------
class _RgEvent(msgspec.Struct):
    type: str
    data: dict[str, Any] = {}


_decode_event = msgspec.json.Decoder(_RgEvent).decode


# A search through a directory first runs rg unsorted (its parallel walk, about twice as fast on two cores
# as ``--sort path``, which makes rg single-threaded) and sorts the matches itself. That only pays while the
# matches are few: rg cannot stop early, so once a search has more than UNSORTED_MATCHES_PER_LIMIT times the
# limit (or UNSORTED_MAX_BYTES of matched lines) it is stopped and run again with ``--sort path``, which stops
# at the limit. Either way the matches, and which ones the limit keeps, are those of ``--sort path``.
UNSORTED_MATCHES_PER_LIMIT = 3
UNSORTED_MAX_BYTES = 16 << 20


async def _search_rg(rg: str, cwd: str, pattern: str, search_path: str, is_dir: bool, glob: str | None,
                     ignore_case: bool, literal: bool, limit: int, signal: AbortSignal | None) -> _Search:
    args = [rg, "--json", "--line-number", "--color=never", "--hidden"]
    if ignore_case:
        args.append("--ignore-case")
    if literal:
        args.append("--fixed-strings")
    if glob:
        args += ["--glob", glob]
    tail = ["--", pattern, search_path]
    if is_dir:
        # no file can give more than ``limit`` of the matches kept: --max-count bounds what each one prints
        run = await _run_rg(args + ["--max-count", str(limit)] + tail, cwd, signal,
                            limit * UNSORTED_MATCHES_PER_LIMIT, UNSORTED_MAX_BYTES)
        if not run.stopped:
            run.matches.sort(key=_path_order)
            return run.result(run.matches[:limit], len(run.matches) >= limit)
        args += ["--sort", "path"]
    run = await _run_rg(args + tail, cwd, signal, limit - 1, None)
    return run.result(run.matches[:limit], run.stopped)


def _path_order(m: _Match) -> tuple[bytes, int]:
    """rg's ``--sort path`` order: depth-first with the names of each directory in byte order, which is the
    order of the path's bytes with each ``/`` made the lowest byte; then by line."""
    return os.fsencode(m.path).replace(b"/", b"\x00"), m.line_number


@dataclass(slots=True)
class _RgRun:
    matches: list[_Match]
    stopped: bool   # killed on reaching a bound: the matches are only some of them
    code: int
    stderr: str
    searched: bool  # rg reported a search (begin/end/summary), so a non-zero exit concerns some paths

    def result(self, matches: list[_Match], limit_reached: bool) -> _Search:
        """The search's result, or the error that kept rg from searching at all."""
        if not self.stopped and self.code not in (0, 1) and not (self.searched or self.matches):
            raise ToolError(self.stderr.strip() or f"ripgrep exited with code {self.code}")
        # exit code 2 after a search that ran: some paths could not be read; keep what was found, say which
        # (sorted: the parallel walk meets them in any order)
        errors = sorted((line[4:] if line.startswith("rg: ") else line for line in self.stderr.splitlines()
                         if line.strip()), key=lambda e: e.replace("/", "\x00"))
        return _Search(matches, limit_reached, errors if self.code == 2 else [])


async def _run_rg(args: list[str], cwd: str, signal: AbortSignal | None, max_matches: int,
                  max_bytes: int | None) -> _RgRun:
    """Run rg with ``--json`` and collect its matches, in the order printed; rg is stopped once there are
    more than ``max_matches`` of them or their lines come to more than ``max_bytes``."""
    try:
        proc = await asyncio.create_subprocess_exec(*args, cwd=cwd if os.path.isdir(cwd) else None,
                                                    stdin=asyncio.subprocess.DEVNULL,
                                                    stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    except OSError as exc:
        raise ToolError(f"Failed to run ripgrep: {exc.strerror or exc}") from None
    aborted = False

    def on_abort() -> None:
        nonlocal aborted
        aborted = True
        _kill(proc)

    remove = signal.add_listener(on_abort) if signal is not None else (lambda: None)
    matches: list[_Match] = []
    stopped = False
    searched = False
    size = 0
    assert proc.stderr is not None  # started with stderr=PIPE
    stderr_task = asyncio.ensure_future(proc.stderr.read())
    try:
        buf = b""
        assert proc.stdout is not None
        while not stopped:
            chunk = await proc.stdout.read(1 << 16)
            if not chunk:
                break
            buf += chunk
            lines = buf.split(b"\n")
            buf = lines.pop()
            for raw in lines:
                if not raw.strip():
                    continue
                try:
                    event = _decode_event(raw)
                except msgspec.DecodeError:
                    continue
                if event.type != "match":
                    searched = True  # begin/end/summary: the search ran (errors on stderr concern paths)
                    continue
                data = event.data
                path = (data.get("path") or {}).get("text")
                number = data.get("line_number")
                lines_obj = data.get("lines") or {}
                text = lines_obj.get("text")
                if text is None and "bytes" in lines_obj:
                    text = base64.b64decode(lines_obj["bytes"]).decode("utf-8", "replace")
                if path is None and "bytes" in (data.get("path") or {}):
                    path = os.fsdecode(base64.b64decode(data["path"]["bytes"]))
                if path and isinstance(number, int):
                    matches.append(_Match(path, number, text))
                    size += len(raw)
                if len(matches) > max_matches or (max_bytes is not None and size > max_bytes):
                    stopped = True
                    _kill(proc)
                    break
        code = await proc.wait()
        stderr = (await stderr_task).decode("utf-8", "replace")
    finally:
        remove()
        if proc.returncode is None:
            _kill(proc)
        if not stderr_task.done():
            stderr_task.cancel()
    if aborted:
        raise ToolError(OPERATION_ABORTED)
    return _RgRun(matches, stopped, code, stderr, searched)


def _kill(proc: asyncio.subprocess.Process) -> None:
    try:
        proc.send_signal(_signal.SIGTERM)
    except ProcessLookupError:
        pass


# ---------------------------------------------------------------------------------------------
# Pure Python (searching with RE2: linear time, the same regex family as ripgrep's)
# ---------------------------------------------------------------------------------------------
_BINARY_BLOCK = 64 * 1024
_CHUNK = 16 * _BINARY_BLOCK   # reads stay aligned on binary blocks
LINE_CAP = 8 << 20            # a longer line is searched in its first LINE_CAP bytes only
_BOM = b"\xef\xbb\xbf"


class _Cancelled(Exception):
    pass


def _compile(pattern: str, ignore_case: bool, literal: bool) -> Any:
    """The pattern compiled by RE2 over UTF-8 bytes (multi-line: ``^``/``$`` at line ends). RE2 guarantees
    time linear in the input, as ripgrep's engine does, and has the same syntax family (no look-around,
    no back-references: ripgrep refuses those too)."""
    import re2  # noqa: PLC0415 - google-re2: imported on the first fallback search, not at start-up

    options = re2.Options()
    options.case_sensitive = not ignore_case
    options.literal = literal
    options.never_capture = True
    options.log_errors = False
    text = pattern if literal else f"(?m:{pattern})"
    try:
        return re2.compile(text.encode("utf-8", "replace"), options)
    except re2.error as exc:
        raise ToolError(f"regex parse error:\n    {pattern}\nerror: {_error_text(exc)}") from None


def _blocks(f: BinaryIO, explicit: bool, cancel: threading.Event | None) -> Iterator[tuple[bytes, int]]:
    """(block, number of its first line): the file in blocks of whole lines (the last one may lack its
    newline), read a chunk at a time so that memory stays bounded. A BOM is dropped. Binary files follow
    ripgrep: a file named explicitly is searched up to the end of the line holding the first NUL; a file
    found by the walk is skipped when its first 64 KiB hold a NUL, else searched up to the last line before
    the 64 KiB block holding one."""
    carry = b""
    line_no = 1
    offset = 0
    first = True
    skipping = False       # inside an over-long line whose head was already searched
    stop_at_newline = False
    while True:
        if cancel is not None and cancel.is_set():
            raise _Cancelled
        chunk = f.read(_CHUNK)
        if not chunk:
            break
        chunk_start = offset
        offset += len(chunk)
        if first:
            first = False
            if not explicit and b"\x00" in chunk[:_BINARY_BLOCK]:
                return
            if chunk.startswith(_BOM):
                chunk = chunk[3:]
                chunk_start += 3
        stop = False
        if stop_at_newline:
            nl = chunk.find(b"\n")
            if nl != -1:
                chunk = chunk[:nl + 1]
                stop = True
        else:
            nul = chunk.find(b"\x00")
            if nul != -1:
                if explicit:
                    nl = chunk.find(b"\n", nul)
                    if nl != -1:
                        chunk = chunk[:nl + 1]
                        stop = True
                    else:
                        stop_at_newline = True
                else:
                    block_start = (chunk_start + nul) // _BINARY_BLOCK * _BINARY_BLOCK
                    chunk = chunk[:max(0, block_start - chunk_start)]
                    carry_kept = carry + chunk
                    cut = carry_kept.rfind(b"\n")
                    if cut != -1 and not skipping:
                        yield carry_kept[:cut + 1], line_no
                    return
        if skipping:
            nl = chunk.find(b"\n")
            if nl == -1:
                continue
            chunk = chunk[nl + 1:]
            line_no += 1
            skipping = False
        data = carry + chunk if carry else chunk
        last_nl = data.rfind(b"\n")
        if last_nl == -1:
            carry = data
        else:
            block = data[:last_nl + 1]
            carry = data[last_nl + 1:]
            yield block, line_no
            line_no += block.count(b"\n")
        if len(carry) > LINE_CAP:
            yield carry[:LINE_CAP], line_no
            carry = b""
            skipping = True
        if stop:
            return
    if carry and not skipping:
        yield carry, line_no


def _search_file(f: BinaryIO, path: str, regex: Any, explicit: bool, out: list[_Match], limit: int,
                 cancel: threading.Event | None) -> None:
    search = regex.search
    for block, first_line in _blocks(f, explicit, cancel):
        line_no = first_line
        counted = 0
        pos = 0
        size = len(block)
        while pos < size:
            m = search(block, pos)
            if m is None:
                break
            start = m.start()
            nl = block.rfind(b"\n", pos, start)
            line_start = pos if nl == -1 else nl + 1
            line_end = block.find(b"\n", start)
            if line_end == -1:
                line_end = size
            line_no += block.count(b"\n", counted, line_start)
            counted = line_start
            line = block[line_start:line_end]
            # the match may run past the line's end (``\s`` takes a newline): the line alone must match
            if search(line) is not None:
                out.append(_Match(path, line_no, line.decode("utf-8", "replace") + "\n"))
                if len(out) >= limit:
                    return
            pos = line_end + 1


def _file_matches(path: str, regex: Any, explicit: bool, out: list[_Match], limit: int,
                  cancel: threading.Event | None = None) -> None:
    try:
        fd = open_regular(path)  # never a FIFO or a device, even one swapped in after the walk saw a file
    except OSError:
        return
    with os.fdopen(fd, "rb") as f:
        try:
            _search_file(f, path, regex, explicit, out, limit, cancel)
        except OSError:
            return


def _search_python(cwd: str, pattern: str, search_path: str, is_dir: bool, glob: str | None, ignore_case: bool,
                   literal: bool, limit: int, cancel: threading.Event) -> _Search:
    regex = _compile(pattern, ignore_case, literal)
    matches: list[_Match] = []
    try:
        if not is_dir:
            _file_matches(search_path, regex, True, matches, limit, cancel)
            return _Search(matches, len(matches) >= limit)
        overrides = Overrides.build([glob], cwd) if glob else None
        walker = Walker(search_path, require_git=True, overrides=overrides, cancel=cancel)
        for path, _is_dir in walker.walk():
            if cancel.is_set():
                break
            _file_matches(path, regex, False, matches, limit, cancel)
            if len(matches) >= limit:
                return _Search(matches, True, walker.errors)
        return _Search(matches, False, walker.errors)
    except _Cancelled:
        return _Search(matches, False)


# ---------------------------------------------------------------------------------------------
# Output
# ---------------------------------------------------------------------------------------------
def _needed_lines(path: str, wanted: set[int], cancel: threading.Event | None = None) -> dict[int, str] | None:
    """The lines of ``path`` whose numbers are in ``wanted`` (CR, CRLF and LF each end a line), read a chunk
    at a time and only as far as the last one wanted; None when the file cannot be read."""
    if not wanted:
        return {}
    last = max(wanted)
    try:
        fd = open_regular(path)
    except OSError:
        return None
    found: dict[int, str] = {}
    with os.fdopen(fd, "rb") as f:
        try:
            line_no = 1
            carry = b""
            pending_cr = False
            while line_no <= last:
                if cancel is not None and cancel.is_set():
                    break
                chunk = f.read(_CHUNK)
                if not chunk:
                    if line_no in wanted:
                        found[line_no] = carry.decode("utf-8", "replace")
                    break
                if pending_cr and chunk.startswith(b"\n"):
                    chunk = chunk[1:]
                pending_cr = chunk.endswith(b"\r")
                pieces = (carry + chunk).replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
                carry = pieces.pop()
                for piece in pieces:
                    if line_no in wanted:
                        found[line_no] = piece[:LINE_CAP].decode("utf-8", "replace")
                    line_no += 1
                    if line_no > last:
                        break
                if len(carry) > LINE_CAP:
                    carry = carry[:LINE_CAP]
        except OSError:
            return None
    return found


def format_matches(search: _Search, search_path: str, is_dir: bool, context: int, limit: int
                   ) -> tuple[str, dict[str, Any] | None]:
    """pi's grep output: ``path:N: text`` per match (``path-N- text`` for context lines)."""
    if not search.matches:
        return _with_errors("No matches found", None, search.errors)
    wanted: dict[str, set[int]] = {}
    for m in search.matches:
        if context > 0 or m.line_text is None:
            first = max(1, m.line_number - context)
            wanted.setdefault(m.path, set()).update(range(first, m.line_number + context + 1))
    cache = {path: _needed_lines(path, numbers) for path, numbers in wanted.items()}
    lines_truncated = False
    out: list[str] = []

    def rel(path: str) -> str:
        if is_dir:
            r = os.path.relpath(path, search_path)
            if r and not r.startswith(".."):
                return r.replace(os.sep, "/")
        return os.path.basename(path)

    for m in search.matches:
        shown = rel(m.path)
        if context == 0 and m.line_text is not None:
            text = m.line_text.replace("\r\n", "\n").replace("\r", "")
            if text.endswith("\n"):
                text = text[:-1]
            text, cut = truncate_line(text)
            lines_truncated |= cut
            out.append(f"{shown}:{m.line_number}: {text}")
            continue
        file_lines = cache[m.path]
        if file_lines is None:
            out.append(f"{shown}:{m.line_number}: (unable to read file)")
            continue
        first = max(1, m.line_number - context) if context > 0 else m.line_number
        last = m.line_number + context if context > 0 else m.line_number
        for n in range(first, last + 1):
            if n not in file_lines and n != m.line_number:
                continue  # past the end of the file
            text, cut = truncate_line(file_lines.get(n, "").replace("\r", ""))
            lines_truncated |= cut
            out.append(f"{shown}:{n}: {text}" if n == m.line_number else f"{shown}-{n}- {text}")
    limit_notice = (f"{limit} matches limit reached. Use limit={limit * 2} for more, or refine pattern",
                    "matchLimitReached", limit) if search.limit_reached else None
    lines_notice = (f"Some lines truncated to {GREP_MAX_LINE_LENGTH} chars. Use read tool to see full lines",
                    "linesTruncated", True) if lines_truncated else None
    text, details = listing_result("\n".join(out), limit_notice, lines_notice)
    return _with_errors(text, details, search.errors)


def _with_errors(text: str, details: dict[str, Any] | None, errors: list[str]
                 ) -> tuple[str, dict[str, Any] | None]:
    """Say which paths could not be searched (an unreadable directory), after whatever was found."""
    if not errors:
        return text, details
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    details = dict(details or {})
    details["searchErrors"] = errors[:20]
    return f"{text}\n\n[Not searched: {errors[0]}{more}]", details


class GrepTool(RgBackedTool):
    name = "grep"
    label = "grep"
    description = GREP_DESCRIPTION
    parameters = GREP_SCHEMA

    async def execute(self, tool_call_id: str, params: dict[str, Any], signal: AbortSignal,
                      on_update: ToolUpdate) -> AgentToolResult:
        check_aborted(signal)
        pattern: str = params["pattern"]
        search_path = resolve_to_cwd(params.get("path") or ".", self.cwd)
        try:
            is_dir = os.path.isdir(search_path)
            if not is_dir:
                check_regular(search_path)  # a FIFO or a device would block or never end
        except NotRegularFileError as exc:
            raise ToolError(refusal_message("search", params.get("path") or search_path, exc)) from None
        except OSError:
            raise ToolError(f"Path not found: {search_path}") from None
        context = max(0, number_param(params, "context", 0))
        limit = max(1, number_param(params, "limit", DEFAULT_LIMIT))
        glob = params.get("glob") or None
        ignore_case = bool(params.get("ignoreCase"))
        literal = bool(params.get("literal"))
        if self.rg_path:
            search = await _search_rg(self.rg_path, self.cwd, pattern, search_path, is_dir, glob, ignore_case,
                                      literal, limit, signal)
        else:
            cancel = threading.Event()
            search = await run_abortable(signal, _search_python, self.cwd, pattern, search_path, is_dir, glob,
                                         ignore_case, literal, limit, cancel, cancel=cancel)
        text, details = await run_abortable(signal, format_matches, search, search_path, is_dir, context, limit)
        return text_result(text, details)


__all__ = ["GrepTool", "GREP_SCHEMA", "GREP_DESCRIPTION", "find_rg", "format_matches"]
