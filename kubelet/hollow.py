"""The hollow kubelet (kubemark's hollow node, kwok's fake kubelet): many nodes, no processes.

    python -m kubelet --hollow --nodes 100 --api ENDPOINT [--startup-delay 0]

One process registers `hollow-node-<i>` for i in 0..N-1, keeps each one's Lease and status
fresh (kubelet/heartbeat.py), and plays the kubelet for the pods the scheduler binds to them:
after `startup_delay` seconds a bound pod is reported Running and Ready (every container
`running`, no process started); a pod being deleted is removed with grace 0 at once (nothing to
stop). For benchmarks and scale tests of the control plane.

What to write is decided by `hollow_status` (pure); the shell is an informer on all pods, a
queue of pod keys, and a few writers.
"""
from __future__ import annotations

import asyncio
import logging
import time

from kubemu.api.times import format_time
from kubemu.apiclient import ApiClient, is_conflict, is_not_found
from kubemu.informer import Informer
from kubemu.wire import WireError

from .heartbeat import NodeHeartbeat
from .nodestatus import NODE_IP, NodeConfig, is_mirror_pod

log = logging.getLogger("kubelet.hollow")

WRITERS = 32          # status writes in flight at once
REGISTER_BATCH = 16   # nodes whose heartbeats start together (spreads the first renewals)


def hollow_status(pod: dict, now: float) -> dict:
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
            "podIP": NODE_IP, "podIPs": [{"ip": NODE_IP}], "startTime": started,
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
        self.informer = Informer(self.api, "pods")
        self.informer.add_event_handler(self._seen, lambda _old, new: self._seen(new), None)
        self.queue: asyncio.Queue[str] = asyncio.Queue()
        self._queued: set[str] = set()
        self.stats = {"started": 0, "deleted": 0}

    def _seen(self, pod: dict) -> None:
        meta = pod.get("metadata") or {}
        if (pod.get("spec") or {}).get("nodeName") not in self.nodes or is_mirror_pod(pod):
            return
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

    async def run(self, stop: asyncio.Event) -> None:
        tasks = [asyncio.create_task(self.informer.run(stop), name="pod informer")]
        for i in range(0, len(self.heartbeats), REGISTER_BATCH):
            batch = self.heartbeats[i:i + REGISTER_BATCH]
            tasks += [asyncio.create_task(h.run(), name=f"heartbeat {h.node}") for h in batch]
            await asyncio.gather(*(h.registered.wait() for h in batch))
        log.info("%d hollow node(s) registered", len(self.heartbeats))
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
            await self.api.patch("pods", name, {"status": hollow_status(pod, time.time())}, namespace=namespace,
                                 subresource="status")
            self.stats["started"] += 1


def hollow_configs(count: int, prefix: str, cpu: str, memory: str, max_pods: int) -> list[NodeConfig]:
    return [NodeConfig(f"{prefix}{i}", cpu, memory, max_pods, {"kubemu.io/hollow": "true"},
                       runtime="hollow://") for i in range(count)]
