"""The descriptions of the four default tools (read, bash, edit, write), importable without the tools.

The system prompt lists every active tool with the first line of its description, and an HTML export
carries the tools' names and descriptions. Both used to import the tool modules (and their walkers, diff
and shell runner, ~20 ms) just to read these constants; :class:`pisces.core.tools.LazyTool` now answers
``description`` from here and loads a tool only to run it. The tool classes take their ``description``
from this module too, so there is one text for each.

The limits are written out because ``truncate`` (and its ``decimal`` import) is not loaded at start-up;
``tests/core/test_tool_descriptions.py`` checks they equal ``truncate.DEFAULT_MAX_LINES/BYTES``.
"""

from __future__ import annotations

MAX_LINES = 2000  # = truncate.DEFAULT_MAX_LINES
MAX_BYTES = 50 * 1024  # = truncate.DEFAULT_MAX_BYTES

READ_DESCRIPTION = (
    "Read the contents of a file. Supports text files and images (jpg, png, gif, webp). Images are sent as "
    f"attachments. For text files, output is truncated to {MAX_LINES} lines or "
    f"{MAX_BYTES // 1024}KB (whichever is hit first). Use offset/limit for large files. When you need "
    "the full file, continue with offset until complete."
)

BASH_DESCRIPTION = (
    f"Execute a bash command in the current working directory. Returns stdout and stderr. Output is truncated to "
    f"last {MAX_LINES} lines or {MAX_BYTES // 1024}KB (whichever is hit first). If truncated, full "
    "output is saved to a temp file. Optionally provide a timeout in seconds."
)

EDIT_DESCRIPTION = (
    "Edit a single file using exact text replacement. Every edits[].oldText must match a unique, non-overlapping "
    "region of the original file. If two changes affect the same block or nearby lines, merge them into one edit "
    "instead of emitting overlapping edits. Do not include large unchanged regions just to connect distant changes."
)

WRITE_DESCRIPTION = ("Write content to a file. Creates the file if it doesn't exist, overwrites if it does. "
                     "Automatically creates parent directories.")

#: by tool class name, as ``pisces.core.tools._CLASSES`` names them
BY_CLASS = {"ReadTool": READ_DESCRIPTION, "BashTool": BASH_DESCRIPTION, "EditTool": EDIT_DESCRIPTION,
            "WriteTool": WRITE_DESCRIPTION}
