"""The macOS Seatbelt profile generated from the sandbox policy (text only: no Mac here, see docs/security.md):
writes are denied but beneath the policy's directories, passed as parameters so that no path can change the
profile; the network rules appear only with the network off and keep Unix sockets; and on darwin the launcher
wraps every spawn in ``sandbox-exec`` instead of applying Landlock."""

from __future__ import annotations

import os
import sys

from pisces.core.sandbox import seatbelt
from pisces.core.sandbox.launch import Sandbox


class Settings:
    def __init__(self, mode: str, network: bool) -> None:
        self.g = {"sandbox": {"mode": mode, "network": network}}
        self.project_trusted = False

    def global_settings(self):
        return self.g

    def project_settings(self):
        return {}


def test_writes_are_denied_except_beneath_the_writable_roots_given_as_parameters(tmp_path):
    hostile = tmp_path / 'a") (allow file-write* (subpath "/'
    hostile.mkdir(parents=True)
    text, params = seatbelt.profile([str(tmp_path / "work"), str(hostile)], network=True)
    lines = text.splitlines()
    assert lines[0] == "(version 1)"
    assert lines.index("(allow default)") < lines.index("(deny file-write*)") < lines.index("(allow file-write*")
    assert '    (subpath (param "WRITABLE_ROOT_0"))' in lines and '    (subpath (param "WRITABLE_ROOT_1"))' in lines
    assert params == {"WRITABLE_ROOT_0": str((tmp_path / "work").resolve()), "WRITABLE_ROOT_1": str(hostile)}
    assert str(tmp_path) not in text  # no path in the text: the hostile name cannot open a rule
    assert '(literal "/dev/null")' in text and '(literal "/dev/stderr")' in text and "network" not in text
    assert '(regex #"^/dev/fd/[0-9]+$")' in text
    assert text.count("(") == text.count(")")


def test_network_off_denies_every_socket_but_unix_ones():
    text, _ = seatbelt.profile([], network=False)
    lines = text.splitlines()
    deny = lines.index("(deny network*)")
    assert lines[deny + 1:] == ['(allow network-bind (local unix-socket (path-regex #"^/")))',
                                '(allow network-outbound (remote unix-socket (path-regex #"^/")))',
                                "(allow system-socket (socket-domain AF_UNIX))"]
    assert text.count("(") == text.count(")")


def test_argv_runs_the_command_under_sandbox_exec_with_the_parameters():
    argv = seatbelt.argv(["/bin/sh", "-c", "make test"], ["/w"], network=False)
    assert argv[:2] == ["/usr/bin/sandbox-exec", "-p"] and "(deny network*)" in argv[2]
    assert argv[3:] == ["-D", "WRITABLE_ROOT_0=/w", "--", "/bin/sh", "-c", "make test"]


def test_on_darwin_the_launcher_wraps_spawns_in_the_profile_of_the_policy(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "platform", "darwin")
    monkeypatch.setattr(seatbelt, "available", lambda: True)
    box = Sandbox(Settings("read-only", False))
    launch = box.prepare(str(tmp_path))
    assert launch is not None and launch.popen_kwargs() == {}  # no Landlock, no seccomp on a Mac
    argv = launch.wrap(["/bin/sh", "-c", "ls"])
    assert argv[0] == "/usr/bin/sandbox-exec" and argv[-3:] == ["/bin/sh", "-c", "ls"]
    temp = box.temp_dir()
    assert argv[argv.index("-D") + 1] == f"WRITABLE_ROOT_0={os.path.realpath(temp)}"  # read-only: the temp dir
    assert "WRITABLE_ROOT_1" not in " ".join(argv) and "(deny network*)" in argv[2]
    assert launch.env["TMPDIR"] == temp
    state = box.state()
    assert (state["mechanism"], state["enforced"]) == ("seatbelt", True)
    monkeypatch.setattr(seatbelt, "available", lambda: False)
    assert Sandbox(Settings("workspace-write", True)).prepare(str(tmp_path)) is None  # said once, approvals alone
