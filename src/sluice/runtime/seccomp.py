"""The seccomp filter of the runner jail: system calls no Node program needs, refused.

Built once with the system's libseccomp (``libseccomp.so.2``, through ctypes) and handed to
bubblewrap as a compiled BPF program (``bwrap --seccomp FD``), which loads it just before it
starts Node. Everything is allowed but:

- debugging and reading other processes: ``ptrace``, ``process_vm_readv/writev``,
  ``pidfd_getfd``; kernel keyrings (``keyctl``, ``add_key``, ``request_key``); ``bpf``,
  ``userfaultfd``, ``perf_event_open`` (the usual kernel-exploit primitives);
- new namespaces and mounts: ``unshare``, ``setns``, ``clone`` with ``CLONE_NEWUSER`` (or any
  other namespace flag), the mount family;
- administration: modules, ``kexec``, ``reboot``, swap, ``acct``, quotas, ``syslog``, file
  handles (``open_by_handle_at``);
- ``ioctl(TIOCSTI)`` (typing into a terminal);
- ``io_uring_setup``, ``io_uring_enter``, ``io_uring_register`` answer ``ENOSYS`` (a large
  kernel surface of its own, which seccomp cannot see into; libuv falls back to its thread
  pool when it is missing);
- ``socket`` and ``socketpair`` of any family but ``AF_UNIX``, ``AF_INET`` and ``AF_INET6``
  answer ``EAFNOSUPPORT``: ``AF_VSOCK`` reaches a hypervisor peer past the network namespace,
  ``AF_NETLINK``, ``AF_PACKET`` and the rest are kernel surface no component needs
  (``os.networkInterfaces()`` fails; egress goes through the proxy's Unix socket);
- ``personality`` other than the query (``0xffffffff``): no turning address-space
  randomisation off (``ADDR_NO_RANDOMIZE``) or ``READ_IMPLIES_EXEC`` on;
- ``clone3`` answers ``ENOSYS``, not ``EPERM``: its flags live in memory a filter cannot read,
  and glibc falls back to ``clone`` (filtered above) only on ``ENOSYS``.

System calls of other architectures (32-bit ``int 0x80`` on x86-64) kill the process
(libseccomp's default for a foreign architecture). Without libseccomp the jail runs without a
filter, and ``build()`` says why.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
from pathlib import Path

from sluice import errors

__all__ = ["DENIED", "build"]

DENIED = (
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "pidfd_getfd",
    "keyctl",
    "add_key",
    "request_key",
    "bpf",
    "userfaultfd",
    "perf_event_open",
    "unshare",
    "setns",
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "move_mount",
    "open_tree",
    "fsopen",
    "fsmount",
    "fsconfig",
    "fspick",
    "mount_setattr",
    "init_module",
    "finit_module",
    "delete_module",
    "kexec_load",
    "kexec_file_load",
    "reboot",
    "swapon",
    "swapoff",
    "acct",
    "quotactl",
    "syslog",
    "open_by_handle_at",
    "name_to_handle_at",
    "iopl",
    "ioperm",
    "lookup_dcookie",
    "vhangup",
)
# CLONE_NEWUSER, CLONE_NEWNS, CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWIPC, CLONE_NEWUTS,
# CLONE_NEWCGROUP: clone() with any of them is refused (one rule each: rules are OR-ed).
_NAMESPACE_FLAGS = (
    0x10000000,
    0x00020000,
    0x20000000,
    0x40000000,
    0x08000000,
    0x04000000,
    0x02000000,
)
_CMP_NE = 1
_CMP_EQ = 4
_CMP_GE = 5
_CMP_MASKED_EQ = 7
_TIOCSTI = 0x5412
#: Answered ENOSYS, as on a kernel without them.
_NOT_THERE = ("io_uring_setup", "io_uring_enter", "io_uring_register")
#: AF_UNIX 1, AF_INET 2, AF_INET6 10 are allowed: every other family is refused, as ranges
#: (a libseccomp rule compares an argument once, and the rules are OR-ed): 0, 3..9, 11 and up.
_REFUSED_FAMILIES = (
    (_CMP_EQ, 0),
    *((_CMP_EQ, n) for n in range(3, 10)),
    (_CMP_GE, 11),
)
_PERSONALITY_QUERY = 0xFFFFFFFF
_ACT_ALLOW = 0x7FFF0000


def _act_errno(code: int) -> int:
    return 0x00050000 | (code & 0xFFFF)


class _ArgCmp(ctypes.Structure):
    _fields_ = (
        ("arg", ctypes.c_uint),
        ("op", ctypes.c_int),
        ("datum_a", ctypes.c_uint64),
        ("datum_b", ctypes.c_uint64),
    )


def build(path: Path) -> None:
    """Write the compiled filter to ``path`` (raises ``errors.SeccompUnavailable``)."""
    name = ctypes.util.find_library("seccomp") or "libseccomp.so.2"
    try:
        lib = ctypes.CDLL(name, use_errno=True)
    except OSError as exc:
        raise errors.SeccompUnavailable(f"libseccomp not found ({exc})") from exc
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = (ctypes.c_uint32,)
    lib.seccomp_syscall_resolve_name.argtypes = (ctypes.c_char_p,)
    lib.seccomp_rule_add_array.argtypes = (
        ctypes.c_void_p,
        ctypes.c_uint32,
        ctypes.c_int,
        ctypes.c_uint,
        ctypes.POINTER(_ArgCmp),
    )
    lib.seccomp_export_bpf.argtypes = (ctypes.c_void_p, ctypes.c_int)
    lib.seccomp_release.argtypes = (ctypes.c_void_p,)
    ctx = lib.seccomp_init(_ACT_ALLOW)
    if not ctx:
        raise errors.SeccompUnavailable("seccomp_init failed")

    def rule(action: int, syscall: str, *cmps: _ArgCmp) -> None:
        number = lib.seccomp_syscall_resolve_name(syscall.encode())
        if number < 0:
            return  # not a system call on this architecture
        array = (_ArgCmp * len(cmps))(*cmps) if cmps else None
        rc = lib.seccomp_rule_add_array(ctx, action, number, len(cmps), array)
        if rc < 0:
            raise errors.SeccompUnavailable(f"seccomp rule for {syscall}: {os.strerror(-rc)}")

    try:
        for syscall in DENIED:
            rule(_act_errno(errno.EPERM), syscall)
        for flag in _NAMESPACE_FLAGS:
            rule(_act_errno(errno.EPERM), "clone", _ArgCmp(0, _CMP_MASKED_EQ, flag, flag))
        rule(_act_errno(errno.ENOSYS), "clone3")
        rule(_act_errno(errno.EPERM), "ioctl", _ArgCmp(1, _CMP_EQ, _TIOCSTI, 0))
        for syscall in _NOT_THERE:
            rule(_act_errno(errno.ENOSYS), syscall)
        for syscall in ("socket", "socketpair"):
            for op, family in _REFUSED_FAMILIES:
                rule(_act_errno(errno.EAFNOSUPPORT), syscall, _ArgCmp(0, op, family, 0))
        rule(
            _act_errno(errno.EPERM),
            "personality",
            _ArgCmp(0, _CMP_NE, _PERSONALITY_QUERY, 0),
        )
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            rc = lib.seccomp_export_bpf(ctx, fd)
        finally:
            os.close(fd)
        if rc < 0:
            raise errors.SeccompUnavailable(f"seccomp_export_bpf: {os.strerror(-rc)}")
    finally:
        lib.seccomp_release(ctx)
