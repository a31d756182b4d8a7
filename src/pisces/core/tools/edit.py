"""The ``edit`` tool: exact-text replacements in one file, with a numbered diff in the details.

Accepts pi's ``{path, edits: [{oldText, newText}, ...]}`` and the older single ``{path, oldText, newText}``
(``prepare_arguments`` turns the latter into the former; ``execute`` also accepts it directly). Every
oldText is matched against the original file; a BOM and CRLF line endings survive the edit.
"""

from __future__ import annotations

import json
import os
import re
from typing import TYPE_CHECKING, Any

from pisces.agent.types import AgentTool, AgentToolResult, ToolError, ToolUpdate
from pisces.ai.abort import AbortSignal
from pisces.ai.types import TextContent
from pisces.core.safe_open import (
    FileTooLargeError,
    NotRegularFileError,
    format_bytes,
    open_regular,
    read_fd,
    write_atomic,
)

from ._common import await_abortable, check_aborted, run_abortable
from .descriptions import EDIT_DESCRIPTION
from .edit_diff import (
    EditError,
    apply_edits,
    detect_line_ending,
    generate_diff_string,
    normalize_to_lf,
    restore_line_endings,
    strip_bom,
)
from .paths import (
    error_code,
    file_mutation_queue,
    node_error_message,
    not_regular_message,
    refusal_message,
    resolve_to_cwd,
    write_error_message,
)
from .schemas import EDIT_SCHEMA

if TYPE_CHECKING:
    from .backends import FileBackend



def prepare_edit_arguments(args: Any) -> Any:
    """pi's argument repair, applied before schema validation: ``edits`` sent as a JSON string is parsed,
    and a legacy top-level ``oldText``/``newText`` pair becomes (another) entry of ``edits``."""
    if not isinstance(args, dict):
        return args
    args = dict(args)
    if isinstance(args.get("edits"), str):
        try:
            parsed = json.loads(args["edits"])
        except ValueError:
            parsed = None
        if isinstance(parsed, list):
            args["edits"] = parsed
    old, new = args.get("oldText"), args.get("newText")
    if not isinstance(old, str) or not isinstance(new, str):
        return args
    edits = list(args["edits"]) if isinstance(args.get("edits"), list) else []
    edits.append({"oldText": old, "newText": new})
    rest = {k: v for k, v in args.items() if k not in ("oldText", "newText")}
    rest["edits"] = edits
    return rest


def apply_to_text(raw: str, display_path: str, edits: list[dict[str, Any]], hint: str = ""
                  ) -> tuple[str, str, int | None]:
    """The edited file text, the numbered diff and the first changed line. A BOM and CRLF endings survive.
    ``hint`` is added to the error when an edit cannot be applied."""
    bom, content = strip_bom(raw)
    ending = detect_line_ending(content)
    try:
        base, new_content = apply_edits(normalize_to_lf(content), edits, display_path)
    except EditError as exc:
        raise ToolError(str(exc) + hint) from None
    diff, first_changed = generate_diff_string(base, new_content)
    return bom + restore_line_endings(new_content, ending), diff, first_changed


EDIT_MAX_BYTES = 32 << 20  # the whole file is held, decoded and diffed in memory

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
_NOT_ESCAPED_BYTE = re.compile("[\ud800-\udc7f\udd00-\udfff]")  # surrogates that do not stand for a byte


def _load(path: str, display_path: str) -> tuple[str, bool]:
    """(text, is UTF-8). A file that is not valid UTF-8 is decoded with every undecodable byte kept as a
    surrogate escape, so that writing it back reproduces each byte the edits did not touch."""
    if not os.access(path, os.R_OK | os.W_OK):
        try:
            os.stat(path)
            code = "EACCES"
        except OSError as exc:
            code = error_code(exc)
        raise ToolError(f"Could not edit file: {display_path}. Error code: {code}.")
    try:
        fd = open_regular(path, max_bytes=EDIT_MAX_BYTES)
        try:
            data = read_fd(fd, path, EDIT_MAX_BYTES)
        finally:
            os.close(fd)
    except NotRegularFileError as exc:
        raise ToolError(not_regular_message("edit", display_path, exc, "read")) from None
    except FileTooLargeError:
        raise ToolError(f"Cannot edit {display_path}: it is larger than {format_bytes(EDIT_MAX_BYTES)}, the most the "
                        "edit tool loads; change it with bash (sed, a script) instead") from None
    except OSError as exc:
        raise ToolError(node_error_message(exc, "open", path)) from None
    try:
        return data.decode("utf-8"), True
    except UnicodeDecodeError:
        return data.decode("utf-8", "surrogateescape"), False


def _edit(path: str, display_path: str, edits: list[dict[str, Any]]) -> tuple[str, int | None, str | None]:
    """(diff, first changed line, a note for the result or None)."""
    raw, is_utf8 = _load(path, display_path)
    hint = ""
    if not is_utf8 and any("\ufffd" in str(e.get("oldText", "")) for e in edits):
        hint = (" The file is not valid UTF-8: its undecodable bytes, which read shows as \ufffd, cannot be "
                "matched; choose oldText that stays clear of them.")
    final, diff, first_changed = apply_to_text(raw, display_path, edits, hint)
    note = None
    if is_utf8:
        data = _LONE_SURROGATE.sub("\ufffd", final).encode("utf-8")
    else:
        data = _NOT_ESCAPED_BYTE.sub("\ufffd", final).encode("utf-8", "surrogateescape")
        diff = _LONE_SURROGATE.sub("\ufffd", diff)
        if not all(str(e.get("newText", "")).isascii() for e in edits):
            note = (f"Note: {display_path} is not valid UTF-8 (perhaps Latin-1). Every byte outside the edited text "
                    "was kept as it was, but the new non-ASCII text was written as UTF-8, so the file now mixes "
                    "two encodings.")
    try:
        write_atomic(path, data)
    except NotRegularFileError as exc:
        raise ToolError(refusal_message("edit", display_path, exc)) from None
    except OSError as exc:
        raise ToolError(write_error_message(exc, path, True)) from None
    return diff, first_changed, note


async def _edit_through(files: FileBackend, signal: AbortSignal, path: str, display_path: str,
                        edits: list[dict[str, Any]]) -> tuple[str, int | None, str | None]:
    """The same edit with the file read from and written to a backend (an editor's buffer)."""
    raw = await await_abortable(signal, files.read_text(path))
    final, diff, first_changed = await run_abortable(signal, apply_to_text, raw, display_path, edits)
    await await_abortable(signal, files.write_text(path, final))
    return diff, first_changed, None


class EditTool(AgentTool):
    name = "edit"
    label = "edit"
    description = EDIT_DESCRIPTION
    parameters = EDIT_SCHEMA

    def __init__(self, cwd: str, *, files: FileBackend | None = None) -> None:
        self.cwd = cwd
        self.files = files

    def prepare_arguments(self, args: Any) -> Any:
        return prepare_edit_arguments(args)

    async def execute(self, tool_call_id: str, params: dict[str, Any], signal: AbortSignal,
                      on_update: ToolUpdate) -> AgentToolResult:
        params = prepare_edit_arguments(params)
        edits = params.get("edits")
        if not isinstance(edits, list) or not edits:
            raise ToolError("Edit tool input is invalid. edits must contain at least one replacement.")
        raw_path: str = params["path"]
        path = resolve_to_cwd(raw_path, self.cwd)
        async with file_mutation_queue(path):
            check_aborted(signal)
            if self.files is None:
                diff, first_changed, note = await run_abortable(signal, _edit, path, raw_path, edits)
            else:
                diff, first_changed, note = await _edit_through(self.files, signal, path, raw_path, edits)
        details: dict[str, Any] = {"diff": diff}
        if first_changed is not None:
            details["firstChangedLine"] = first_changed
        text = f"Successfully replaced {len(edits)} block(s) in {raw_path}."
        return AgentToolResult(content=[TextContent(text=f"{text}\n\n{note}" if note else text)], details=details)


__all__ = ["EditTool", "EDIT_SCHEMA", "EDIT_DESCRIPTION", "prepare_edit_arguments", "apply_to_text"]
