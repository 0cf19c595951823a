"""A node's heartbeat: register the Node, renew its Lease, post its status when it is due.

* registration: create the Node (AlreadyExists: post a fresh status instead, as a kubelet
  that restarts does); retried with backoff until the apiserver answers;
* every `renew_interval`: renew `kube-node-lease/<node>` (a merge patch; created when missing),
  and post the Node's status when it is not Ready (the node lifecycle controller marked it
  Unknown while we were away) or `status_interval` has passed (nodeStatusReportFrequency).

Shared by the kubelet (one node) and the hollow kubelet (many nodes, one each).
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from kubemu.apiclient import ApiClient, is_already_exists, is_not_found
from kubemu.wire import WireError

from .nodestatus import NodeConfig, NodeNetwork, default_labels, lease_object, node_object, node_status

log = logging.getLogger("kubelet.node")

RETRY_INITIAL = 0.2
RETRY_MAX = 5.0


class NodeHeartbeat:
    def __init__(self, api: ApiClient, config: NodeConfig, lease_duration: int = 40,
                 renew_interval: float = 10.0, status_interval: float = 300.0,
                 network: Callable[[dict | None], NodeNetwork] | None = None):
        """`network(node)`: the pod network's state, told the Node as the API has it (None
        before it is registered): how the kubelet learns its spec.podCIDR."""
        self.api = api
        self.config = config
        self.network = network or (lambda _node: NodeNetwork())
        self.node = config.name
        self.lease_duration = lease_duration
        self.renew_interval = renew_interval
        self.status_interval = status_interval
        self.registered = asyncio.Event()

    async def run(self) -> None:
        delay = RETRY_INITIAL
        last_status = 0.0
        while True:
            try:
                if not self.registered.is_set():
                    await self._register()
                    last_status = time.monotonic()
                    self.registered.set()
                await self._renew_lease()
                if await self._status_due(time.monotonic() - last_status):
                    await self._post_status()
                    last_status = time.monotonic()
                delay = RETRY_INITIAL
                await asyncio.sleep(self.renew_interval)
            except WireError as err:
                log.info("node %s: %s (retrying in %.1fs)", self.node, err, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, RETRY_MAX)

    async def _register(self) -> None:
        try:
            await self.api.create("nodes", node_object(self.config, time.time(), self.network(None)))
            log.info("registered node %s", self.node)
        except WireError as err:
            if not is_already_exists(err):
                raise
            # kubelet's updateDefaultLabels: a Node made before the kubelet (`kubemu join` makes
            # it to carry the node's CURVE key) gets the labels registration would have given it
            await self.api.patch("nodes", self.node, {"metadata": {"labels": default_labels(self.config)}})
            await self._post_status()
            log.info("node %s was already registered; status updated", self.node)

    async def _renew_lease(self) -> None:
        lease = lease_object(self.node, self.lease_duration, time.time())
        try:
            await self.api.patch("leases", self.node, {"spec": lease["spec"]}, namespace=lease["metadata"]["namespace"])
        except WireError as err:
            if not is_not_found(err):
                raise
            await self.api.create("leases", lease, namespace=lease["metadata"]["namespace"])

    async def _status_due(self, since_last: float) -> bool:
        if since_last >= self.status_interval:
            return True
        node = await self.api.get("nodes", self.node)
        ready = [c for c in (node.get("status") or {}).get("conditions") or [] if c.get("type") == "Ready"]
        return not ready or ready[0].get("status") != "True"

    async def _post_status(self) -> None:
        node = await self.api.get("nodes", self.node)
        status = node_status(self.config, time.time(), node.get("status"), self.network(node))
        await self.api.patch("nodes", self.node, {"status": status}, subresource="status")


