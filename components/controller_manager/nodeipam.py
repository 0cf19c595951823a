"""Node IPAM's shell (k8s pkg/controller/nodeipam with the range allocator): every node gets a
block of --cluster-cidr as its spec.podCIDR. Runs only with --allocate-node-cidrs.

Like the node lifecycle controller, the queue holds one key: a pass over all nodes (the
allocator's bitmap is shared by all of them, and a pass recomputes it from the cache). A pass
is queued when a node is added or deleted (its blocks are free again) and when a node without
podCIDRs changes, as the allocator's handlers do; a node that found no free block is retried
after `RETRY_AFTER` seconds. The core's ``NodeIPAMState`` is the controller's only state.
"""
from __future__ import annotations

import asyncio
import logging

from components.controllers import PatchObject
from components.controllers.nodeipam import (NodeIPAMSettings, NodeIPAMState, forget,
                                             reserved_blocks, sync_node_cidrs)
from components.controller_manager.executor import ActionExecutor
from components.controller_manager.informers import SharedInformers
from components.controller_manager.workers import Workers
from kubemu.api.objects import node_pod_cidrs
from kubemu.apiclient import ApiClient
from kubemu.events import EventRecorder

log = logging.getLogger("kubemu.controller_manager.nodeipam")

COMPONENT = "cidrAllocator"
KEY = "all-nodes"


class NodeIPAMController:
    def __init__(self, api: ApiClient, informers: SharedInformers, settings: NodeIPAMSettings):
        self.settings = settings
        self.reserved = reserved_blocks(settings)
        self.state = NodeIPAMState()
        self.nodes = informers.informer("nodes")
        self.recorder = EventRecorder(api, component=COMPONENT)
        self.executor = ActionExecutor(api, informers, self.recorder)
        self.workers = Workers("nodeipam", self.sync, 1)
        self.nodes.add_event_handler(self._changed, self._updated, self._changed)

    async def run(self, stop) -> None:
        log.info("Starting range CIDR allocator: cluster CIDR %s, node mask /%d, %d block(s) "
                 "reserved", self.settings.cluster_cidr, self.settings.node_mask,
                 len(self.reserved))
        self.workers.add(KEY)
        await self.workers.run(stop)

    async def close(self) -> None:
        await self.recorder.close()

    async def sync(self, _key: str) -> float | None:
        result = sync_node_cidrs(self.nodes.list(), self.settings, self.state, self.reserved)
        self.state = result.state
        for problem in result.problems:
            log.warning("%s", problem)
        outcomes = await asyncio.gather(*(self._carry_out(a) for a in result.actions),
                                        return_exceptions=True)
        errors = [e for e in outcomes if isinstance(e, Exception)]
        if errors:
            raise errors[0]   # retried with backoff; the failed reservations are released
        return result.requeue_after

    async def _carry_out(self, action) -> None:
        """One action (they are independent: each touches its own node)."""
        if not isinstance(action, PatchObject):
            await self.executor.execute([action])
            return
        cidrs = action.changes["spec"]["podCIDRs"]
        try:
            await self.executor.execute([action])
        except Exception:
            self.state = forget(self.state, action.name)
            log.warning("Failed to update Node PodCIDR node=%s CIDR=%s", action.name, cidrs)
            raise
        log.info("Set Node PodCIDR node=%s podCIDRs=%s", action.name, cidrs)

    # -- events --

    def _changed(self, _node=None) -> None:
        self.workers.add(KEY)

    def _updated(self, _old: dict, new: dict) -> None:
        if not node_pod_cidrs(new):
            self._changed()
