"""``@file`` arguments of print and json modes, as pi 0.73.1 treats them.

Each ``@path`` argument is read and put before the first message: a text file as
``<file name="/abs/path">\\n…content…\\n</file>\\n``, an image (png, jpeg, gif, webp, by its first bytes) as
``<file name="/abs/path"></file>\\n`` plus an image attachment of that prompt; an empty file is skipped. A
file that does not exist or cannot be read stops the run before anything is sent (``FileArgError``, pi's
"Error: File not found: <path>"). Each file is read up to ``MAX_FILE_BYTES``; a larger one is refused
rather than read whole.
"""

from __future__ import annotations

import base64
import os
from typing import Any

from pisces.ai.types import ImageContent
from pisces.core.safe_open import format_bytes, read_bytes

MAX_FILE_BYTES = 32 << 20


class FileArgError(Exception):
    pass


def split_file_args(messages: list[str]) -> tuple[list[str], list[str]]:
    """(the ``@file`` paths, the other messages), each in order."""
    files = [m[1:] for m in messages if m.startswith("@") and len(m) > 1]
    rest = [m for m in messages if not (m.startswith("@") and len(m) > 1)]
    return files, rest


def process_file_args(paths: list[str], cwd: str) -> tuple[str, list[Any]]:
    from pisces.core.tools.read import detect_image_mime  # noqa: PLC0415 - only when @file arguments are given

    text, images = "", []
    for arg in paths:
        path = os.path.abspath(os.path.join(cwd, os.path.expanduser(arg)))
        if not os.path.exists(path):
            raise FileArgError(f"Error: File not found: {path}")
        try:
            if os.path.getsize(path) == 0:
                continue
            if os.path.getsize(path) > MAX_FILE_BYTES:
                raise FileArgError(f"Error: {path} is larger than {format_bytes(MAX_FILE_BYTES)}: pass a smaller "
                                   "file, or ask the model to read it with its tools")
            data = read_bytes(path, MAX_FILE_BYTES)
        except OSError as exc:
            raise FileArgError(f"Error: Could not read file {path}: {exc.strerror or exc}") from None
        mime = detect_image_mime(data[:4096])
        if mime is not None:
            images.append(ImageContent(data=base64.b64encode(data).decode("ascii"), mimeType=mime))
            text += f'<file name="{path}"></file>\n'
        else:
            text += f'<file name="{path}">\n{data.decode("utf-8", "replace")}\n</file>\n'
    return text, images
