"""The network switch against this machine's kernel, through the sandbox's own launcher (``Sandbox.prepare``):
with ``sandbox.network`` false a confined command cannot send a UDP datagram to a 127.0.0.1 socket, connect
over TCP, open netlink, packet or IPv6 sockets, or create a socket through io_uring; Unix-domain sockets work
(a pair, and a path-bound server inside the workspace), as docs/security.md says; with the network on the same
probes get through. Also the filter program itself: the architecture is checked first, and an unknown
architecture is refused with a clear error (fail closed)."""

from __future__ import annotations

import json
import platform
import socket
import subprocess
import sys
import textwrap

import pytest

from pisces.core.sandbox import landlock, seccomp
from pisces.core.sandbox.launch import Sandbox

pytestmark = pytest.mark.skipif(landlock.available() < 1 or platform.machine() != "x86_64",
                                reason="needs Landlock and x86_64 (the filter's architecture)")


class Settings:
    def __init__(self, network: bool) -> None:
        self.g = {"sandbox": {"mode": "workspace-write", "network": network}}
        self.project_trusted = False

    def global_settings(self):
        return self.g

    def project_settings(self):
        return {}


def confined(code: str, cwd: str, *, network: bool) -> subprocess.CompletedProcess:
    launch = Sandbox(Settings(network)).prepare(cwd)
    assert launch is not None
    try:
        return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=cwd, env=launch.env,
                              capture_output=True, text=True, timeout=60, **launch.popen_kwargs())
    finally:
        launch.close()


@pytest.fixture
def udp_server():
    server = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    server.bind(("127.0.0.1", 0))
    server.settimeout(10)
    yield server
    server.close()


def test_udp_to_127_0_0_1_is_blocked_with_the_network_off_and_arrives_with_it_on(tmp_path, udp_server):
    port = udp_server.getsockname()[1]
    probe = f"""
        import socket
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.sendto(b"hello", ("127.0.0.1", {port}))
        print("sent")
    """
    off = confined(probe, str(tmp_path), network=False)
    assert off.returncode != 0 and "PermissionError" in off.stderr and "sent" not in off.stdout
    on = confined(probe, str(tmp_path), network=True)
    assert on.returncode == 0 and on.stdout.strip() == "sent"
    data, _ = udp_server.recvfrom(100)
    assert data == b"hello"
    udp_server.settimeout(0.5)
    with pytest.raises(TimeoutError):  # only the datagram of the unconfined-network run ever arrived
        udp_server.recvfrom(100)


def test_tcp_and_every_other_family_is_refused_while_unix_sockets_work(tmp_path):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    port = server.getsockname()[1]
    probe = f"""
        import errno, json, socket
        results = {{}}
        for name, family, kind in (("tcp", socket.AF_INET, socket.SOCK_STREAM),
                                   ("tcp6", socket.AF_INET6, socket.SOCK_STREAM),
                                   ("netlink", socket.AF_NETLINK, socket.SOCK_RAW),
                                   ("packet", socket.AF_PACKET, socket.SOCK_RAW)):
            try:
                s = socket.socket(family, kind)
                if name == "tcp":
                    s.connect(("127.0.0.1", {port}))
                results[name] = "open"
            except OSError as exc:
                results[name] = errno.errorcode.get(exc.errno, str(exc.errno))
        a, b = socket.socketpair()
        a.sendall(b"pair")
        results["pair"] = b.recv(10).decode()
        srv = socket.socket(socket.AF_UNIX)
        srv.bind("u.sock")
        srv.listen(1)
        cli = socket.socket(socket.AF_UNIX)
        cli.connect("u.sock")
        conn, _ = srv.accept()
        cli.sendall(b"path")
        results["unix"] = conn.recv(10).decode()
        print(json.dumps(results))
    """
    try:
        off = confined(probe, str(tmp_path), network=False)
        (tmp_path / "u.sock").unlink()
        on = confined(probe, str(tmp_path), network=True)
    finally:
        server.close()
    assert off.returncode == 0, off.stderr
    got = json.loads(off.stdout)
    assert got == {"tcp": "EACCES", "tcp6": "EACCES", "netlink": "EACCES", "packet": "EACCES",
                   "pair": "pair", "unix": "path"}
    assert on.returncode == 0, on.stderr
    got = json.loads(on.stdout)
    assert got["tcp"] == "open" and got["tcp6"] == "open" and got["netlink"] == "open"
    assert (got["pair"], got["unix"]) == ("pair", "path")


def test_io_uring_and_x32_calls_cannot_go_around_the_filter(tmp_path):
    probe = """
        import ctypes, errno
        libc = ctypes.CDLL(None, use_errno=True)
        params = ctypes.create_string_buffer(120)
        fd = libc.syscall(425, 4, params)  # io_uring_setup
        first = errno.errorcode.get(ctypes.get_errno(), "?") if fd < 0 else "open"
        fd = libc.syscall(41 | 0x40000000, 2, 1, 0)  # socket(AF_INET) under the x32 numbering
        second = errno.errorcode.get(ctypes.get_errno(), "?") if fd < 0 else "open"
        print(first, second)
    """
    off = confined(probe, str(tmp_path), network=False)
    assert off.returncode == 0, off.stderr
    assert off.stdout.split() == ["EPERM", "EPERM"]


def test_the_program_checks_the_architecture_first_and_unknown_ones_fail_closed(monkeypatch):
    insns = seccomp.program()
    assert insns[0] == (0x20, 0, 0, 4)  # load seccomp_data.arch
    assert insns[1][0] == 0x15 and insns[1][3] == seccomp.AUDIT_ARCH_X86_64
    kill_at = 2 + insns[1][2]  # where a foreign architecture jumps
    assert insns[kill_at] == (0x06, 0, 0, seccomp.SECCOMP_RET_KILL_PROCESS)
    assert insns[-1] == (0x06, 0, 0, seccomp.SECCOMP_RET_KILL_PROCESS)
    monkeypatch.setattr(platform, "machine", lambda: "sparc64")
    monkeypatch.setattr(Sandbox, "abi", lambda self: 7)  # a kernel with Landlock, on a machine without a filter
    with pytest.raises(seccomp.UnsupportedArchitecture, match="x86_64 only.*refused rather than run"):
        Sandbox(Settings(False)).prepare("/tmp")
