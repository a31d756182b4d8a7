"""Linux Landlock through ``ctypes``: confine a child process's file-system writes to a set of directories
and, optionally, forbid its TCP connections and binds, before it ``exec``s.

The kernel-facing part of the OS sandbox; ``launch.py`` applies it to the commands pisces runs for the model
(docs/security.md#the-os-sandbox).

``Ruleset.build(writable, network=False)`` creates the ruleset in the parent (reading is allowed everywhere,
writing, creating, removing and truncating only beneath ``writable`` and on a few character devices such as
``/dev/null``; with ``network=False``, every TCP ``connect`` and ``bind`` is refused: Landlock ABI 4 and
later, and from ABI 6 no connection to an abstract Unix socket made outside the sandbox; UDP and other
socket families are refused by the seccomp filter of ``seccomp.py``, which ``launch.py`` adds).
``ruleset.preexec`` is a function for ``subprocess``'s ``preexec_fn``: in the child it sets ``no_new_privs``
and restricts itself with two system calls. The descriptor need not be passed (``pass_fds``): ``subprocess``
runs ``preexec_fn`` before it closes the inherited descriptors, so the confined program never holds the ruleset.
``available()`` is the kernel's Landlock ABI version, 0 when there is none (kernel too old, Landlock not
enabled at boot, not Linux).
"""

from __future__ import annotations

import ctypes
import os
import platform
import struct

_SYS = {"x86_64": (444, 445, 446), "aarch64": (444, 445, 446), "riscv64": (444, 445, 446)}
_PR_SET_NO_NEW_PRIVS = 38
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1

EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
REMOVE_DIR, REMOVE_FILE, MAKE_CHAR, MAKE_DIR, MAKE_REG = 1 << 4, 1 << 5, 1 << 6, 1 << 7, 1 << 8
MAKE_SOCK, MAKE_FIFO, MAKE_BLOCK, MAKE_SYM, REFER, TRUNCATE, IOCTL_DEV = (1 << 9, 1 << 10, 1 << 11, 1 << 12,
                                                                        1 << 13, 1 << 14, 1 << 15)
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0

_READ = EXECUTE | READ_FILE | READ_DIR
_FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV
_DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty", "/dev/ptmx")
_DEVICE_DIRS = ("/dev/pts", "/dev/shm")


class LandlockError(OSError):
    """The kernel refused to build or apply a ruleset; the text says which step."""


_libc: ctypes.CDLL | None = None


def _lib() -> ctypes.CDLL:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
        _libc.syscall.restype = ctypes.c_long
        _libc.prctl.restype = ctypes.c_int
    return _libc


def _numbers() -> tuple[int, int, int] | None:
    return _SYS.get(platform.machine()) if platform.system() == "Linux" else None


def available() -> int:
    """The Landlock ABI version of the running kernel (0: none)."""
    nums = _numbers()
    if nums is None:
        return 0
    abi = _lib().syscall(nums[0], None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION))
    return int(abi) if abi > 0 else 0


def _fs_rights(abi: int) -> int:
    rights = (1 << 13) - 1  # ABI 1: EXECUTE .. MAKE_SYM
    if abi >= 2:
        rights |= REFER
    if abi >= 3:
        rights |= TRUNCATE
    if abi >= 5:
        rights |= IOCTL_DEV
    return rights


class Ruleset:
    """A built ruleset: ``fd`` (pass it to the child) and ``preexec`` (its ``preexec_fn``)."""

    def __init__(self, fd: int, abi: int) -> None:
        self.fd = fd
        self.abi = abi
        lib = _lib()
        nums = _numbers()
        assert nums is not None
        # everything the child needs is made here, so that the child only makes two calls
        self._prctl = lib.prctl
        self._syscall = lib.syscall
        self._args = (ctypes.c_long(nums[2]), ctypes.c_int(fd), ctypes.c_uint32(0))
        self._nnp = (ctypes.c_int(_PR_SET_NO_NEW_PRIVS), ctypes.c_ulong(1), ctypes.c_ulong(0), ctypes.c_ulong(0),
                     ctypes.c_ulong(0))

    def preexec(self) -> None:
        """In the child, before ``exec``: no new privileges, then the ruleset. Raises when either fails, so
        the command never runs unconfined by mistake."""
        if self._prctl(*self._nnp) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
        if self._syscall(*self._args) != 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self failed")

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    @classmethod
    def build(cls, writable: list[str], *, network: bool = True) -> "Ruleset":
        """Reads anywhere; writes only beneath ``writable`` (and the harmless devices); with ``network``
        False no TCP connect or bind (ABI 4 and later; refused with LandlockError below it)."""
        abi = available()
        if abi <= 0:
            raise LandlockError("this kernel has no Landlock (or it is not enabled)")
        nums = _numbers()
        assert nums is not None
        lib = _lib()
        fs = _fs_rights(abi)
        net = 0
        if not network:
            if abi < 4:
                raise LandlockError(f"Landlock ABI {abi} cannot restrict the network (ABI 4 can)")
            net = NET_BIND_TCP | NET_CONNECT_TCP
        if abi >= 6 and not network:
            # no connecting to an abstract Unix socket made outside the sandbox (a local proxy, a session bus)
            attr = struct.pack("=QQQ", fs, net, SCOPE_ABSTRACT_UNIX_SOCKET)
        elif abi >= 4:
            attr = struct.pack("=QQ", fs, net)
        else:
            attr = struct.pack("=Q", fs)
        buf = ctypes.create_string_buffer(attr, len(attr))
        fd = lib.syscall(nums[0], buf, ctypes.c_size_t(len(attr)), ctypes.c_uint32(0))
        if fd < 0:
            raise LandlockError(ctypes.get_errno(), "landlock_create_ruleset failed")
        ruleset = cls(int(fd), abi)
        try:
            ruleset._allow("/", _READ)
            for path in writable:
                ruleset._allow(path, fs)
            for dev in _DEVICES:
                ruleset._allow(dev, (READ_FILE | WRITE_FILE | IOCTL_DEV | TRUNCATE) & fs, missing_ok=True)
            for d in _DEVICE_DIRS:
                ruleset._allow(d, fs, missing_ok=True)
        except BaseException:
            ruleset.close()
            raise
        return ruleset

    def _allow(self, path: str, rights: int, *, missing_ok: bool = False) -> None:
        nums = _numbers()
        assert nums is not None
        try:
            pfd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            if missing_ok:
                return
            raise
        try:
            if not os.path.isdir(path):
                rights &= _FILE_RIGHTS
            attr = struct.pack("=Qi", rights, pfd)
            buf = ctypes.create_string_buffer(attr, len(attr))
            if _lib().syscall(nums[1], ctypes.c_int(self.fd), ctypes.c_int(_RULE_PATH_BENEATH), buf,
                              ctypes.c_uint32(0)) != 0:
                raise LandlockError(ctypes.get_errno(), f"landlock_add_rule failed for {path}")
        finally:
            os.close(pfd)
