"""Linux namespaces and mounts through libc (ctypes): the one place kubemu declares these calls.

Python 3.11 has no os.unshare/os.setns, and mount(2) never was in the os module. Each call
has its argtypes declared (mount's flags are an unsigned long) and raises OSError with the
errno (and the path, for a mount). Lean on purpose: a container's process uses it between
fork() and exec() (kubelet/shim.py enter_container).
"""
from __future__ import annotations

import ctypes
import os
import shutil

from .child import same_process

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWNET = 0x40000000
MS_RDONLY = 0x1
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_NOEXEC = 0x8
MS_REMOUNT = 0x20
MS_NOATIME = 0x400
MS_NODIRATIME = 0x800
MS_BIND = 0x1000
MS_MOVE = 0x2000
MS_REC = 0x4000
MS_UNBINDABLE = 0x20000
MS_PRIVATE = 0x40000
MS_SLAVE = 0x80000
MS_RELATIME = 0x200000
MNT_DETACH = 2

# statvfs(3) f_flag bits and the mount(2) flags they stand for: a read-only remount of a bind
# mount must repeat the flags the mount already has, or it would clear them (runc does this).
_LOCKED_FLAGS = ((os.ST_NOSUID, MS_NOSUID), (os.ST_NODEV, MS_NODEV), (os.ST_NOEXEC, MS_NOEXEC),
                 (os.ST_NOATIME, MS_NOATIME), (os.ST_NODIRATIME, MS_NODIRATIME), (os.ST_RELATIME, MS_RELATIME))

# What a pod's sandbox holds, in the order a container joins them: the mount namespace last,
# since entering it moves the caller's root and working directory (runc's order).
SANDBOX = (("ipc", CLONE_NEWIPC), ("uts", CLONE_NEWUTS), ("net", CLONE_NEWNET), ("mnt", CLONE_NEWNS))

_libc = ctypes.CDLL(None, use_errno=True)
_libc.unshare.argtypes = [ctypes.c_int]
_libc.setns.argtypes = [ctypes.c_int, ctypes.c_int]
_libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
_libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
_libc.sethostname.argtypes = [ctypes.c_char_p, ctypes.c_size_t]


def _check(result: int, path: str | None = None) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), path)


def unshare(flags: int) -> None:
    _check(_libc.unshare(flags))


def setns(fd: int, nstype: int) -> None:
    _check(_libc.setns(fd, nstype))


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    def raw(value: str | None) -> bytes | None:
        return None if value is None else os.fsencode(value)
    _check(_libc.mount(raw(source), raw(target), raw(fstype), flags, raw(data)), target)


def umount2(target: str, flags: int) -> None:
    _check(_libc.umount2(os.fsencode(target), flags), target)


def mount_flags(path: str) -> int:
    """The per-mount flags (nosuid, nodev, noexec, atime) of the mount `path` is on."""
    f_flag = os.statvfs(path).f_flag
    return sum(ms for st, ms in _LOCKED_FLAGS if f_flag & st)


def sethostname(name: str) -> None:
    encoded = name.encode()
    _check(_libc.sethostname(encoded, len(encoded)))


def ns_inode(pid: int, kind: str) -> int:
    """The inode of a process's namespace of `kind` ("net", "mnt", ...): two processes share
    the namespace exactly when these are equal. OSError if the process is gone."""
    return os.stat(f"/proc/{pid}/ns/{kind}").st_ino


class NamespaceGone(Exception):
    """The process whose namespace was asked for is not the recorded one any more (it exited,
    and its PID may be another process's by now); the text is one line."""


def open_ns(pid: int, kind: str, start_ticks: int, inode: int | None = None) -> int:
    """An O_CLOEXEC descriptor of the `kind` namespace ("net", "mnt", ...) of the process that
    is `pid` and started at `start_ticks`, checked after the open: the process is still that one
    and (when given) the namespace's inode is `inode`. A path like /proc/<pid>/ns/net handed to
    a tool that opens it later could meanwhile name a reused PID's namespace, the host's; a
    descriptor cannot change what it names (pass it on as /proc/self/fd/<n>). NamespaceGone
    otherwise; the caller closes the descriptor."""
    path = f"/proc/{pid}/ns/{kind}"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as exc:
        raise NamespaceGone(f"cannot open {path}: {exc.strerror}") from None
    try:
        if not same_process(pid, start_ticks):
            raise NamespaceGone(f"process {pid} has exited (its PID may be another's by now)")
        if inode is not None and os.fstat(fd).st_ino != inode:
            raise NamespaceGone(f"{path} is not the recorded namespace any more")
    except BaseException:
        os.close(fd)
        raise
    return fd


def fd_path(fd: int) -> str:
    """How a child that inherited `fd` (pass_fds) names it: nsenter keeps it open, and a CNI
    plugin opens CNI_NETNS as a path."""
    return f"/proc/self/fd/{fd}"


SBIN_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def nsenter_path() -> str | None:
    """util-linux's nsenter: the caller's PATH first, then the sbin directories a user's PATH
    may lack. None when it is not installed."""
    return shutil.which("nsenter", path=":".join(filter(None, (os.environ.get("PATH"), SBIN_PATH))))


def nsfs_mounts(mountinfo: str) -> list[str]:
    """The mount points of every namespace file bind-mounted somewhere (`ip netns add` makes
    them), from /proc/<pid>/mountinfo text. A copy of such a mount keeps its namespace alive."""
    points = []
    for line in mountinfo.splitlines():
        fields, sep, tail = line.partition(" - ")
        parts, after = fields.split(), tail.split()
        if sep and len(parts) >= 5 and after and after[0] == "nsfs":
            points.append(_unescape(parts[4]))
    return points


def mount_points(mountinfo: str) -> list[str]:
    """Every mount point in /proc/<pid>/mountinfo text, in its order (relative to the reader's
    root)."""
    points = []
    for line in mountinfo.splitlines():
        parts = line.split(" - ", 1)[0].split()
        if len(parts) >= 5:
            points.append(_unescape(parts[4]))
    return points


def _unescape(field: str) -> str:
    """mountinfo writes space, tab, newline and backslash in octal (\\040 ...)."""
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\" and field[i + 1:i + 4].isdigit() and len(field[i + 1:i + 4]) == 3:
            out.append(chr(int(field[i + 1:i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)
