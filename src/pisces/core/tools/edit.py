"""The ``edit`` tool: exact-text replacements in one file, with a numbered diff in the details.

Accepts pi's ``{path, edits: [{oldText, newText}, ...]}`` and the older single ``{path, oldText, newText}``
(``prepare_arguments`` turns the latter into the former; ``execute`` also accepts it directly). Every
oldText is matched against the original file; a BOM and CRLF line endings survive the edit.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any

from pisces.agent.types import AgentTool, AgentToolResult, ToolError, ToolUpdate
from pisces.ai.abort import AbortSignal
from pisces.ai.types import TextContent

from ._common import await_abortable, check_aborted, run_abortable
from .edit_diff import (EditError, apply_edits, detect_line_ending, generate_diff_string, normalize_to_lf,
                        restore_line_endings, strip_bom)
from .paths import error_code, file_mutation_queue, node_error_message, resolve_to_cwd

if TYPE_CHECKING:
    from .backends import FileBackend

EDIT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["path", "edits"],
    "properties": {
        "path": {"type": "string", "description": "Path to the file to edit (relative or absolute)"},
        "edits": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["oldText", "newText"],
                "properties": {
                    "oldText": {
                        "type": "string",
                        "description": "Exact text for one targeted replacement. It must be unique in the original "
                                       "file and must not overlap with any other edits[].oldText in the same call.",
                    },
                    "newText": {"type": "string", "description": "Replacement text for this targeted edit."},
                },
                "additionalProperties": False,
            },
            "description": "One or more targeted replacements. Each edit is matched against the original file, not "
                           "incrementally. Do not include overlapping or nested edits. If two changes touch the same "
                           "block or nearby lines, merge them into one edit instead.",
        },
    },
    "additionalProperties": False,
}

EDIT_DESCRIPTION = (
    "Edit a single file using exact text replacement. Every edits[].oldText must match a unique, non-overlapping "
    "region of the original file. If two changes affect the same block or nearby lines, merge them into one edit "
    "instead of emitting overlapping edits. Do not include large unchanged regions just to connect distant changes."
)


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


def apply_to_text(raw: str, display_path: str, edits: list[dict[str, Any]]) -> tuple[str, str, int | None]:
    """The edited file text, the numbered diff and the first changed line. A BOM and CRLF endings survive."""
    bom, content = strip_bom(raw)
    ending = detect_line_ending(content)
    try:
        base, new_content = apply_edits(normalize_to_lf(content), edits, display_path)
    except EditError as exc:
        raise ToolError(str(exc)) from None
    diff, first_changed = generate_diff_string(base, new_content)
    return bom + restore_line_endings(new_content, ending), diff, first_changed


def _edit(path: str, display_path: str, edits: list[dict[str, Any]]) -> tuple[str, int | None]:
    if not os.access(path, os.R_OK | os.W_OK):
        try:
            os.stat(path)
            code = "EACCES"
        except OSError as exc:
            code = error_code(exc)
        raise ToolError(f"Could not edit file: {display_path}. Error code: {code}.")
    try:
        with open(path, "rb") as f:
            raw = f.read().decode("utf-8", "replace")
    except IsADirectoryError as exc:
        raise ToolError(node_error_message(exc, "read")) from None
    except OSError as exc:
        raise ToolError(node_error_message(exc, "open", path)) from None
    final, diff, first_changed = apply_to_text(raw, display_path, edits)
    try:
        with open(path, "w", encoding="utf-8", errors="replace", newline="") as f:
            f.write(final)
    except OSError as exc:
        raise ToolError(node_error_message(exc, "open", path)) from None
    return diff, first_changed


async def _edit_through(files: FileBackend, signal: AbortSignal, path: str, display_path: str,
                        edits: list[dict[str, Any]]) -> tuple[str, int | None]:
    """The same edit with the file read from and written to a backend (an editor's buffer)."""
    raw = await await_abortable(signal, files.read_text(path))
    final, diff, first_changed = await run_abortable(signal, apply_to_text, raw, display_path, edits)
    await await_abortable(signal, files.write_text(path, final))
    return diff, first_changed


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
                diff, first_changed = await run_abortable(signal, _edit, path, raw_path, edits)
            else:
                diff, first_changed = await _edit_through(self.files, signal, path, raw_path, edits)
        details: dict[str, Any] = {"diff": diff}
        if first_changed is not None:
            details["firstChangedLine"] = first_changed
        return AgentToolResult(content=[TextContent(text=f"Successfully replaced {len(edits)} block(s) in {raw_path}.")],
                               details=details)


__all__ = ["EditTool", "EDIT_SCHEMA", "EDIT_DESCRIPTION", "prepare_edit_arguments", "apply_to_text"]
