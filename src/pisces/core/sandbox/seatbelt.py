"""macOS: the same ``SandboxPolicy`` as a Seatbelt profile, applied by running the command under
``/usr/bin/sandbox-exec``.

UNTESTED ON A REAL MAC: this project's machines are Linux; the profile text is unit-tested here
(tests/core/sandbox/test_seatbelt.py), never run through the macOS kernel. docs/security.md says so.

What the profile says, mirroring the Linux sandbox (``landlock.py``, ``seccomp.py``):

* reads and execution anywhere (``(allow default)``), as on Linux;
* ``(deny file-write*)``, then writes allowed beneath each writable directory of the policy (the workspace and
  the private temp dir for ``workspace-write``, the temp dir alone for ``read-only``) and on a few devices
  (``/dev/null``, ``/dev/zero``, ``/dev/tty``, the pseudo-terminals, ``/dev/stdout``, ``/dev/stderr``,
  ``/dev/fd/N``, ``/dev/dtracehelper``);
* with the network off, ``(deny network*)`` and back only the Unix-domain sockets (the same rule as the
  seccomp filter on Linux: local sockets, no IP of any kind).

Paths never enter the profile's text: each is a parameter (``-D WRITABLE_ROOT_n=/path``, read with
``(param "WRITABLE_ROOT_n")``), so a directory name holding quotes or parentheses cannot change the profile.
Paths are resolved first (``/tmp`` is ``/private/tmp`` on macOS, and Seatbelt matches resolved paths).
``sandbox-exec`` is deprecated by Apple but still shipped and used the same way by other coding agents.
"""

from __future__ import annotations

import os

SANDBOX_EXEC = "/usr/bin/sandbox-exec"
_DEVICES = ("/dev/null", "/dev/zero", "/dev/tty", "/dev/dtracehelper", "/dev/urandom", "/dev/random", "/dev/stdout",
            "/dev/stderr")
_PTY = r'(regex #"^/dev/ttys[0-9]+$")'
_FD = r'(regex #"^/dev/fd/[0-9]+$")'  # the command's own descriptors (``echo x > /dev/stderr``)


def profile(writable: list[str], *, network: bool) -> tuple[str, dict[str, str]]:
    """(the profile's text, its parameters) for writes beneath ``writable`` and the network on or off."""
    params = {f"WRITABLE_ROOT_{i}": os.path.realpath(path) for i, path in enumerate(writable)}
    lines = [
        "(version 1)",
        "; pisces: generated from the sandbox policy (core/sandbox/seatbelt.py); paths are parameters",
        "(allow default)",
        "(deny file-write*)",
        "(allow file-write*",
        *[f'    (subpath (param "{name}"))' for name in params],
        *[f'    (literal "{dev}")' for dev in _DEVICES],
        f"    {_PTY}",
        f"    {_FD})",
    ]
    if not network:
        lines += [
            "(deny network*)",
            '(allow network-bind (local unix-socket (path-regex #"^/")))',
            '(allow network-outbound (remote unix-socket (path-regex #"^/")))',
            "(allow system-socket (socket-domain AF_UNIX))",
        ]
    return "\n".join(lines) + "\n", params


def argv(command: list[str], writable: list[str], *, network: bool) -> list[str]:
    """``command`` run under ``sandbox-exec`` with the profile of ``writable`` and ``network``."""
    text, params = profile(writable, network=network)
    defines = [arg for name, value in params.items() for arg in ("-D", f"{name}={value}")]
    return [SANDBOX_EXEC, "-p", text, *defines, "--", *command]


def available() -> bool:
    return os.access(SANDBOX_EXEC, os.X_OK)


__all__ = ["profile", "argv", "available", "SANDBOX_EXEC"]
