"""Build hook: an editable install byte-compiles the package in place.

pip byte-compiles the files of a regular install, but an editable install leaves the sources where they
are, and when ``PYTHONDONTWRITEBYTECODE`` is set (as in many containers) Python never caches their
bytecode either: every start of ``pisces`` would then compile ~15k lines again, about a third of its
start-up time. Compiling once here gives the same cache a regular install has. Python checks each cached
file against its source's modification time, so an edited module is simply compiled afresh in memory.
"""

from __future__ import annotations

import compileall
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface


class CustomBuildHook(BuildHookInterface):
    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if version != "editable":
            return
        package = Path(self.root) / "src" / "pisces"
        # A read-only checkout still installs; it only starts slower.
        compileall.compile_dir(str(package), quiet=1, workers=1)
