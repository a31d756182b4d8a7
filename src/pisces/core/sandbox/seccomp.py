"""The network switch of the OS sandbox: a seccomp filter, installed in the child before ``exec``, that refuses
every socket but a Unix-domain one.

Landlock (``landlock.py``) only mediates TCP ``connect``/``bind``; with ``sandbox.network`` false a confined
command could still send UDP (DNS to any resolver, QUIC, a packet to a 127.0.0.1 service), open raw or packet
sockets, or talk netlink. This filter closes the class at its root, the creation of the socket:

* ``socket(domain, ...)`` and ``socketpair(domain, ...)`` fail with ``EACCES`` for every ``domain`` but
  ``AF_UNIX`` (an allowlist, so a family added to the kernel later is refused too: ``AF_INET``, ``AF_INET6``,
  ``AF_NETLINK``, ``AF_PACKET``, ``AF_VSOCK``, ``AF_BLUETOOTH``, ...);
* ``io_uring_setup``/``io_uring_enter``/``io_uring_register`` fail with ``EPERM`` (``IORING_OP_SOCKET``
  creates sockets without the ``socket`` system call, where no filter sees its arguments);
* a system call of the x32 ABI (number with bit 30 set) fails with ``EPERM`` (the same ``socket`` under
  another number);
* a system call made under another architecture's convention (``int 0x80``: i386's ``socketcall``) kills the
  process: the filter's numbers mean nothing there.

``AF_UNIX`` stays usable: pipes between tools, ``socketpair`` in test runners and language servers, local
daemons of the user's own session. It is not a network (it reaches nothing off this machine), but a Unix socket
reaches whichever local service listens on one (a proxy, the Docker daemon's socket if the user may use it):
docs/security.md says so. Abstract Unix sockets outside the sandbox are refused by Landlock's scope (ABI 6+,
``landlock.py``).

Only x86_64 is supported; elsewhere ``check_supported`` raises, and a command that asked for the network off
is refused rather than run with it on (fail closed). ``install()`` runs in the child (``preexec_fn``) after
``no_new_privs``; everything it needs is built in the parent.
"""

from __future__ import annotations

import ctypes
import platform
import struct

AUDIT_ARCH_X86_64 = 0xC000003E
X32_SYSCALL_BIT = 0x40000000
_NR = {"socket": 41, "socketpair": 53, "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427}
AF_UNIX = 1
EACCES, EPERM = 13, 1

SECCOMP_RET_KILL_PROCESS = 0x80000000
SECCOMP_RET_ERRNO = 0x00050000
SECCOMP_RET_ALLOW = 0x7FFF0000
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2

# classic BPF opcodes
_LD_W_ABS = 0x20   # BPF_LD | BPF_W | BPF_ABS
_JEQ_K = 0x15      # BPF_JMP | BPF_JEQ | BPF_K
_JGE_K = 0x35      # BPF_JMP | BPF_JGE | BPF_K
_RET_K = 0x06      # BPF_RET | BPF_K
# offsets in struct seccomp_data {int nr; u32 arch; u64 instruction_pointer; u64 args[6];} (little-endian)
_OFF_NR, _OFF_ARCH, _OFF_ARG0_LOW = 0, 4, 16


class UnsupportedArchitecture(OSError):
    """The network switch has no filter for this machine's architecture."""


def check_supported() -> None:
    machine = platform.machine()
    if platform.system() != "Linux" or machine != "x86_64":
        raise UnsupportedArchitecture(
            f"sandbox.network false is enforced by a seccomp filter written for Linux x86_64 only; this is "
            f"{platform.system()} {machine or 'unknown'}: the command is refused rather than run with the network on")


def program() -> list[tuple[int, int, int, int]]:
    """The filter as (code, jt, jf, k) instructions; jumps are relative to the next instruction."""
    deny_arg, eperm, kill = "deny_eacces", "eperm", "kill"
    body: list[tuple[int, object, object, int] | str] = [
        (_LD_W_ABS, 0, 0, _OFF_ARCH),
        (_JEQ_K, 0, kill, AUDIT_ARCH_X86_64),
        (_LD_W_ABS, 0, 0, _OFF_NR),
        (_JGE_K, eperm, 0, X32_SYSCALL_BIT),
        (_JEQ_K, "domain", 0, _NR["socket"]),
        (_JEQ_K, "domain", 0, _NR["socketpair"]),
        (_JEQ_K, eperm, 0, _NR["io_uring_setup"]),
        (_JEQ_K, eperm, 0, _NR["io_uring_enter"]),
        (_JEQ_K, eperm, 0, _NR["io_uring_register"]),
        (_RET_K, 0, 0, SECCOMP_RET_ALLOW),
        "domain", (_LD_W_ABS, 0, 0, _OFF_ARG0_LOW),
        (_JEQ_K, 0, deny_arg, AF_UNIX),
        (_RET_K, 0, 0, SECCOMP_RET_ALLOW),
        deny_arg, (_RET_K, 0, 0, SECCOMP_RET_ERRNO | EACCES),
        eperm, (_RET_K, 0, 0, SECCOMP_RET_ERRNO | EPERM),
        kill, (_RET_K, 0, 0, SECCOMP_RET_KILL_PROCESS),
    ]
    labels: dict[str, int] = {}
    instructions: list[tuple[int, object, object, int]] = []
    for item in body:
        if isinstance(item, str):
            labels[item] = len(instructions)
        else:
            instructions.append(item)
    out = []
    for index, (code, jt, jf, k) in enumerate(instructions):
        def rel(target: object, index: int = index) -> int:
            if isinstance(target, str):
                offset = labels[target] - index - 1
                assert 0 <= offset < 256, "a BPF jump only goes forward, at most 255 instructions"
                return offset
            return int(target)  # type: ignore[call-overload]  # an int literal of the table above
        out.append((code, rel(jt), rel(jf), k))
    return out


class Filter:
    """The built filter; ``install()`` in the child applies it (``no_new_privs`` must already be set)."""

    def __init__(self) -> None:
        check_supported()
        insns = program()
        raw = b"".join(struct.pack("=HBBI", *insn) for insn in insns)
        self._filter = ctypes.create_string_buffer(raw, len(raw))
        # struct sock_fprog { unsigned short len; struct sock_filter *filter; }
        self._fprog = ctypes.create_string_buffer(struct.pack("=HxxxxxxQ", len(insns),
                                                              ctypes.addressof(self._filter)), 16)
        libc = ctypes.CDLL(None, use_errno=True)
        self._prctl = libc.prctl
        self._prctl.restype = ctypes.c_int
        self._args = (ctypes.c_int(_PR_SET_SECCOMP), ctypes.c_ulong(_SECCOMP_MODE_FILTER),
                      ctypes.c_void_p(ctypes.addressof(self._fprog)), ctypes.c_ulong(0), ctypes.c_ulong(0))

    def install(self) -> None:
        if self._prctl(*self._args) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP) failed: the network cannot be turned off")


__all__ = ["Filter", "UnsupportedArchitecture", "check_supported", "program"]
