"""``pisces --export SESSION [OUT]``: write a session file as a self-contained HTML page and exit.

Prints ``Exported to: <path>`` (pi's wording) on success; on failure one sentence on stderr and exit code 1.
"""

from __future__ import annotations

import os
import sys

from pisces.core.export_html import ExportError, export_file


def run_export(session_path: str, out_path: str | None = None) -> int:
    try:
        path = export_file(session_path, out_path)
    except ExportError as exc:
        sys.stderr.write(f"pisces: {exc}\n")
        return 1
    except OSError as exc:
        sys.stderr.write(f"pisces: cannot export {session_path}: {exc.strerror or exc}\n")
        return 1

    sys.stdout.flush()
    sys.stdout.buffer.write(b"Exported to: " + os.fsencode(path) + b"\n")  # a path that is not UTF-8 too
    sys.stdout.buffer.flush()
    return 0
