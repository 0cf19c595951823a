"""The Deployment controller's shell (k8s pkg/controller/deployment's DeploymentController).

Event handlers enqueue the Deployment a change concerns: its own events; a ReplicaSet's through
its controllerRef (an orphan ReplicaSet: every Deployment of its namespace whose selector
matches it); a pod's deletion through its ReplicaSet to the Deployment, only for Recreate
Deployments (which wait for the old pods to be gone).

A sync hands the core the Deployment, the ReplicaSets of its namespace (it claims its own,
adopts matching orphans and needs the rest to detect a name collision) and the pods of the
ReplicaSets it controls (looked up per ReplicaSet by the controller index), then executes the
actions in order.
"""
from __future__ import annotations

import time

from components.controllers.deployment import is_recreate, sync_deployment
from components.controllers.podutil import (controller_ref, is_terminating, labels_of, meta,
                                            object_key, selector_matches)
from components.controller_manager.executor import ActionExecutor
from components.controller_manager.informers import CONTROLLER_INDEX, SharedInformers
from components.controller_manager.workers import Workers
from kubemu.apiclient import ApiClient
from kubemu.cache import NAMESPACE_INDEX, DeletedFinalStateUnknown
from kubemu.events import EventRecorder

COMPONENT = "deployment-controller"


def _rv(obj: dict) -> str | None:
    return meta(obj).get("resourceVersion")


class DeploymentController:
    def __init__(self, api: ApiClient, informers: SharedInformers, workers: int = 5):
        self.deployments = informers.informer("deployments")
        self.replicasets = informers.informer("replicasets")
        self.pods = informers.informer("pods")
        self.recorder = EventRecorder(api, component=COMPONENT)
        self.executor = ActionExecutor(api, informers, self.recorder)
        self.workers = Workers("deployment", self.sync, workers)
        self.deployments.add_event_handler(self._enqueue, lambda old, new: self._enqueue(new),
                                           self._enqueue)
        self.replicasets.add_event_handler(self._rs_added, self._rs_updated, self._rs_deleted)
        self.pods.add_event_handler(on_delete=self._pod_deleted)

    async def run(self, stop) -> None:
        await self.workers.run(stop)

    async def close(self) -> None:
        await self.recorder.close()

    # -- the sync --

    async def sync(self, key: str) -> float | None:
        d = self.deployments.get(key)
        if d is None:
            return None  # deleted: the garbage collector takes care of its ReplicaSets
        namespace, uid = meta(d).get("namespace") or "default", meta(d).get("uid")
        replicasets = self.replicasets.indexer.by_index(NAMESPACE_INDEX, namespace)
        # lazy: the core walks the pods only for a Recreate rollout, within this call
        pods = (pod for rs in replicasets if (controller_ref(rs) or {}).get("uid") == uid
                for pod in self.pods.indexer.by_index(CONTROLLER_INDEX, meta(rs).get("uid")))
        result = sync_deployment(d, replicasets, pods, time.time())
        await self.executor.execute(result.actions)
        return result.requeue_after

    # -- events --

    def _enqueue(self, d) -> None:
        self.workers.add(d.key if isinstance(d, DeletedFinalStateUnknown) else object_key(d))

    def _owner_key(self, rs: dict, ref: dict | None) -> str | None:
        """The key of the cached Deployment `ref` points to, if it still is that one."""
        if ref is None or ref.get("kind") != "Deployment":
            return None
        key = f"{meta(rs).get('namespace') or 'default'}/{ref.get('name')}"
        d = self.deployments.get(key)
        if d is None or meta(d).get("uid") != ref.get("uid"):
            return None
        return key

    def _enqueue_owner(self, rs: dict, ref: dict | None) -> None:
        key = self._owner_key(rs, ref)
        if key is not None:
            self.workers.add(key)

    def _enqueue_matching(self, rs: dict) -> None:
        """An orphan ReplicaSet changed: every Deployment that could adopt it looks again."""
        namespace = meta(rs).get("namespace") or "default"
        labels = labels_of(rs)
        for d in self.deployments.indexer.by_index(NAMESPACE_INDEX, namespace):
            if selector_matches((d.get("spec") or {}).get("selector"), labels):
                self.workers.add(object_key(d))

    def _rs_added(self, rs: dict) -> None:
        if is_terminating(rs):
            self._rs_deleted(rs)
            return
        ref = controller_ref(rs)
        if ref is not None:
            self._enqueue_owner(rs, ref)
        else:
            self._enqueue_matching(rs)

    def _rs_updated(self, old: dict, new: dict) -> None:
        if _rv(old) == _rv(new):
            return  # a resync: the Deployments are resynced themselves
        old_ref, new_ref = controller_ref(old), controller_ref(new)
        if old_ref != new_ref and old_ref is not None:
            self._enqueue_owner(old, old_ref)
        if new_ref is not None:
            self._enqueue_owner(new, new_ref)
        elif labels_of(old) != labels_of(new) or old_ref != new_ref:
            self._enqueue_matching(new)

    def _rs_deleted(self, rs) -> None:
        if isinstance(rs, DeletedFinalStateUnknown):
            rs = rs.obj
        self._enqueue_owner(rs, controller_ref(rs))

    def _pod_deleted(self, pod) -> None:
        if isinstance(pod, DeletedFinalStateUnknown):
            pod = pod.obj
        ref = controller_ref(pod)
        if ref is None or ref.get("kind") != "ReplicaSet":
            return
        rs = self.replicasets.get(f"{meta(pod).get('namespace') or 'default'}/{ref.get('name')}")
        if rs is None or meta(rs).get("uid") != ref.get("uid"):
            return
        key = self._owner_key(rs, controller_ref(rs))
        if key is not None and is_recreate(self.deployments.get(key)):
            self.workers.add(key)
