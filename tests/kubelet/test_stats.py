"""kubelet/stats.py: the rates from two readings (pure, a fake clock), the summary's shape, and a
busy container's CPU and memory read from its real cgroup."""
from __future__ import annotations

import asyncio
import itertools
import os
import subprocess
import sys
import threading
import uuid

import pytest

from kubelet import stats
from kubelet.podcgroups import PodCgroups, Usage
from kubelet.stats import NODE, PodRef, Rates, Stats
from kubemu import cgroups, ownership, wire
from tests.conftest import DEADLINE, remove_cluster_cgroups, wait_for

MI = 1 << 20


def test_parse_pod_dir():
    assert stats.parse_pod_dir("kube-system_etcd-node-0_1b2c-3d") == PodRef("kube-system", "etcd-node-0", "1b2c-3d")
    for junk in ("web", "a_b", "_b_c", "a__c", "a_b_"):
        assert stats.parse_pod_dir(junk) is None


def test_a_rate_needs_two_readings_and_covers_the_window_between_them():
    rates = Rates()
    rates.record(100.0, {NODE: Usage(1.0, 5 * MI)})
    assert rates.stat(NODE) is None  # one reading: no rate yet
    rates.record(110.0, {NODE: Usage(3.5, 7 * MI)})
    assert rates.stat(NODE) == {"time": 110.0, "window": 10.0,
                                "cpu": {"usageNanoCores": 250_000_000, "usageCoreNanoSeconds": 3_500_000_000},
                                "memory": {"workingSetBytes": 7 * MI}}
    rates.record(120.0, {NODE: Usage(3.5, 6 * MI)})  # idle: 0, not negative
    assert rates.stat(NODE)["cpu"]["usageNanoCores"] == 0


def test_a_cgroup_made_again_or_gone_starts_over():
    rates = Rates()
    key = ("pod", "u")
    rates.record(1.0, {key: Usage(5.0, MI)})
    rates.record(2.0, {key: Usage(6.0, MI)})
    assert rates.stat(key) is not None
    rates.record(3.0, {key: Usage(0.5, MI)})  # CPU time went back: a new cgroup under that name
    assert rates.stat(key) is None
    rates.record(4.0, {key: Usage(1.5, MI)})
    assert rates.stat(key)["cpu"]["usageNanoCores"] == 1_000_000_000
    rates.record(5.0, {})  # not read this round: forgotten
    rates.record(6.0, {key: Usage(2.5, MI)})
    assert rates.stat(key) is None
    # a hierarchy without cpuacct or memory: nothing to rate
    rates.record(7.0, {key: Usage(None, MI)})
    rates.record(8.0, {key: Usage(3.0, None)})
    assert rates.stat(key) is None


def test_summary_lists_a_pod_once_it_and_its_containers_have_rates():
    rates = Rates()
    web, job = PodRef("default", "web", "u1"), PodRef("default", "job", "u2")
    first = {NODE: Usage(10.0, 100 * MI), ("pod", "u1"): Usage(1.0, 10 * MI), ("pod", "u1", "app"): Usage(1.0, 8 * MI),
             ("pod", "u2"): Usage(1.0, MI)}
    rates.record(0.0, first)
    assert stats.summarize("node-1", rates, {web: ["app"]}) == {"pods": []}
    second = {**first, NODE: Usage(12.0, 100 * MI), ("pod", "u1"): Usage(2.0, 10 * MI),
              ("pod", "u1", "app"): Usage(1.5, 8 * MI), ("pod", "u2"): Usage(1.1, MI), ("pod", "u2", "c"): Usage(1, MI)}
    rates.record(2.0, second)
    summary = stats.summarize("node-1", rates, {web: ["app"], job: ["c"]})
    assert summary["node"]["nodeName"] == "node-1" and summary["node"]["cpu"]["usageNanoCores"] == 1_000_000_000
    [pod] = summary["pods"]  # job's container "c" was read once only
    assert pod["podRef"] == {"namespace": "default", "name": "web", "uid": "u1"}
    assert pod["cpu"]["usageNanoCores"] == 500_000_000
    assert [(c["name"], c["cpu"]["usageNanoCores"], c["memory"]["workingSetBytes"]) for c in pod["containers"]] == \
        [("app", 250_000_000, 8 * MI)]
    assert pod["window"] == 2.0 and pod["time"] == 2.0


def test_without_pod_cgroups_the_summary_says_why(tmp_path):
    node = Stats("node-1", FakeRuntime({}), None)
    assert not node.collecting
    with pytest.raises(wire.Unavailable, match="no stats on node node-1: no pod cgroups on this node"):
        node.summary()
    unprivileged = PodCgroups(None)
    with pytest.raises(wire.Unavailable, match="--cgroup-root not given"):
        Stats("node-1", FakeRuntime({}), unprivileged).summary()


class FakeRuntime:
    """The runtime's pod directories and containers: pod dir name -> {container: running}."""

    def __init__(self, pods: dict[str, dict[str, bool]]):
        self.pods = pods

    def list_pod_dirs(self) -> list[str]:
        return [f"/pods/{name}" for name in self.pods]

    def list_containers(self, pod_dir: str) -> dict[str, bool]:
        return self.pods[os.path.basename(pod_dir)]

    def is_running(self, state: bool) -> bool:
        return state


needs_cgroups = pytest.mark.skipif(
    os.geteuid() != 0 or not any("memory" in c for _, c in cgroups.everywhere("x")),
    reason="needs root and a memory controller: no pod cgroups otherwise")


@needs_cgroups
def test_a_busy_container_shows_its_cpu_and_memory(tmp_path):
    node_root = ownership.cgroup_name(tmp_path, "node-1")
    pods = PodCgroups(node_root)
    uid = str(uuid.uuid4())
    the_pod = {"metadata": {"uid": uid}, "spec": {"containers": [{"name": "busy"}, {"name": "done"}]}}
    fds = [os.open(p, os.O_WRONLY | os.O_CLOEXEC) for p in pods.container(the_pod, "busy").procs]
    pods.container(the_pod, "done")  # its leaf is there, its process is not: not listed
    try:
        busy = subprocess.Popen([sys.executable, "-c", "b = bytearray(72 << 20)\n"
                                 "for i in range(0, len(b), 4096): b[i] = 1\nwhile True: pass"],
                                preexec_fn=lambda: [cgroups.join(fd) for fd in fds])
    finally:
        for fd in fds:
            os.close(fd)
    ticks = itertools.count()
    node = Stats("node-1", FakeRuntime({f"default_web_{uid}": {"busy": True, "done": False}}), pods,
                 clock=lambda: float(next(ticks)))
    try:
        def busy_enough():
            node.read()
            summary = node.summary()
            pod = summary["pods"][0] if summary["pods"] else None
            # cgroup v1's usage is charged in per-CPU batches, so reads of the container, the pod
            # and the node a moment apart can differ by a few hundred KiB: all three are waited on
            # together, each needing 64 MiB of the 72 the container touched (the pod's cgroup holds its
            # containers', the node's kubepods its pods').
            return pod and pod["containers"][0]["cpu"]["usageNanoCores"] > 0 and \
                pod["containers"][0]["memory"]["workingSetBytes"] >= 64 * MI and \
                pod["memory"]["workingSetBytes"] >= 64 * MI and \
                summary["node"]["memory"]["workingSetBytes"] >= 64 * MI and summary
        summary = wait_for(busy_enough, message="the busy container's CPU and 64 MiB in the container, "
                                                "the pod and the node")
        [pod] = summary["pods"]
        assert pod["podRef"] == {"namespace": "default", "name": "web", "uid": uid}
        assert [c["name"] for c in pod["containers"]] == ["busy"]
    finally:
        pods.remove_pod(uid)
        busy.wait()
        ownership.Owned(0, 0, None, node_root).release()
        remove_cluster_cgroups(tmp_path)


class SlowRuntime(FakeRuntime):
    """Its pod directories take until `release` is set (by the loop) to list."""

    def __init__(self, pods: dict[str, dict[str, bool]]):
        super().__init__(pods)
        self.release = threading.Event()
        self.waited_out = False

    def list_pod_dirs(self) -> list[str]:
        self.waited_out = not self.release.wait(10.0)
        return super().list_pod_dirs()


class NoUsage:
    """Pod cgroups with nothing to read."""
    available, why_not, cgroup_root = True, None, "kubemu-test-no-such-cgroup"

    def usage(self, uid: str, container: str | None = None) -> None:
        return None


def test_a_round_of_readings_does_not_hold_up_the_loop():
    runtime = SlowRuntime({"default_web_u-1": {"app": True}})
    node = Stats("node-1", runtime, NoUsage(), period=3600)

    async def main():
        task = asyncio.ensure_future(node.run())
        try:
            await asyncio.sleep(0)  # the round has begun; the loop still runs to release it
            runtime.release.set()
            while not node.pods:
                await asyncio.sleep(0.01)
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    asyncio.run(asyncio.wait_for(main(), DEADLINE))
    assert not runtime.waited_out and node.pods == {PodRef("default", "web", "u-1"): ["app"]}
