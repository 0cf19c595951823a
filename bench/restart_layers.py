"""The restart suite's rows that need more than one supervisor and one child:

- init -> kubelet: a node whose kubelet.service is the one `kubemu up` writes (Type=notify,
  WatchdogSec=30) but with RestartSec=0; kill -9 the kubelet, stop the clock when init's new
  child exists (its /proc children list, polled every 0.5 ms: the kubelet has no hook of its
  own that reports earlier), and again when init reports the unit active (the kubelet sent
  READY=1; init's status polled every 5 ms). The next kill waits for READY=1.
- kubelet -> API pod container: a `kubemu up --fast` cluster (kubelet CrashLoopBackOff off),
  a pod created through the API and bound to node-0 with a `bind` call (the scheduler's
  job), its container the restart suite's reporting child.
"""
from __future__ import annotations

import asyncio
import os
import time
from contextlib import contextmanager
from pathlib import Path

from kubemu import cluster, wire
from kubemu.statedir import StateDir

from .benchcluster import NO_BACKOFF, running_cluster

PID_POLL = 0.0005
READY_POLL = 0.005


def children(pid: int) -> set[int]:
    found: set[int] = set()
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                found.update(int(p) for p in f.read().split())
        except OSError:
            continue  # the thread just ended
    return found


def descendants(pid: int) -> set[int]:
    found, todo = set(), [pid]
    while todo:
        fresh = children(todo.pop()) - found
        found |= fresh
        todo.extend(fresh)
    return found


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


class KubeletWatch:
    """Stands in for the reporting child: `next_pid` answers with init's new kubelet PID
    (`seen_at` is when it was found), then waits for READY=1 (`also["READY=1"]`).

    The new kubelet is the one child of init that was neither init's child nor the old
    kubelet's descendant just before the kill: the kubelet's own children (at start-up it runs
    `ldconfig -p`, through ctypes.util.find_library) are re-parented to init, a subreaper,
    when it dies, and would otherwise pass for the new kubelet."""

    clock = "kill -9 the kubelet -> init's new child exists (/proc, polled every 0.5 ms); (READY=1): -> init " \
            "has the kubelet's READY=1 (its status polled every 5 ms)"

    def __init__(self, state: StateDir, node: str, init_pid: int):
        self.state, self.node, self.init_pid = state, node, init_pid
        self.pid: int | None = None
        self.known: set[int] = set()
        self.seen_at = 0.0
        self.also: dict[str, float] = {}

    def before_kill(self, pid: int) -> None:
        self.known = children(self.init_pid) | descendants(pid) | {pid}

    def next_pid(self, timeout: float) -> int:
        deadline = time.monotonic() + timeout
        while True:
            fresh = [p for p in children(self.init_pid) - self.known if alive(p)]
            if fresh:
                self.seen_at = time.perf_counter()
                self.pid = fresh[0]
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"init started no new kubelet within {timeout:g}s")
            time.sleep(PID_POLL)
        self.pid = self._wait_ready(deadline)
        self.also = {"READY=1": time.perf_counter()}
        return self.pid

    def _wait_ready(self, deadline: float) -> int:
        """The kubelet's PID once init has its READY=1: the one found, unless a child the
        kubelet started between the snapshot and the kill was found instead (then its clock
        stopped a little early, and init's word on the main PID is taken)."""
        with wire.SyncClient(self.state.init_endpoint(self.node), timeout=1.0) as client:
            while time.monotonic() < deadline:
                try:
                    units = client.call("status", idempotent=True)["units"]
                except wire.WireError:
                    units = []
                unit = next((u for u in units if u["name"] == "kubelet.service"), None)
                if unit and unit["active_state"] == "active" and unit["main_pid"] not in self.known:
                    return unit["main_pid"]
                time.sleep(READY_POLL)
        raise TimeoutError(f"no new kubelet sent READY=1 in time (found PID {self.pid})")


@contextmanager
def init_kubelet(_child: list[str], workdir: Path):
    """A node with only its kubelet (no --api, no static pods): init's one child is the kubelet."""
    state = StateDir(workdir / "cluster")
    node = cluster.CONTROL_PLANE_NODE
    cluster.write_node(state, node, restart_sec=0)
    proc = cluster.start_init(state, node)
    try:
        cluster.wait_started(state, [node], 60)
        yield KubeletWatch(state, node, proc.pid)
    finally:
        cluster.down(state)
        proc.wait()


async def _create_bound_pod(state: StateDir, child: list[str]) -> None:
    from kubemu._wire_auth import state_credentials
    from kubemu.apiclient import ApiClient

    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "restart-child"},
           "spec": {"containers": [{"name": "child", "command": child}]}}
    async with ApiClient(state.api_endpoint(), timeout=30, credentials=state_credentials(state.root)) as api:
        await api.create("pods", pod, namespace="default")
        # node-0 has the control-plane NoSchedule taint, so the scheduler leaves this pod
        # alone; the bind is the scheduler's call, made here.
        await api.bind("restart-child", cluster.CONTROL_PLANE_NODE, namespace="default")


@contextmanager
def kubelet_api_pod(child: list[str], workdir: Path):
    with running_cluster(workdir / "cluster", fast=True, kubelet_extra=NO_BACKOFF) as state:
        asyncio.run(_create_bound_pod(state, child))
        yield None
