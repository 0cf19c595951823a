"""The hollow kubelet (kubemark's hollow node, kwok's fake kubelet): many nodes, no processes.

    python -m kubelet --hollow --nodes 100 --api ENDPOINT [--startup-delay 0]

One process registers `hollow-node-<i>` for i in 0..N-1, keeps each one's Lease and status
fresh (kubelet/heartbeat.py), and plays the kubelet for the pods the scheduler binds to them:
after `startup_delay` seconds a bound pod is reported Running and Ready (every container
`running`, no process started, no sandbox built); a pod being deleted is removed with grace 0
at once (nothing to stop). A pod's IP comes from its node's spec.podCIDR (node IPAM's), one
after the other as host-local hands them out (`PodAddresses`); without one (or with all of
them taken) the pod reports the node's IP, as pods on the host network do. For benchmarks
and scale tests of the control plane.

What to write is decided by `hollow_status` and `PodAddresses` (pure); the shell is an
informer on the bound pods, one on the nodes, a queue of pod keys, and a few writers.
"""
from __future__ import annotations

import asyncio
import functools
import ipaddress
import logging
import time

from kubemu.api.times import format_time
from kubemu.apiclient import ApiClient, is_conflict, is_not_found
from kubemu.cache import DeletedFinalStateUnknown
from kubemu.gcfreeze import keep_frozen
from kubemu.informer import Informer
from kubemu.wire import WireError

from .heartbeat import NodeHeartbeat
from .nodestatus import NODE_IP, NodeConfig, is_mirror_pod

log = logging.getLogger("kubelet.hollow")

WRITERS = 32          # status writes in flight at once
REGISTER_BATCH = 16   # nodes whose heartbeats start together (spreads the first renewals)
BOUND_PODS = "spec.nodeName!="   # the field selector of the pods a kubelet plays


class PodAddresses:
    """Pod IPs from each node's podCIDR, as the host-local IPAM plugin gives them out: the next
    free address after the last one given on that node (round-robin), never the network
    address, the bridge's gateway (the first host address) or the broadcast address."""

    def __init__(self) -> None:
        self._by_uid: dict[str, str] = {}
        self._in_use: set[str] = set()
        self._last: dict[str, int] = {}     # node -> the last address given there

    def observe(self, uid: str, ip: str) -> None:
        """A pod reported with this IP (seen in the cache: a restart keeps them)."""
        if uid and ip and self._by_uid.get(uid) != ip:
            self.release(uid)
            self._by_uid[uid] = ip
            self._in_use.add(ip)

    def release(self, uid: str) -> None:
        ip = self._by_uid.pop(uid, None)
        if ip is not None:
            self._in_use.discard(ip)

    def assign(self, node: str, pod_cidr: str, uid: str) -> str | None:
        """The pod's IP in `pod_cidr` (the same on a repeat); None when every one is taken."""
        if uid in self._by_uid:
            return self._by_uid[uid]
        first, last = _host_range(pod_cidr)
        if first > last:
            return None
        start = self._last.get(node, last) + 1
        if not first <= start <= last:
            start = first
        size = last - first + 1
        for step in range(size):
            candidate = first + (start - first + step) % size
            ip = _dotted(candidate)
            if ip not in self._in_use:
                self._last[node] = candidate
                self.observe(uid, ip)
                return ip
        return None


# Parsed per CIDR text, not per node: a node's podCIDR can change (node IPAM reassigns it after
# the Node is recreated) and a new text is simply a new entry. A fleet has one CIDR per node, so
# the caches hold what the informer holds; the bound only keeps a churning fleet's from growing.
@functools.lru_cache(maxsize=65536)
def _host_range(pod_cidr: str) -> tuple[int, int]:
    """The first and last address host-local gives out in `pod_cidr`, as ints (first > last:
    none): after the network address and the bridge's gateway, before the broadcast address."""
    net = ipaddress.IPv4Network(pod_cidr, strict=False)
    return int(net.network_address) + 2, int(net.broadcast_address) - 1


def _dotted(address: int) -> str:
    # what str(IPv4Address(address)) gives, without building the object for every pod
    return f"{address >> 24}.{(address >> 16) & 255}.{(address >> 8) & 255}.{address & 255}"


def node_pod_cidr(node: dict | None) -> str | None:
    """The node's IPv4 podCIDR, when it has one."""
    cidr = ((node or {}).get("spec") or {}).get("podCIDR")
    return _canonical_ipv4_cidr(cidr) if cidr and isinstance(cidr, str) else None


@functools.lru_cache(maxsize=65536)
def _canonical_ipv4_cidr(cidr: str) -> str | None:
    try:
        return str(ipaddress.IPv4Network(cidr, strict=False))
    except ValueError:
        return None


def hollow_status(pod: dict, now: float, pod_ip: str = NODE_IP) -> dict:
    """The status a real kubelet would post once every container of `pod` runs and is ready."""
    spec = pod.get("spec") or {}
    uid = (pod.get("metadata") or {}).get("uid", "")
    started = format_time(now)
    conditions = [{"type": t, "status": "True", "lastTransitionTime": started}
                  for t in ("Initialized", "Ready", "ContainersReady", "PodScheduled")]
    containers = [{"name": c.get("name", ""), "state": {"running": {"startedAt": started}}, "lastState": {},
                   "ready": True, "started": True, "restartCount": 0, "image": c.get("image") or "",
                   "imageID": "", "containerID": f"hollow://{uid}/{c.get('name', '')}"}
                  for c in sorted(spec.get("containers") or [], key=lambda c: c.get("name", ""))]
    return {"phase": "Running", "conditions": conditions, "hostIP": NODE_IP, "hostIPs": [{"ip": NODE_IP}],
            "podIP": pod_ip, "podIPs": [{"ip": pod_ip}], "startTime": started,
            "containerStatuses": containers}


def needs_running(pod: dict) -> bool:
    status = pod.get("status") or {}
    return status.get("phase") not in ("Running", "Succeeded", "Failed")


class HollowKubelet:
    def __init__(self, endpoint: str, configs: list[NodeConfig], *, startup_delay: float = 0.0,
                 credentials: tuple[str, str] | None = None, lease_duration: int = 40,
                 renew_interval: float = 10.0, status_interval: float = 300.0):
        self.nodes = {c.name for c in configs}
        self.startup_delay = startup_delay
        self.api = ApiClient(endpoint, credentials=credentials, timeout=10.0)
        self.heartbeats = [NodeHeartbeat(self.api, c, lease_duration, renew_interval, status_interval)
                           for c in configs]
        # Only bound pods, as a kubelet watches only its node's (spec.nodeName=<node>): a pod
        # waiting for the scheduler is nothing to a kubelet, and not decoding it saves one of
        # the three events of every pod. Binding it makes it match: the watch reports it ADDED.
        self.informer = Informer(self.api, "pods", field_selector=BOUND_PODS)
        self.informer.add_event_handler(self._seen, lambda _old, new: self._seen(new), self._gone)
        self.node_informer = Informer(self.api, "nodes")
        self.addresses = PodAddresses()
        self._full: set[str] = set()   # nodes whose podCIDR ran out (said once)
        self.queue: asyncio.Queue[str] = asyncio.Queue()
        self._queued: set[str] = set()
        self.stats = {"started": 0, "deleted": 0}

    def _seen(self, pod: dict) -> None:
        meta = pod.get("metadata") or {}
        if (pod.get("spec") or {}).get("nodeName") not in self.nodes or is_mirror_pod(pod):
            return
        self.addresses.observe(meta.get("uid", ""), (pod.get("status") or {}).get("podIP", ""))
        if not meta.get("deletionTimestamp") and not needs_running(pod):
            return
        key = f"{meta.get('namespace')}/{meta.get('name')}"
        if key in self._queued:
            return
        self._queued.add(key)
        delay = 0.0 if meta.get("deletionTimestamp") else self.startup_delay
        if delay > 0:
            asyncio.get_running_loop().call_later(delay, self.queue.put_nowait, key)
        else:
            self.queue.put_nowait(key)

    def _gone(self, pod) -> None:
        if isinstance(pod, DeletedFinalStateUnknown):
            pod = pod.obj
        self.addresses.release(((pod or {}).get("metadata") or {}).get("uid", ""))

    async def run(self, stop: asyncio.Event) -> None:
        tasks = [asyncio.create_task(self.informer.run(stop), name="pod informer"),
                 asyncio.create_task(self.node_informer.run(stop), name="node informer"),
                 asyncio.create_task(keep_frozen(), name="gc freezer")]
        for i in range(0, len(self.heartbeats), REGISTER_BATCH):
            batch = self.heartbeats[i:i + REGISTER_BATCH]
            tasks += [asyncio.create_task(h.run(), name=f"heartbeat {h.node}") for h in batch]
            await asyncio.gather(*(h.registered.wait() for h in batch))
        log.info("%d hollow node(s) registered", len(self.heartbeats))
        await self.node_informer.wait_for_sync()
        tasks += [asyncio.create_task(self._write(), name="writer") for _ in range(WRITERS)]
        try:
            await stop.wait()
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await self.api.close()

    async def _write(self) -> None:
        while True:
            key = await self.queue.get()
            self._queued.discard(key)
            pod = self.informer.get(key)
            if pod is None:
                continue
            try:
                await self._sync(pod)
            except WireError as err:
                if is_not_found(err) or is_conflict(err):
                    continue  # gone, or another uid now: the informer brings the news
                log.info("pod %s: %s (retrying)", key, err)
                await asyncio.sleep(0.2)
                self._seen(pod)

    async def _sync(self, pod: dict) -> None:
        meta = pod["metadata"]
        namespace, name = meta["namespace"], meta["name"]
        if meta.get("deletionTimestamp"):
            await self.api.delete("pods", name, namespace=namespace, grace_period_seconds=0,
                                  preconditions={"uid": meta["uid"]})
            self.stats["deleted"] += 1
        elif needs_running(pod):
            ip = self._pod_ip(pod)
            await self.api.patch("pods", name, {"status": hollow_status(pod, time.time(), ip)},
                                 namespace=namespace, subresource="status")
            self.stats["started"] += 1

    def _pod_ip(self, pod: dict) -> str:
        """The pod's IP from its node's podCIDR; the node's IP for hostNetwork pods, while the
        node has no podCIDR, and when the podCIDR is full (a hollow fleet's blocks may be
        smaller than its max pods: no sandbox needs the address, the benchmark needs the pod)."""
        node = pod["spec"]["nodeName"]
        cidr = node_pod_cidr(self.node_informer.get(node))
        if cidr is None or pod["spec"].get("hostNetwork"):
            return NODE_IP
        ip = self.addresses.assign(node, cidr, pod["metadata"]["uid"])
        if ip is None:
            if node not in self._full:
                self._full.add(node)
                log.info("node %s: no free address left in %s; its further pods report the "
                         "node's IP", node, cidr)
            return NODE_IP
        return ip


def hollow_configs(count: int, prefix: str, cpu: str, memory: str, max_pods: int) -> list[NodeConfig]:
    return [NodeConfig(f"{prefix}{i}", cpu, memory, max_pods, {"kubemu.io/hollow": "true"},
                       runtime="hollow://") for i in range(count)]
