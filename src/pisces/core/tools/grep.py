"""The ``grep`` tool: search file contents with ripgrep, or with a pure-Python search that gives the same
output when ``rg`` is not installed.

rg is looked up on PATH, then next to the running Python (the ``ripgrep`` wheel puts it in the venv's
bin). It runs as pi runs it (``--json --line-number --color=never --hidden``, so .gitignore applies inside
git repositories) plus ``--sort path`` so that results, and which ones the match limit keeps, are stable.
"""

from __future__ import annotations

import asyncio
import base64
import os
import re
import shutil
import signal as _signal
import sys
import threading
from dataclasses import dataclass
from typing import Any

import msgspec

from pisces.agent.types import AgentTool, AgentToolResult, ToolError, ToolUpdate
from pisces.ai.abort import AbortSignal

from ._common import OPERATION_ABORTED, check_aborted, number_param, run_abortable, text_result
from ._walk import Overrides, Walker
from .paths import resolve_to_cwd
from .truncate import DEFAULT_MAX_BYTES, GREP_MAX_LINE_LENGTH, listing_result, truncate_line

GREP_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["pattern"],
    "properties": {
        "pattern": {"type": "string", "description": "Search pattern (regex or literal string)"},
        "path": {"type": "string", "description": "Directory or file to search (default: current directory)"},
        "glob": {"type": "string", "description": "Filter files by glob pattern, e.g. '*.ts' or '**/*.spec.ts'"},
        "ignoreCase": {"type": "boolean", "description": "Case-insensitive search (default: false)"},
        "literal": {"type": "boolean",
                    "description": "Treat pattern as literal string instead of regex (default: false)"},
        "context": {"type": "number",
                    "description": "Number of lines to show before and after each match (default: 0)"},
        "limit": {"type": "number", "description": "Maximum number of matches to return (default: 100)"},
    },
}

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


# ---------------------------------------------------------------------------------------------
# ripgrep
# ---------------------------------------------------------------------------------------------
class _RgEvent(msgspec.Struct):
    type: str
    data: dict[str, Any] = {}


_decode_event = msgspec.json.Decoder(_RgEvent).decode


async def _search_rg(rg: str, cwd: str, pattern: str, search_path: str, glob: str | None, ignore_case: bool,
                     literal: bool, limit: int, signal: AbortSignal | None) -> _Search:
    args = [rg, "--json", "--line-number", "--color=never", "--hidden", "--sort", "path"]
    if ignore_case:
        args.append("--ignore-case")
    if literal:
        args.append("--fixed-strings")
    if glob:
        args += ["--glob", glob]
    args += ["--", pattern, search_path]
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
    limit_reached = False
    stderr_task = asyncio.ensure_future(proc.stderr.read())  # type: ignore[union-attr]
    try:
        buf = b""
        assert proc.stdout is not None
        while not limit_reached:
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
                if len(matches) >= limit:
                    limit_reached = True
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
    if not limit_reached and code not in (0, 1):
        raise ToolError(stderr.strip() or f"ripgrep exited with code {code}")
    return _Search(matches, limit_reached)


def _kill(proc: asyncio.subprocess.Process) -> None:
    try:
        proc.send_signal(_signal.SIGTERM)
    except ProcessLookupError:
        pass


# ---------------------------------------------------------------------------------------------
# Pure Python
# ---------------------------------------------------------------------------------------------
_BINARY_BLOCK = 64 * 1024


def _compile(pattern: str, ignore_case: bool, literal: bool) -> re.Pattern[str]:
    flags = re.MULTILINE | (re.IGNORECASE if ignore_case else 0)
    try:
        return re.compile(re.escape(pattern) if literal else pattern, flags)
    except re.error as exc:
        raise ToolError(f"regex parse error:\n    {pattern}\nerror: {exc}") from None


def _file_matches(path: str, regex: re.Pattern[str], explicit: bool, out: list[_Match], limit: int) -> None:
    try:
        with open(path, "rb") as f:
            data = f.read(_BINARY_BLOCK)
            if not explicit and b"\x00" in data:
                return  # binary: not worth reading further (git objects, images, ...)
            data += f.read()
    except OSError:
        return
    nul = data.find(b"\x00")
    if nul != -1:
        if explicit:  # searched up to the end of the line holding the first NUL
            end = data.find(b"\n", nul)
            data = data if end == -1 else data[:end + 1]
        else:  # an implicit binary file is skipped from the block where the NUL shows up
            cut = data.rfind(b"\n", 0, (nul // _BINARY_BLOCK) * _BINARY_BLOCK)
            if cut == -1:
                return
            data = data[:cut + 1]
    text = data.decode("utf-8", "replace")
    if text.startswith("\ufeff"):
        text = text[1:]
    if regex.search(text) is None:  # cheap whole-file test; lines are checked one by one below
        return
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    for number, line in enumerate(lines, 1):
        if regex.search(line) is not None:
            out.append(_Match(path, number, line + "\n"))
            if len(out) >= limit:
                return


def _search_python(cwd: str, pattern: str, search_path: str, is_dir: bool, glob: str | None, ignore_case: bool,
                   literal: bool, limit: int, cancel: threading.Event) -> _Search:
    regex = _compile(pattern, ignore_case, literal)
    matches: list[_Match] = []
    if not is_dir:
        _file_matches(search_path, regex, True, matches, limit)
        return _Search(matches, len(matches) >= limit)
    overrides = Overrides.build([glob], cwd) if glob else None
    walker = Walker(search_path, require_git=True, overrides=overrides, cancel=cancel)
    for path, _is_dir in walker.walk():
        if cancel.is_set():
            break
        _file_matches(path, regex, False, matches, limit)
        if len(matches) >= limit:
            return _Search(matches, True)
    return _Search(matches, False)


# ---------------------------------------------------------------------------------------------
# Output
# ---------------------------------------------------------------------------------------------
def _split_file_lines(path: str) -> list[str]:
    try:
        with open(path, "rb") as f:
            content = f.read().decode("utf-8", "replace")
    except OSError:
        return []
    return content.replace("\r\n", "\n").replace("\r", "\n").split("\n")


def format_matches(search: _Search, search_path: str, is_dir: bool, context: int, limit: int
                   ) -> tuple[str, dict[str, Any] | None]:
    """pi's grep output: ``path:N: text`` per match (``path-N- text`` for context lines)."""
    if not search.matches:
        return "No matches found", None
    cache: dict[str, list[str]] = {}
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
        if m.path not in cache:
            cache[m.path] = _split_file_lines(m.path)
        file_lines = cache[m.path]
        if not file_lines:
            out.append(f"{shown}:{m.line_number}: (unable to read file)")
            continue
        first = max(1, m.line_number - context) if context > 0 else m.line_number
        last = min(len(file_lines), m.line_number + context) if context > 0 else m.line_number
        for n in range(first, last + 1):
            line = file_lines[n - 1] if n - 1 < len(file_lines) else ""
            text, cut = truncate_line(line.replace("\r", ""))
            lines_truncated |= cut
            out.append(f"{shown}:{n}: {text}" if n == m.line_number else f"{shown}-{n}- {text}")
    limit_notice = (f"{limit} matches limit reached. Use limit={limit * 2} for more, or refine pattern",
                    "matchLimitReached", limit) if search.limit_reached else None
    lines_notice = (f"Some lines truncated to {GREP_MAX_LINE_LENGTH} chars. Use read tool to see full lines",
                    "linesTruncated", True) if lines_truncated else None
    return listing_result("\n".join(out), limit_notice, lines_notice)


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
            os.stat(search_path)
        except OSError:
            raise ToolError(f"Path not found: {search_path}") from None
        context = max(0, number_param(params, "context", 0))
        limit = max(1, number_param(params, "limit", DEFAULT_LIMIT))
        glob = params.get("glob") or None
        ignore_case = bool(params.get("ignoreCase"))
        literal = bool(params.get("literal"))
        if self.rg_path:
            search = await _search_rg(self.rg_path, self.cwd, pattern, search_path, glob, ignore_case, literal,
                                      limit, signal)
        else:
            cancel = threading.Event()
            search = await run_abortable(signal, _search_python, self.cwd, pattern, search_path, is_dir, glob,
                                         ignore_case, literal, limit, cancel, cancel=cancel)
        text, details = await run_abortable(signal, format_matches, search, search_path, is_dir, context, limit)
        return text_result(text, details)


__all__ = ["GrepTool", "GREP_SCHEMA", "GREP_DESCRIPTION", "find_rg", "format_matches"]
