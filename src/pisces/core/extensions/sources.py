"""Whether a session has anything to load as an extension, answered without importing the extension machinery
(the build step asks this on every start-up; the binding asks it again on reload)."""

from __future__ import annotations

import os
from typing import Any

from pisces.core.config.settings import Settings
from pisces.core.extensions.entry_points import entry_points


def extension_sources_present(opts: dict[str, Any], settings: Settings) -> bool:
    """Whether anything could load as an extension, without importing the extension machinery: a few stat
    calls, the settings already read, and the entry-point cache (see pisces.core.extensions.entry_points)."""
    if opts["cli_paths"] or opts["inline"]:
        return True
    if opts["no_extensions"]:
        return False
    if any(settings.get(k) for k in ("extensions", "packages", "hooks", "customTools")):
        return True
    adir = opts["agent_dir"]
    for base in (adir, os.path.join(opts["cwd"], ".pisces")):
        for sub in ("extensions", "hooks", "tools"):
            try:
                if any(not n.startswith((".", "_")) for n in os.listdir(os.path.join(base, sub))):
                    return True
            except OSError:
                pass
    if os.environ.get("PISCES_DISABLE_EXTENSION_AUTOLOAD", "") not in ("", "0"):
        return False

    return bool(entry_points("pisces.extensions", adir))
