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


HYBRID_CONTROLLERS = HYBRID + """\
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset
"""


def test_parse_v1_controllers():
    """This machine: memory, cpu, cpuacct, pids each mounted apart; cpuset is not ours."""
    assert cgroups.parse_v1_controllers(HYBRID_CONTROLLERS) == {
        "cpu": cgroups.Hierarchy(Path("/sys/fs/cgroup/cpu"), 1),
        "cpuacct": cgroups.Hierarchy(Path("/sys/fs/cgroup/cpuacct"), 1),
        "memory": cgroups.Hierarchy(Path("/sys/fs/cgroup/memory"), 1),
        "pids": cgroups.Hierarchy(Path("/sys/fs/cgroup/pids"), 1)}
    joint = cgroups.Hierarchy(Path("/sys/fs/cgroup/cpu,cpuacct"), 1)
    assert cgroups.parse_v1_controllers(V1_ONLY) == {
        "cpu": joint, "cpuacct": joint, "pids": cgroups.Hierarchy(Path("/sys/fs/cgroup/pids"), 1)}
    assert cgroups.parse_v1_controllers(PURE_V2) == {}


def test_plan_controlled():
    unified, v2 = Path("/sys/fs/cgroup/unified"), Path("/sys/fs/cgroup")

    def plan(text, v2_controllers):
        return [(c.hierarchy.mount.name or "/", c.hierarchy.version, sorted(c.controllers)) for c in
                cgroups.plan_controlled(cgroups.parse_mountinfo(text), cgroups.parse_v1_controllers(text),
                                        v2_controllers)]
    # hybrid (this machine): v2 has only hugetlb; memory, cpu, cpuacct, pids are v1 hierarchies
    assert plan(HYBRID_CONTROLLERS, {unified: "hugetlb\n"}) == [
        ("unified", 2, []), ("memory", 1, ["memory"]), ("cpu", 1, ["cpu"]), ("cpuacct", 1, ["cpuacct"]),
        ("pids", 1, ["pids"])]
    # pure v2: one hierarchy carries everything there is of ours
    assert plan(PURE_V2, {v2: "cpuset cpu io memory hugetlb pids rdma misc\n"}) == [
        ("cgroup", 2, ["cpu", "memory", "pids"])]
    # v1 only: the grouping hierarchy (pids) first, then cpu and cpuacct share one mount
    assert plan(V1_ONLY, {}) == [("pids", 1, ["pids"]), ("cpu,cpuacct", 1, ["cpu", "cpuacct"])]
    assert plan("", {}) == []


def test_stat_fields_and_oom_kills():
    v1 = "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n"
    v2 = "low 0\nhigh 0\nmax 12\noom 2\noom_kill 2\noom_group_kill 0\n"
    assert cgroups.oom_kills(v1) == 3 and cgroups.oom_kills(v2) == 2
    assert cgroups.oom_kills("oom_kill_disable 0\nunder_oom 0\n") == 0  # kernel < 4.13
    assert cgroups.oom_kills("") == 0 and cgroups.oom_kills("oom_kill x\n") == 0
    assert cgroups.stat_field("usage_usec 1500\nuser_usec 1000\n", "usage_usec") == 1500
    assert cgroups.stat_field("usage_usec 1500\n", "user_usec") is None


def test_usage_readers(tmp_path):
    v1, v2 = cgroups.Cgroup(tmp_path / "v1", 1), cgroups.Cgroup(tmp_path / "v2", 2)
    assert v1.cpu_seconds() is None and v1.memory_working_set() is None  # no such files
    for cg, files in ((v1, {"cpuacct.usage": "2500000000\n", "memory.usage_in_bytes": "10485760\n",
                            "memory.stat": "cache 4096\ninactive_file 0\ntotal_inactive_file 2097152\n"}),
                      (v2, {"cpu.stat": "usage_usec 2500000\nuser_usec 2000000\n", "memory.current": "10485760\n",
                            "memory.stat": "anon 8388608\ninactive_file 2097152\n"})):
        cg.path.mkdir()
        for name, text in files.items():
            (cg.path / name).write_text(text)
        assert cg.cpu_seconds() == 2.5
        assert cg.memory_working_set() == 8 << 20  # usage minus inactive file pages, as the kubelet
    (v1.path / "memory.stat").write_text("total_inactive_file 99999999\n")
    assert v1.memory_working_set() == 0


def test_delegate_enables_what_each_level_offers(tmp_path):
    """cgroup v2 gives a cgroup a controller only through every ancestor's subtree_control:
    each level below `below` gets the wanted controllers its cgroup.controllers offers; `below`
    itself (the mount or a delegated subtree) is not kubemu's and is left as it is."""
    levels = [tmp_path, tmp_path / "kubemu", tmp_path / "kubemu" / "node", tmp_path / "kubemu" / "node" / "kubepods"]
    for level in levels:
        level.mkdir(exist_ok=True)
        (level / "cgroup.controllers").write_text("cpu memory hugetlb\n")
        (level / "cgroup.subtree_control").write_text("")
    (levels[1] / "cgroup.subtree_control").write_text("memory\n")  # already enabled there
    cgroups.Cgroup(levels[-1], 2).delegate(["memory", "cpu", "pids"], tmp_path)
    written = [(level / "cgroup.subtree_control").read_text() for level in levels]
    assert written == ["", "+cpu", "+memory +cpu", "+memory +cpu"]
