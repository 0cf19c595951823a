"""The reconcile benchmark's workload: D Deployments (or StatefulSets, DaemonSets, Jobs) whose
pods hollow nodes report Running, timed pod by pod through a watch (a client-go style informer
on the workload's label).

Every time is the benchmark's wall clock (time.time()) at the moment the informer handed it
the event, so it can be set beside creationTimestamp and the audit log's times.
"""
from __future__ import annotations

import asyncio
import datetime
import time
from collections.abc import Callable

from kubemu.apiclient import ApiClient
from kubemu.cache import DeletedFinalStateUnknown
from kubemu.informer import Informer

NAMESPACE = "default"
LABEL = "kubemu-bench"  # value: the workload's name, so each workload has its own informer
SYNC_TIMEOUT = 60.0


def replicas_per_deployment(pods: int, deployments: int) -> list[int]:
    """`pods` spread over `deployments` as evenly as whole numbers allow."""
    base, extra = divmod(pods, deployments)
    return [base + (i < extra) for i in range(deployments)]


def _template(name: str, workload: str, **spec) -> dict:
    # hollow nodes run nothing: the command is never executed
    return {"metadata": {"labels": {"app": name, LABEL: workload}},
            "spec": {"containers": [{"name": "pause", "image": "pause", "command": ["pause"]}], **spec}}


def deployment(name: str, workload: str, replicas: int) -> dict:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "labels": {LABEL: workload}},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": _template(name, workload)}}


def statefulset(name: str, workload: str, replicas: int) -> dict:
    """Parallel pod management: the controller's throughput, not OrderedReady's one at a time."""
    return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": name, "labels": {LABEL: workload}},
            "spec": {"replicas": replicas, "serviceName": name, "podManagementPolicy": "Parallel",
                     "selector": {"matchLabels": {"app": name}}, "template": _template(name, workload)}}


def daemonset(name: str, workload: str, replicas: int) -> dict:
    """A pod on every hollow node (`replicas` is how many there are: node-0 is tainted)."""
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": name, "labels": {LABEL: workload}},
            "spec": {"selector": {"matchLabels": {"app": name}}, "template": _template(name, workload)}}


def job(name: str, workload: str, replicas: int) -> dict:
    """`replicas` pods at once; on hollow nodes they run until deleted, so the Job never ends."""
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "labels": {LABEL: workload}},
            "spec": {"parallelism": replicas, "completions": replicas,
                     "template": _template(name, workload, restartPolicy="Never")}}


# kind -> (resource, object builder): the controllers a workload's pods go through
KINDS = {"deployment": ("deployments", deployment), "statefulset": ("statefulsets", statefulset),
         "daemonset": ("daemonsets", daemonset), "job": ("jobs", job)}


def replicas_for(kind: str, pods: int, owners: int, hollow_nodes: int) -> list[int]:
    """The pods of each owner object: a DaemonSet has one per hollow node, so `pods` make
    pods // hollow_nodes DaemonSets (at least one); the others spread `pods` over `owners`."""
    if kind == "daemonset":
        return [hollow_nodes] * max(1, pods // hollow_nodes)
    return replicas_per_deployment(pods, owners)


def _timestamp(text: str) -> float:
    return datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(
        tzinfo=datetime.timezone.utc).timestamp()


class PodTracker:
    """What the watch showed of one workload's pods, and when (keyed by uid)."""

    def __init__(self):
        self.first_seen: dict[str, float] = {}   # the first event of the pod (its ADDED)
        self.created: dict[str, float] = {}      # its creationTimestamp (1 s resolution)
        self.bound_at: dict[str, float] = {}     # the first event that showed it on a node
        self.running_at: dict[str, float] = {}   # the first event that showed it Running
        self.deleted_at: dict[str, float] = {}   # its DELETED event
        self.live: set[str] = set()              # present and not being deleted
        self.running: set[str] = set()           # live and Running
        self.changed = asyncio.Event()
        self.on_running: Callable[[], None] | None = None
        self.on_deleted: Callable[[], None] | None = None

    def observe(self, pod: dict) -> None:
        now = time.time()
        meta = pod["metadata"]
        uid = meta["uid"]
        if uid in self.deleted_at:
            return  # a late copy of a pod already gone
        if uid not in self.first_seen:
            self.first_seen[uid] = now
            self.created[uid] = _timestamp(meta["creationTimestamp"])
        if uid not in self.bound_at and (pod.get("spec") or {}).get("nodeName"):
            self.bound_at[uid] = now
        if meta.get("deletionTimestamp"):
            self.live.discard(uid)
            self.running.discard(uid)
        else:
            self.live.add(uid)
            if (pod.get("status") or {}).get("phase") == "Running":
                self.running.add(uid)
                if uid not in self.running_at:
                    self.running_at[uid] = now
                    if self.on_running:
                        self.on_running()
            else:
                self.running.discard(uid)
        self.changed.set()

    def delete(self, pod) -> None:
        if isinstance(pod, DeletedFinalStateUnknown):  # a relist found it gone
            pod = pod.obj
        uid = pod["metadata"]["uid"]
        if uid not in self.deleted_at:
            self.first_seen.setdefault(uid, time.time())
            self.deleted_at[uid] = time.time()
            if self.on_deleted:
                self.on_deleted()
        self.live.discard(uid)
        self.running.discard(uid)
        self.changed.set()

    def counts(self) -> str:
        return (f"{len(self.first_seen)} seen, {len(self.live)} live, {len(self.running)} running, "
                f"{len(self.deleted_at)} deleted")

    async def until(self, done: Callable[[PodTracker], bool], timeout: float, what: str) -> float:
        """Wait for `done(self)`; the wall-clock time of the event that made it true."""
        deadline = time.monotonic() + timeout
        while not done(self):
            self.changed.clear()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"{what}: not reached within {timeout:g}s ({self.counts()})")
            try:
                await asyncio.wait_for(self.changed.wait(), remaining)
            except asyncio.TimeoutError:
                pass
        return time.time()


class Workload:
    """One set of Deployments (or of another `kind`: `<name>-<i>`) and the informer that times
    its pods."""

    def __init__(self, api: ApiClient, name: str, replicas: list[int], kind: str = "deployment"):
        self.api = api
        self.name = name
        self.kind = kind
        self.resource, self.builder = KINDS[kind]
        self.replicas = replicas
        self.pods = sum(replicas)
        self.deployments = [f"{name}-{i}" for i in range(len(replicas))]
        self.tracker = PodTracker()
        self.informer = Informer(api, "pods", namespace=NAMESPACE, label_selector=f"{LABEL}={name}")
        self.informer.add_event_handler(self.tracker.observe, lambda _old, new: self.tracker.observe(new),
                                        self.tracker.delete)
        self._stop = asyncio.Event()
        self._task: asyncio.Task | None = None

    async def __aenter__(self) -> Workload:
        self._task = asyncio.create_task(self.informer.run(self._stop), name=f"informer {self.name}")
        if not await self.informer.wait_for_sync(SYNC_TIMEOUT):
            raise TimeoutError(f"the pod watch did not start within {SYNC_TIMEOUT:g}s")
        return self

    async def __aexit__(self, *exc) -> None:
        self._stop.set()
        await self._task

    async def create(self) -> None:
        await asyncio.gather(*(self.api.create(self.resource, self.builder(name, self.name, n), namespace=NAMESPACE)
                               for name, n in zip(self.deployments, self.replicas)))

    async def delete(self) -> None:
        """Delete the owners (scaled to 0 first where they scale: their controller deletes the
        pods at once); the garbage collector deletes the other pods."""
        if self.kind in ("deployment", "statefulset"):
            await self.scale_to_zero()
        await asyncio.gather(*(self.api.delete(self.resource, name, namespace=NAMESPACE,
                                               propagation_policy="Background")
                               for name in self.deployments))

    async def scale_to_zero(self) -> None:
        await asyncio.gather(*(self.api.update_scale(self.resource, name, 0, namespace=NAMESPACE)
                               for name in self.deployments))

    async def all_running(self, timeout: float) -> float:
        """Every pod of the workload Running, and no more pods than asked for."""
        return await self.tracker.until(lambda t: len(t.running) == len(t.live) == self.pods, timeout,
                                        f"{self.pods} pods of {self.name} Running")

    async def created_at_least(self, count: int, timeout: float) -> float:
        return await self.tracker.until(lambda t: len(t.first_seen) >= count, timeout,
                                        f"{count} pods of {self.name} created")

    async def all_gone(self, timeout: float) -> float:
        return await self.tracker.until(lambda t: not t.live and len(t.deleted_at) == len(t.first_seen), timeout,
                                        f"every pod of {self.name} deleted")
