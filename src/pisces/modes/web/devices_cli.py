"""``pisces web devices`` and ``pisces web revoke ID``: the browsers the web mode remembers.

Reads and changes ``<agent dir>/web-devices.json`` (:mod:`pisces.modes.web.devices`); a running pisces notices
a revocation within half a second and closes that browser's sockets. Exit status 0, or 2 with a sentence on
stderr for a wrong word or an unknown id.
"""

from __future__ import annotations

import json
import sys
from typing import Sequence

from pisces.modes.web.devices import DeviceStore

USAGE = ("usage: pisces web devices [--json]   list the paired browsers\n"
         "       pisces web revoke ID           forget one: it is refused from now on, open pages included\n")


def run_web_cli(words: Sequence[str]) -> int:
    words = list(words)
    if words[:1] == ["devices"] and words[1:] in ([], ["--json"]):
        store = DeviceStore()
        devices = sorted(store.devices.values(), key=lambda d: d.paired)
        if words[1:] == ["--json"]:
            sys.stdout.write(json.dumps({"devices": [d.public() for d in devices]}, indent=1) + "\n")
            return 0
        if not devices:
            sys.stdout.write(f"no paired browser ({store.path})\n")
            return 0
        rows = [("ID", "NAME", "ORIGIN", "PROJECT", "PAIRED", "LAST SEEN")]
        rows += [(d.id, d.name, d.origin, d.cwd, d.public()["paired"], d.public()["lastSeen"]) for d in devices]
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
        for r in rows:
            sys.stdout.write("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)) + "  " + r[-1] + "\n")
        return 0
    if words[:1] == ["revoke"] and len(words) == 2:
        store = DeviceStore()
        if not store.revoke(words[1]):
            sys.stderr.write(f"pisces: no paired browser {words[1]!r} (pisces web devices lists them)\n")
            return 2
        sys.stdout.write(f"revoked {words[1]}: that browser is refused from now on\n")
        return 0
    sys.stderr.write(USAGE)
    return 2
