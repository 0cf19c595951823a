"""kubemu/cgroups.py: finding the hierarchies, and a cgroup's life with real processes on every
writable hierarchy of this machine (v2, and the v1 fallback)."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from kubemu import cgroups
from tests.conftest import alive, wait_for

HYBRID = """\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
"""
PURE_V2 = "27 22 0:24 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate\n"
V1_ONLY = """\
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,xattr,name=systemd
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
"""


@pytest.mark.parametrize("text, expected", [
    (HYBRID, [("/sys/fs/cgroup/unified", 2), ("/sys/fs/cgroup/pids", 1), ("/sys/fs/cgroup/systemd", 1)]),
    (PURE_V2, [("/sys/fs/cgroup", 2)]),
    (V1_ONLY, [("/sys/fs/cgroup/pids", 1), ("/sys/fs/cgroup/systemd", 1)]),  # pids first, whatever the order
    ("32 31 0:29 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n", []),  # no grouping-only hierarchy
    ("", []),
    ("garbage\n1 2 3\n", []),
])
def test_parse_mountinfo(text, expected):
    assert cgroups.parse_mountinfo(text) == [cgroups.Hierarchy(Path(m), v) for m, v in expected]


def test_disabled_by_the_environment(monkeypatch):
    monkeypatch.setenv(cgroups.DISABLE_ENV, "0")
    assert cgroups.hierarchies() == []
    assert cgroups.create("kubemu-test-disabled") is None


def writable_hierarchies() -> list[cgroups.Hierarchy]:
    found = []
    for h in cgroups.hierarchies():
        probe = h.mount / f"kubemu-test-probe-{os.getpid()}"
        try:
            probe.mkdir()
        except OSError:
            continue
        probe.rmdir()
        found.append(h)
    return found


@pytest.mark.parametrize("hierarchy", writable_hierarchies() or [pytest.param(None, marks=pytest.mark.skip(
    reason="no writable cgroup hierarchy on this machine"))], ids=lambda h: f"v{h.version}:{h.mount}" if h else "none")
def test_a_child_and_everything_it_starts_stay_in_the_cgroup(hierarchy, tmp_path):
    top = cgroups.Cgroup(hierarchy.mount / f"kubemu-test-{os.getpid()}", hierarchy.version)
    leaf = top.child("node").child("init.scope")
    leaf.path.mkdir(parents=True)
    try:
        fd = leaf.open_procs()
        try:
            # The child double-forks a sleep into a session of its own and exits: an orphan.
            child = subprocess.Popen(["/bin/sh", "-c", f"setsid sleep 1000 & echo $! > {tmp_path}/pid"],
                                     preexec_fn=lambda: cgroups.join(fd))
        finally:
            os.close(fd)
        child.wait()
        escapee = wait_for(lambda: (tmp_path / "pid").exists() and int((tmp_path / "pid").read_text() or 0))
        assert top.pids() == [escapee] and top.populated()
        with pytest.raises(OSError):
            top.remove()  # busy
        wait_for(lambda: top.kill() or not top.populated(), message="the cgroup to empty")
        wait_for(lambda: not alive(escapee), message="the escapee to die")
        top.remove()
        assert not top.path.exists() and not top.populated() and top.pids() == []
        top.remove()  # gone already: fine
    finally:
        if top.path.exists():
            wait_for(lambda: top.kill() or not top.populated())
            top.remove()


def test_create_falls_through_an_unwritable_hierarchy(monkeypatch, tmp_path):
    made = tmp_path / "a" / "b"
    made.mkdir(parents=True)
    (made / "cgroup.procs").write_text("")  # what the kernel would have made in a real hierarchy
    monkeypatch.setattr(cgroups, "hierarchies", lambda: [cgroups.Hierarchy(Path("/proc/1/no-such"), 2),
                                                        cgroups.Hierarchy(tmp_path, 1)])
    assert cgroups.create("a/b") == cgroups.Cgroup(made, 1)
    monkeypatch.setattr(cgroups, "hierarchies", lambda: [cgroups.Hierarchy(Path("/proc/1/no-such"), 2)])
    assert cgroups.create("a/b") is None


def test_own_cgroup():
    assert cgroups.own_cgroup("9:name=systemd:/\n0::/user.slice/user-1000.slice/x.scope\n") == \
        "/user.slice/user-1000.slice/x.scope"
    assert cgroups.own_cgroup("4:memory:/a\n") == "/"
    assert cgroups.own_cgroup("0::/\n") == "/"


def test_writable_base():
    mount = Path("/sys/fs/cgroup")
    own = "/user.slice/user-1000.slice/user@1000.service/app.slice/vte-spawn-1.scope"
    delegated = mount / "user.slice/user-1000.slice/user@1000.service"

    def under(root: Path):
        return lambda p: root in (p, *p.parents)
    assert cgroups.writable_base(mount, own, under(mount)) == mount  # root
    assert cgroups.writable_base(mount, own, under(delegated)) == delegated  # systemd's delegation
    assert cgroups.writable_base(mount, own, lambda p: False) == mount  # nothing: mkdir will fail there
    assert cgroups.writable_base(mount, "/", lambda p: False) == mount
