"""The runner's choice of a shim to kill: a workload container's parent, only when it is a shim
of the node's (real processes: a parent named like kubelet/shim.py and its child)."""
from __future__ import annotations

import subprocess
import sys

import psutil

from kubemu.chaos.run import Runner
from tests.conftest import wait_for

PARENT = "import subprocess, sys; c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); c.wait()"


def runner_owning(pids: set[int]) -> Runner:
    runner = Runner.__new__(Runner)  # only the process lookups, no cluster
    runner.node_pids = lambda node: {pid: psutil.Process(pid) for pid in pids}
    return runner


def test_a_shim_is_the_containers_parent_when_the_node_owns_it_and_it_is_a_shim():
    for argv_tail, is_shim in ((["kubelet.shim"], True), (["something-else"], False)):
        parent = subprocess.Popen([sys.executable, "-c", PARENT, *argv_tail])
        try:
            [child] = wait_for(lambda: psutil.Process(parent.pid).children(), message="the container")
            owned = runner_owning({parent.pid, child.pid})
            expected = ("node-1", "web's shim", parent.pid) if is_shim else None
            assert owned.shim_of(("node-1", "web", child.pid)) == expected
            assert runner_owning({child.pid}).shim_of(("node-1", "web", child.pid)) is None  # not the node's
            assert owned.shim_of(("node-1", "web", 2 ** 22 + 1)) is None  # gone
        finally:
            for proc in psutil.Process(parent.pid).children() + [psutil.Process(parent.pid)]:
                proc.kill()
            parent.wait()
