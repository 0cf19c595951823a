"""The kubelet's stats: CPU and memory of the node, its pods and their containers, from the cgroups.

The Summary API's role (the kubelet's /stats/summary and /metrics/resource, which cadvisor
fills): every HOUSEKEEPING seconds the kubelet reads each cgroup's cumulative CPU time and its
memory working set (kubelet/podcgroups.py `Usage`); a figure's CPU rate (usageNanoCores) is the
growth of the cumulative usage between its last two readings over the time between them, the
window metrics-server reports. A cgroup read only once has no rate yet and is left out, as
cadvisor leaves out a container it has one sample of. The node's figures are its `kubepods`
cgroup: its pods, what the node's allocatable bounds (init and the kubelet are not in it).

What `summary()` answers (the kubelet's `stats` wire method):

    {"node": {"nodeName": str, **Stat} | absent,
     "pods": [{"podRef": {"namespace", "name", "uid"}, **Stat,
               "containers": [{"name": str, **Stat}, ...]}, ...]}
    Stat = {"time": wall-clock seconds of the last reading, "window": seconds between the two,
            "cpu": {"usageNanoCores": int, "usageCoreNanoSeconds": int},
            "memory": {"workingSetBytes": int}}

Pods are the pod directories of the runtime (`<ns>_<name>_<uid>`), with their running
containers. `Rates` is pure (readings and times in); `Stats` reads the cgroups and owns the clock.
"""
from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass
from typing import Callable, Hashable

from kubemu import wire

from .podcgroups import PodCgroups, Usage, node_usage
from .runtime import Runtime

HOUSEKEEPING = 10.0  # seconds between readings: cadvisor's housekeeping interval in the kubelet
NODE = ("node",)  # the Rates key of the node's kubepods cgroup; a pod's is ("pod", uid)


@dataclass(frozen=True)
class PodRef:
    namespace: str
    name: str
    uid: str


def parse_pod_dir(dirname: str) -> PodRef | None:
    """`<ns>_<name>_<uid>` (namespaces and names cannot hold "_"); None for anything else."""
    parts = dirname.split("_", 2)
    return PodRef(*parts) if len(parts) == 3 and all(parts) else None


@dataclass(frozen=True)
class Reading:
    time: float
    cpu_seconds: float
    memory_bytes: int


class Rates:
    """The last two readings of each cgroup. A round's readings replace the previous round's: a
    cgroup not read (gone, or unreadable) is forgotten, and one whose CPU time went backwards (a
    new cgroup under the same name) starts again from this reading."""

    def __init__(self) -> None:
        self._last: dict[Hashable, tuple[Reading | None, Reading]] = {}

    def record(self, now: float, usages: dict[Hashable, Usage | None]) -> None:
        last = {}
        for key, usage in usages.items():
            if usage is None or usage.cpu_seconds is None or usage.memory_bytes is None:
                continue
            reading = Reading(now, usage.cpu_seconds, usage.memory_bytes)
            before = self._last.get(key)
            previous = before[1] if before is not None else None
            if previous is not None and (reading.cpu_seconds < previous.cpu_seconds or now <= previous.time):
                previous = None
            last[key] = (previous, reading)
        self._last = last

    def stat(self, key: Hashable) -> dict | None:
        """The Stat of `key` (module docstring), None before its second reading."""
        previous, reading = self._last.get(key, (None, None))
        if previous is None:
            return None
        window = reading.time - previous.time
        return {"time": reading.time, "window": window,
                "cpu": {"usageNanoCores": max(0, round((reading.cpu_seconds - previous.cpu_seconds) * 1e9 / window)),
                        "usageCoreNanoSeconds": round(reading.cpu_seconds * 1e9)},
                "memory": {"workingSetBytes": reading.memory_bytes}}


def summarize(node: str, rates: Rates, pods: dict[PodRef, list[str]]) -> dict:
    """The summary of `pods` (ref -> its running containers); a pod is listed once it and each
    of its running containers have a rate."""
    out: dict = {"pods": []}
    node_stat = rates.stat(NODE)
    if node_stat is not None:
        out["node"] = {"nodeName": node, **node_stat}
    for ref, containers in pods.items():
        pod_stat = rates.stat(("pod", ref.uid))
        stats = [(name, rates.stat(("pod", ref.uid, name))) for name in containers]
        if pod_stat is None or any(s is None for _, s in stats):
            continue
        out["pods"].append({"podRef": {"namespace": ref.namespace, "name": ref.name, "uid": ref.uid},
                            **pod_stat, "containers": [{"name": name, **s} for name, s in stats]})
    return out


class Stats:
    """Reads the node's cgroups every `period` seconds (`run`); `summary` answers from the last
    two readings. Without pod cgroups (or a memory controller) there is nothing to read: `summary`
    says why."""

    def __init__(self, node: str, runtime: Runtime, cgroups: PodCgroups | None, *,
                 period: float = HOUSEKEEPING, clock: Callable[[], float] = time.time):
        self.node = node
        self.runtime = runtime
        self.cgroups = cgroups if cgroups is not None and cgroups.available else None
        self.why_not = None if self.cgroups is not None else (
            cgroups.why_not if cgroups is not None else "no pod cgroups on this node")
        self.period = period
        self.clock = clock
        self.rates = Rates()
        self.pods: dict[PodRef, list[str]] = {}

    @property
    def collecting(self) -> bool:
        return self.cgroups is not None

    async def run(self) -> None:
        while True:
            # a round walks every pod directory and cgroup file: off the loop
            self._record(*await asyncio.to_thread(self._collect))
            await asyncio.sleep(self.period)

    def _running_pods(self) -> dict[PodRef, list[str]]:
        pods = {}
        for pod_dir in self.runtime.list_pod_dirs():
            ref = parse_pod_dir(os.path.basename(pod_dir))
            if ref is not None:
                pods[ref] = sorted(name for name, state in self.runtime.list_containers(pod_dir).items()
                                   if self.runtime.is_running(state))
        return pods

    def read(self) -> None:
        """One round of readings: the node, every pod, every running container."""
        self._record(*self._collect())

    def _collect(self) -> tuple[float, dict[PodRef, list[str]], dict[Hashable, Usage | None]]:
        cgroups = self.cgroups
        pods = self._running_pods()
        usages: dict[Hashable, Usage | None] = {NODE: node_usage(cgroups.cgroup_root)}
        for ref, containers in pods.items():
            usages[("pod", ref.uid)] = cgroups.usage(ref.uid)
            for name in containers:
                usages[("pod", ref.uid, name)] = cgroups.usage(ref.uid, name)
        return self.clock(), pods, usages

    def _record(self, now: float, pods: dict[PodRef, list[str]], usages: dict[Hashable, Usage | None]) -> None:
        self.rates.record(now, usages)
        self.pods = pods

    def summary(self) -> dict:
        """The `stats` wire method's answer (module docstring); Unavailable without pod cgroups."""
        if self.cgroups is None:
            raise wire.Unavailable(f"no stats on node {self.node}: {self.why_not}")
        return summarize(self.node, self.rates, self.pods)
