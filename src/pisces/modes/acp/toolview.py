"""How a pisces tool call looks in ACP: its kind, a title that names the command or the path, the files it
touches (``locations``), diff content for ``edit`` and ``write``, and the output of the result.

Used for live turns, for the history ``session/load`` replays, and for permission requests, so that the
three always show the same thing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from acp import tool_content, tool_diff_content
from acp.schema import ImageContentBlock, TextContentBlock, ToolCallLocation, ToolKind

from pisces.ai.types import ImageContent, TextContent
from pisces.core.tools.paths import resolve_to_cwd

KINDS: dict[str, ToolKind] = {"read": "read", "ls": "read", "edit": "edit", "write": "edit", "bash": "execute",
                              "grep": "search", "find": "search"}
TITLE_LIMIT = 200  # characters of a command shown in a title


@dataclass
class ToolView:
    title: str
    kind: ToolKind
    locations: list[Any] = field(default_factory=list)
    content: list[Any] = field(default_factory=list)


def _str(args: dict[str, Any], key: str) -> str | None:
    value = args.get(key)
    return value if isinstance(value, str) and value else None


def _location(cwd: str, path: str | None, line: Any = None) -> list[Any]:
    if path is None:
        return []
    number = int(line) if isinstance(line, (int, float)) and line >= 1 else None
    return [ToolCallLocation(path=resolve_to_cwd(path, cwd), line=number)]


def short_command(command: str) -> str:
    first = command.strip().splitlines()[0] if command.strip() else command
    more = first != command.strip()
    if len(first) > TITLE_LIMIT:
        first, more = first[:TITLE_LIMIT], True
    return first + (" …" if more else "")


def describe(name: str, args: Any, cwd: str) -> ToolView:
    """The view of a call before it runs (from its arguments alone)."""
    args = args if isinstance(args, dict) else {}
    kind = KINDS.get(name, "other")
    path = _str(args, "path")
    if name == "bash":
        command = args.get("command") if isinstance(args.get("command"), str) else ""
        return ToolView(short_command(command) or "bash", kind)
    if name == "read":
        offset = args.get("offset")
        where = f" (from line {int(offset)})" if isinstance(offset, (int, float)) and offset > 1 else ""
        return ToolView(f"Read {path or '?'}{where}", kind, _location(cwd, path, offset))
    if name == "write":
        text = args.get("content") if isinstance(args.get("content"), str) else ""
        content = [tool_diff_content(resolve_to_cwd(path, cwd), text, None)] if path else []
        return ToolView(f"Write {path or '?'}", kind, _location(cwd, path), content)
    if name == "edit":
        return ToolView(f"Edit {path or '?'}", kind, _location(cwd, path), _edit_diffs(args, path, cwd))
    if name in ("grep", "find"):
        pattern = _str(args, "pattern") or "?"
        where = f" in {path}" if path else ""
        return ToolView(f"{name} {pattern}{where}", kind, _location(cwd, path))
    if name == "ls":
        return ToolView(f"ls {path or '.'}", kind, _location(cwd, path or "."))
    return ToolView(name, kind)


def _edit_diffs(args: dict[str, Any], path: str | None, cwd: str) -> list[Any]:
    if path is None:
        return []
    edits = args.get("edits")
    pairs = [e for e in edits if isinstance(e, dict)] if isinstance(edits, list) else []
    if isinstance(args.get("oldText"), str) and isinstance(args.get("newText"), str):
        pairs.append({"oldText": args["oldText"], "newText": args["newText"]})
    absolute = resolve_to_cwd(path, cwd)
    return [tool_diff_content(absolute, str(e.get("newText", "")), str(e.get("oldText", ""))) for e in pairs]


def fenced(text: str) -> str:
    """``text`` in a Markdown code fence longer than any run of backticks inside it."""
    longest, run = 0, 0
    for ch in text:
        run = run + 1 if ch == "`" else 0
        longest = max(longest, run)
    fence = "`" * max(3, longest + 1)
    return f"{fence}\n{text.rstrip(chr(10))}\n{fence}"


def result_text(result: Any) -> str:
    blocks = getattr(result, "content", None) or []
    return "\n".join(b.text for b in blocks if isinstance(b, TextContent))


def result_content(name: str, args: Any, result: Any, is_error: bool, cwd: str) -> list[Any] | None:
    """The content a finished call shows, or None to keep what its start showed (the diff of a successful
    edit or write)."""
    text = result_text(result)
    if name in ("edit", "write"):
        if not is_error:
            return None
        return [*describe(name, args, cwd).content, tool_content(TextContentBlock(type="text", text=text))]
    out: list[Any] = []
    if text:
        body = text if is_error else fenced(text)
        out.append(tool_content(TextContentBlock(type="text", text=body)))
    for block in getattr(result, "content", None) or []:
        if isinstance(block, ImageContent):
            out.append(tool_content(ImageContentBlock(type="image", data=block.data, mime_type=block.mimeType)))
    return out


def finished_locations(name: str, args: Any, result: Any, cwd: str) -> list[Any] | None:
    """For an edit, the location with the first changed line (which only the result knows)."""
    if name != "edit" or not isinstance(args, dict):
        return None
    details = getattr(result, "details", None)
    line = details.get("firstChangedLine") if isinstance(details, dict) else None
    return _location(cwd, _str(args, "path"), line) if line is not None else None


def raw_output(result: Any, is_error: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"output": result_text(result), "isError": is_error}
    details = getattr(result, "details", None)
    if isinstance(details, dict) and details:
        out["details"] = details
    return out
