"""kubemu/ownership.py: the record kubemu keeps of what it started, and waiting for processes
that are not our children (a zombie is gone for anyone but its parent)."""
from __future__ import annotations

import os
import subprocess
import time

import psutil
import pytest

from kubemu.child import proc_stat
from kubemu import cgroups, ownership
from tests.conftest import DEADLINE, remove_cluster_cgroups


def test_the_record_round_trips_and_garbage_is_no_record(tmp_path):
    node_dir = tmp_path / "nodes" / "node-1"
    node_dir.mkdir(parents=True)
    owned = ownership.Owned(123, 456, cgroups.Cgroup(tmp_path / "cg" / ownership.cgroup_name(tmp_path, "node-1"), 2))
    owned.save(node_dir)
    assert ownership.Owned.load(node_dir) == owned
    # a record naming a cgroup kubemu does not make for this node is no record: never killed by
    for foreign in (tmp_path / "cg", tmp_path / "cg" / ownership.cgroup_name(tmp_path, "node-10")):
        ownership.Owned(123, 456, cgroups.Cgroup(foreign, 2)).save(node_dir)
        assert ownership.Owned.load(node_dir) is None
    ownership.Owned(7, 8, None).save(tmp_path)
    assert ownership.Owned.load(tmp_path) == ownership.Owned(7, 8, None)
    for text in ("", "{", "[]", '{"init": {"pid": "x"}}', '{"init": 5, "cgroup": null}'):
        (tmp_path / ownership.RECORD).write_text(text)
        assert ownership.Owned.load(tmp_path) is None
    assert ownership.Owned.load(tmp_path / "nosuch") is None


def test_init_is_the_recorded_process_only():
    """Same PID, other start time: a later process that reused the PID is not the node's init."""
    proc = subprocess.Popen(["sleep", "1000"])
    try:
        start = proc_stat(proc.pid)[1]
        assert ownership.Owned(proc.pid, start, None).init().pid == proc.pid
        assert ownership.Owned(proc.pid, start + 1, None).init() is None
        assert [p.pid for p in ownership.Owned(proc.pid, start + 1, None).processes()] == []
        proc.kill()
        deadline = time.monotonic() + DEADLINE
        while proc_stat(proc.pid)[0] != "Z" and time.monotonic() < deadline:
            time.sleep(0.01)
        assert ownership.Owned(proc.pid, start, None).init() is None  # a zombie is no running init
    finally:
        proc.kill()
        proc.wait()
    assert ownership.Owned(proc.pid, start, None).init() is None


def test_wait_gone_takes_a_zombie_for_gone():
    """The bug of `kubemu node kill`: waiting with psutil on a process that is not our child
    until it disappears never ends while its parent has not reaped it."""
    zombie = subprocess.Popen(["true"])
    wait = psutil.Process(zombie.pid)
    deadline = time.monotonic() + DEADLINE
    while wait.status() != psutil.STATUS_ZOMBIE and time.monotonic() < deadline:
        time.sleep(0.01)
    try:
        assert ownership.gone(wait)
        assert ownership.wait_gone([wait], timeout=DEADLINE) == []
    finally:
        zombie.wait()
    assert ownership.gone(wait)
    running = subprocess.Popen(["sleep", "1000"])
    try:
        assert ownership.wait_gone([psutil.Process(running.pid)], timeout=0.1) == [psutil.Process(running.pid)]
    finally:
        running.kill()
        running.wait()


def test_the_fallback_finds_init_and_its_descendants_only(tmp_path):
    init = subprocess.Popen(["/bin/sh", "-c", "sleep 1000 & sleep 1000 & wait"], start_new_session=True)
    other = subprocess.Popen(["sleep", "1000"], start_new_session=True)
    try:
        owned = ownership.Owned(init.pid, proc_stat(init.pid)[1], None)
        deadline = time.monotonic() + DEADLINE
        while len(owned.processes()) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        found = {p.pid for p in owned.processes()}
        assert len(found) == 3 and init.pid in found and other.pid not in found
        assert sorted(owned.kill(DEADLINE)) == sorted(found)
        assert init.wait(DEADLINE) == -9 and owned.processes() == []
        assert other.poll() is None
    finally:
        for p in (init, other):
            p.kill()
            p.wait()


def test_cgroup_names_are_per_state_dir_and_node(tmp_path):
    a, b = ownership.cgroup_name(tmp_path / "a", "node-1"), ownership.cgroup_name(tmp_path / "b", "node-1")
    assert a != b and a.startswith("kubemu/") and a.endswith("/node-1")
    cluster = ownership.cluster_cgroup_name(tmp_path / "a")
    assert ownership.cgroup_name(tmp_path / "a", "node-10").startswith(cluster + "/")
    assert os.sep not in cluster.removeprefix("kubemu/")


@pytest.mark.skipif(os.geteuid() != 0 or not any("memory" in c for _, c in cgroups.everywhere("x")),
                    reason="needs root and a memory controller: the kubelet makes no pod cgroups otherwise")
def test_releasing_a_node_removes_its_pod_cgroups_in_every_hierarchy(tmp_path):
    """The kubelet makes the node's pod cgroups below the node's name in every controller
    hierarchy (v1 memory, cpu, cpuacct, pids on hybrid machines), not only in the one
    owner.json records: `down` (release) removes them all, killing what is left in them."""
    from kubelet.podcgroups import PodCgroups

    node_dir = tmp_path / "nodes" / "node-1"
    node_dir.mkdir(parents=True)
    name = ownership.cgroup_name(tmp_path, "node-1")
    node_cg = cgroups.create(name)
    ownership.Owned(1, 1, node_cg).save(node_dir)
    pods = PodCgroups(name)
    the_pod = {"metadata": {"uid": "u-1"}, "spec": {"containers": [
        {"name": "c", "resources": {"limits": {"cpu": "100m", "memory": "64Mi"}}}]}}
    procs = pods.container(the_pod, "c").procs
    fds = [os.open(p, os.O_WRONLY | os.O_CLOEXEC) for p in procs]
    try:
        left = subprocess.Popen(["sleep", "1000"], preexec_fn=lambda: [cgroups.join(fd) for fd in fds])
    finally:
        for fd in fds:
            os.close(fd)
    try:
        assert len(procs) > 1
        ownership.Owned.load(node_dir).release()
        assert left.wait(DEADLINE) == -9
        cluster = ownership.cluster_cgroup_name(tmp_path)
        leftovers = [cg.path for cg in cgroups.candidates(cluster) + [c for c, _ in cgroups.everywhere(cluster)]
                     if cg.path.exists()]
        assert leftovers == []
    finally:
        left.kill()
        left.wait()
        remove_cluster_cgroups(tmp_path)


class _Emptying:
    """A node cgroup whose processes are gone after `calls` looks (they follow init by themselves)."""

    def __init__(self, calls: int):
        self.calls = calls

    def populated(self) -> bool:
        self.calls -= 1
        return self.calls > 0


def test_settle_waits_for_the_node_to_empty_by_itself_and_no_longer():
    emptying = _Emptying(3)
    ownership.Owned(1, 1, emptying).settle(DEADLINE)
    assert emptying.calls == 0  # returned as soon as it was empty
    stuck = _Emptying(10**9)
    started = time.monotonic()
    ownership.Owned(1, 1, stuck).settle(0.1)
    assert time.monotonic() - started < DEADLINE  # gave up at its timeout
    ownership.Owned(1, 1, None).settle(DEADLINE)  # without a cgroup: nothing to wait on


def test_a_record_copied_from_another_state_directory_is_no_record(tmp_path):
    theirs, ours = tmp_path / "theirs" / "nodes" / "node-0", tmp_path / "ours" / "nodes" / "node-0"
    theirs.mkdir(parents=True)
    ours.mkdir(parents=True)
    ownership.Owned(123, 456, None).save(theirs)
    assert ownership.Owned.load(theirs) == ownership.Owned(123, 456, None)
    (ours / ownership.RECORD).write_bytes((theirs / ownership.RECORD).read_bytes())  # `cp -a`
    assert ownership.Owned.load(ours) is None
    # a record from before kubemu wrote where it was made is still loaded
    (ours / ownership.RECORD).write_text('{"init": {"pid": 7, "start": 8}, "cgroup": null}')
    assert ownership.Owned.load(ours) == ownership.Owned(7, 8, None)
