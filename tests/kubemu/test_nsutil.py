"""kubemu/nsutil.py: the mountinfo parsing, and the libc calls in forked children (as root)."""
from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import socket

import pytest

from kubemu import nsutil
from kubemu.child import proc_stat

NEEDS_ROOT = pytest.mark.skipif(os.geteuid() != 0, reason="namespaces and mounts need root (CAP_SYS_ADMIN)")

# Lines of this machine's /proc/self/mountinfo, with two namespace files bind-mounted (one of
# them at a path with a space, which mountinfo writes as \040).
MOUNTINFO = r"""24 30 0:22 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw
30 1 259:1 / / rw,relatime - ext4 /dev/root rw
41 30 0:5 / /run/netns rw shared:20 - tmpfs tmpfs rw
52 41 0:4 net:[4026532401] /run/netns/kubemu-0a1b2c3d rw shared:20 - nsfs nsfs rw
53 30 0:4 uts:[4026531838] /tmp/a\040b/uts rw - nsfs nsfs rw
54 30 0:33 / /sys/fs/cgroup/memory rw,nosuid - cgroup cgroup rw,memory
"""


def test_nsfs_mounts_are_the_bind_mounted_namespace_files():
    assert nsutil.nsfs_mounts(MOUNTINFO) == ["/run/netns/kubemu-0a1b2c3d", "/tmp/a b/uts"]
    assert nsutil.nsfs_mounts("") == [] and nsutil.nsfs_mounts("garbage line\n - nsfs") == []


def test_mount_points_are_every_mount_point_in_order():
    assert nsutil.mount_points(MOUNTINFO) == ["/sys", "/", "/run/netns", "/run/netns/kubemu-0a1b2c3d", "/tmp/a b/uts",
                                              "/sys/fs/cgroup/memory"]
    assert nsutil.mount_points("") == [] and nsutil.mount_points("short line\n") == []


def test_mount_flags_are_the_per_mount_flags_a_remount_must_repeat():
    """/proc is mounted nosuid,nodev,noexec on most machines; /dev/shm nosuid,nodev."""
    flags = {line.split()[4]: line.split()[5].split(",") for line in open("/proc/self/mountinfo")}
    for point, options in flags.items():
        if point in ("/proc", "/dev/shm", "/"):
            got = nsutil.mount_flags(point)
            for option, flag in (("nosuid", nsutil.MS_NOSUID), ("nodev", nsutil.MS_NODEV),
                                 ("noexec", nsutil.MS_NOEXEC)):
                assert bool(got & flag) == (option in options), (point, option)


def in_child(action) -> dict:
    """Run `action()` in a forked child (namespace changes stay there); its JSON result, or
    {"error": errno} if it raised OSError."""
    rd, wr = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(rd)
            try:
                result = action()
            except OSError as exc:
                result = {"error": exc.errno, "message": str(exc)}
            os.write(wr, json.dumps(result).encode())
        finally:
            os._exit(0)
    os.close(wr)
    with os.fdopen(rd) as f:
        text = f.read()
    os.waitpid(pid, 0)
    return json.loads(text)


@NEEDS_ROOT
def test_unshare_and_sethostname_stay_in_the_child():
    def action():
        nsutil.unshare(nsutil.CLONE_NEWUTS | nsutil.CLONE_NEWNET)
        nsutil.sethostname("kmtest-pod")
        return {"hostname": socket.gethostname(), "net": nsutil.ns_inode(os.getpid(), "net"),
                "uts": nsutil.ns_inode(os.getpid(), "uts")}

    host = socket.gethostname()
    got = in_child(action)
    assert got["hostname"] == "kmtest-pod" and socket.gethostname() == host
    assert got["net"] != nsutil.ns_inode(os.getpid(), "net") and got["uts"] != nsutil.ns_inode(os.getpid(), "uts")


@NEEDS_ROOT
def test_a_mount_in_a_slave_mount_namespace_is_invisible_outside(tmp_path):
    def action():
        nsutil.unshare(nsutil.CLONE_NEWNS)
        nsutil.mount(None, "/", None, nsutil.MS_REC | nsutil.MS_SLAVE)
        nsutil.mount("tmpfs", str(tmp_path), "tmpfs", 0, "size=1m")
        (tmp_path / "inside").write_text("x")
        listed = os.listdir(tmp_path)
        nsutil.umount2(str(tmp_path), nsutil.MNT_DETACH)
        return {"listed": listed, "after": os.listdir(tmp_path)}

    assert in_child(action) == {"listed": ["inside"], "after": []}
    assert os.listdir(tmp_path) == []


@NEEDS_ROOT
def test_setns_joins_another_process_namespace():
    """A child in a new UTS namespace; another child joins it by /proc/<pid>/ns/uts."""
    rd, wr = os.pipe()
    holder = os.fork()
    if holder == 0:
        try:
            nsutil.unshare(nsutil.CLONE_NEWUTS)
            nsutil.sethostname("kmtest-held")
            os.write(wr, b"1")
            while True:
                signal.pause()  # until the test kills it
        finally:
            os._exit(0)
    try:
        os.read(rd, 1)

        def action():
            fd = os.open(f"/proc/{holder}/ns/uts", os.O_RDONLY)
            nsutil.setns(fd, nsutil.CLONE_NEWUTS)
            return {"hostname": socket.gethostname(), "uts": nsutil.ns_inode(os.getpid(), "uts")}

        got = in_child(action)
        assert got == {"hostname": "kmtest-held", "uts": nsutil.ns_inode(holder, "uts")}
    finally:
        os.kill(holder, signal.SIGKILL)
        os.waitpid(holder, 0)
        os.close(rd)
        os.close(wr)


def test_errors_are_oserrors_with_the_errno():
    got = in_child(lambda: nsutil.setns(987654, nsutil.CLONE_NEWNET))
    assert got["error"] == errno.EBADF and got["message"] == "[Errno 9] Bad file descriptor"
    got = in_child(lambda: nsutil.umount2("/nonexistent-kmtest", 0))
    assert got["error"] in (errno.ENOENT, errno.EPERM) and "/nonexistent-kmtest" in got["message"]
    with pytest.raises(FileNotFoundError):
        nsutil.ns_inode(2 ** 22 + 1, "net")  # above pid_max's default ceiling: no such process


def _open_fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def test_open_ns_gives_the_recorded_processs_namespace_only():
    me = os.getpid()
    start = proc_stat(me)[1]
    inode = nsutil.ns_inode(me, "net")
    fd = nsutil.open_ns(me, "net", start, inode)
    try:
        assert os.fstat(fd).st_ino == inode and nsutil.fd_path(fd) == f"/proc/self/fd/{fd}"
    finally:
        os.close(fd)
    before = _open_fds()
    for pid, ticks, ino, said in ((me, start + 1, inode, "has exited"), (me, start, inode + 1, "not the recorded"),
                                  (0, start, None, "cannot open /proc/0/ns/net")):
        with pytest.raises(nsutil.NamespaceGone, match=said):
            nsutil.open_ns(pid, "net", ticks, ino)
    assert _open_fds() == before  # nothing left open by a refusal


def test_nsenter_path_looks_in_sbin_too(monkeypatch):
    if not shutil.which("nsenter", path=nsutil.SBIN_PATH):
        pytest.skip("no nsenter (util-linux) on this machine")
    monkeypatch.setenv("PATH", "/nonexistent")
    assert os.path.basename(nsutil.nsenter_path()) == "nsenter"
    monkeypatch.setattr(nsutil, "SBIN_PATH", "/nonexistent")
    assert nsutil.nsenter_path() is None
