"""Text from models and tools made safe to print: no escape sequence, control character or OSC survives.

``clean`` removes every C0/C1 control except newline (tabs become spaces, a carriage return ends the line's
rewrite as a newline would), and every escape sequence whole (CSI, OSC, DCS, ...), so nothing a model or a
command prints can move the cursor, set the clipboard (OSC 52), change the title or clear the screen. Styling
is added afterwards by the renderer, never taken from the input. Linear in the input's length.
"""

from __future__ import annotations

import re

# ESC [ ... final, ESC ] ... (BEL | ESC \), ESC P/X/^/_ ... ESC \, ESC + one char; C1 forms (0x9b CSI, 0x9d OSC)
_ESCAPES = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]?"
    r"|\x9b[0-?]*[ -/]*[@-~]?"
    r"|(?:\x1b\]|\x9d)[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"
    r"|(?:\x1b[PX^_]|[\x90\x98\x9e\x9f])[^\x1b\x9c]*(?:\x1b\\|\x9c)?"
    r"|\x1b[ -/]*[0-~]?"
)
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def clean(text: str, tab: int = 4) -> str:
    """``text`` without escape sequences or control characters (newlines kept)."""
    if not text:
        return ""
    text = _ESCAPES.sub("", text)
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\t", " " * tab)
    return _CONTROLS.sub("", text)
