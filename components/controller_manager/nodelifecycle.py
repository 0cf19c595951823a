"""The node lifecycle controller's shell (k8s pkg/controller/nodelifecycle's Controller, whose
monitorNodeHealth runs every --node-monitor-period, plus its taint-based eviction manager).

The core looks at every node at once (the eviction rate limiter is shared by all nodes), so the
work queue holds a single key: a pass over all nodes, their leases and the pods bound to them.
It runs every `period` seconds, sooner when the core knows a decision falls due earlier (a
grace period or a toleration running out), and at once when something changes that a pass
acts on: a node, a lease of a node that is not Ready, a pod bound to a node with NoExecute
taints. The queue folds a burst of such events into one pass. The ``EvictionLimiter`` is the
controller's only state: carried from one pass to the next (a restart starts with a full
bucket, as k8s does).
"""
from __future__ import annotations

import math
import time

from components.controllers.nodelifecycle import (NO_EXECUTE, EvictionLimiter,
                                                  NodeLifecycleSettings, get_condition, sync_nodes)
from components.controllers.podutil import meta
from components.controller_manager.executor import ActionExecutor
from components.controller_manager.informers import NODE_INDEX, SharedInformers
from components.controller_manager.workers import Workers
from kubemu.apiclient import ApiClient
from kubemu.events import EventRecorder

COMPONENT = "node-controller"
KEY = "all-nodes"


class NodeLifecycleController:
    def __init__(self, api: ApiClient, informers: SharedInformers,
                 settings: NodeLifecycleSettings, period: float = 5.0):
        self.nodes = informers.informer("nodes")
        self.leases = informers.informer("leases")
        self.pods = informers.informer("pods")
        self.settings = settings
        self.period = period
        self.limiter = EvictionLimiter()
        self.recorder = EventRecorder(api, component=COMPONENT)
        self.executor = ActionExecutor(api, informers, self.recorder)
        self.workers = Workers("nodelifecycle", self.sync, 1)
        self.nodes.add_event_handler(self._changed, lambda old, new: self._changed(new),
                                     self._changed)
        self.leases.add_event_handler(self._changed, self._lease_updated, self._changed)
        self.pods.add_event_handler(self._pod_changed, lambda old, new: self._pod_changed(new))

    async def run(self, stop) -> None:
        self.workers.add(KEY)
        await self.workers.run(stop)

    async def close(self) -> None:
        await self.recorder.close()

    async def sync(self, _key: str) -> float:
        nodes = self.nodes.list()
        pods = [pod for node in nodes
                for pod in self.pods.indexer.by_index(NODE_INDEX, meta(node).get("name"))]
        result = sync_nodes(nodes, self.leases.list(), pods, time.time(), self.limiter,
                            self.settings)
        # The limiter's tokens are spent even if a write below fails (k8s spends them too).
        self.limiter = result.limiter
        await self.executor.execute(result.actions)
        due = result.requeue_after if result.requeue_after is not None else math.inf
        return min(due, self.period)

    # -- events --

    def _changed(self, _obj=None) -> None:
        self.workers.add(KEY)

    def _lease_updated(self, old: dict, new: dict) -> None:
        # Renewals of healthy nodes are the steady state (one per node every few seconds):
        # they only move a deadline the periodic pass checks anyway.
        node = self.nodes.get(meta(new).get("name"))
        ready = get_condition(node, "Ready") if node else None
        if ready is None or ready.get("status") != "True":
            self._changed()

    def _pod_changed(self, pod: dict) -> None:
        name = (pod.get("spec") or {}).get("nodeName")
        node = self.nodes.get(name) if name else None
        if node and any(t.get("effect") == NO_EXECUTE
                        for t in (node.get("spec") or {}).get("taints") or []):
            self._changed()
