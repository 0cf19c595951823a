"""The ReplicaSet controller's shell (k8s pkg/controller/replicaset's ReplicaSetController).

Event handlers map every change to the ReplicaSet it concerns and enqueue its key: a pod to its
controller (ownerReference with ``controller: true``), an orphan pod to every ReplicaSet of its
namespace whose selector matches it (one of them may adopt it). They also keep the expectations
(see `components.controllers.replicaset`): a pod of ours appearing is a creation observed; one
disappearing, or getting a deletionTimestamp, is a deletion observed.

A sync hands the core the ReplicaSet and only the pods it may own - its own (by the controller
index) and the orphans of its namespace - stores the new expectations *before* writing (the
informer may report the new pods before the writes return), then executes the actions.
"""
from __future__ import annotations

import time

from components.controllers.podutil import (controller_ref, is_terminating, labels_of, meta,
                                            object_key, selector_matches)
from components.controllers.replicaset import Expectations, pod_update_matters, sync_replicaset
from components.controller_manager.executor import ActionExecutor
from components.controller_manager.informers import (CONTROLLER_INDEX, SharedInformers,
                                                     orphan_value)
from components.controller_manager.podbookkeeping import PodBookkeeping
from components.controller_manager.workers import Workers
from kubemu.apiclient import ApiClient
from kubemu.cache import NAMESPACE_INDEX, DeletedFinalStateUnknown
from kubemu.events import EventRecorder

COMPONENT = "replicaset-controller"


def _rv(obj: dict) -> str | None:
    return meta(obj).get("resourceVersion")


class ReplicaSetController:
    def __init__(self, api: ApiClient, informers: SharedInformers, workers: int = 5):
        self.pods = informers.informer("pods")
        self.replicasets = informers.informer("replicasets")
        self.expectations = Expectations()
        self.recorder = EventRecorder(api, component=COMPONENT)
        self.executor = ActionExecutor(api, informers, self.recorder)
        self.workers = Workers("replicaset", self.sync, workers)
        self.replicasets.add_event_handler(self._rs_changed, lambda old, new: self._rs_changed(new),
                                           self._rs_deleted)
        self.pods.add_event_handler(self._pod_added, self._pod_updated, self._pod_deleted)

    async def run(self, stop) -> None:
        await self.workers.run(stop)

    async def close(self) -> None:
        await self.recorder.close()

    # -- the sync --

    async def sync(self, key: str) -> float | None:
        rs = self.replicasets.get(key)
        if rs is None:
            self.expectations.forget(key)
            return None
        m = meta(rs)
        pods = self.pods.indexer.by_index(CONTROLLER_INDEX, m.get("uid")) + \
            self.pods.indexer.by_index(CONTROLLER_INDEX, orphan_value(m.get("namespace")))
        result = sync_replicaset(rs, pods, self.expectations.get(key), time.time())
        self.expectations.set(key, result.expectation)
        await self.executor.execute(
            result.actions, observer=PodBookkeeping(self.expectations, self.recorder, key, rs))
        return result.requeue_after

    # -- ReplicaSet events --

    def _rs_changed(self, rs: dict) -> None:
        self.workers.add(object_key(rs))

    def _rs_deleted(self, rs) -> None:
        key = rs.key if isinstance(rs, DeletedFinalStateUnknown) else object_key(rs)
        self.expectations.forget(key)
        self.workers.add(key)

    # -- pod events --

    def _owner_key(self, pod: dict, ref: dict | None) -> str | None:
        """The key of the cached ReplicaSet `ref` points to (None: not a ReplicaSet, or not
        that one any more - a namesake with another uid is not the owner)."""
        if ref is None or ref.get("kind") != "ReplicaSet":
            return None
        key = f"{meta(pod).get('namespace') or 'default'}/{ref.get('name')}"
        rs = self.replicasets.get(key)
        if rs is None or meta(rs).get("uid") != ref.get("uid"):
            return None
        return key

    def _enqueue_matching(self, pod: dict) -> None:
        """An orphan changed: every ReplicaSet that could adopt it looks again."""
        namespace = meta(pod).get("namespace") or "default"
        labels = labels_of(pod)
        for rs in self.replicasets.indexer.by_index(NAMESPACE_INDEX, namespace):
            if selector_matches((rs.get("spec") or {}).get("selector"), labels):
                self.workers.add(object_key(rs))

    def _pod_added(self, pod: dict) -> None:
        if is_terminating(pod):
            # a restarted controller finds pods already being deleted: not creations
            self._pod_deleted(pod)
            return
        ref = controller_ref(pod)
        if ref is not None:
            key = self._owner_key(pod, ref)
            if key is not None:
                self.expectations.creation_observed(key)
                self.workers.add(key)
            return
        self._enqueue_matching(pod)

    def _pod_updated(self, old: dict, new: dict) -> None:
        if _rv(old) == _rv(new) or not pod_update_matters(old, new):
            return  # a resync (the ReplicaSets are resynced themselves), or nothing a sync reads
        labels_changed = labels_of(old) != labels_of(new)
        if is_terminating(new):
            # a graceful delete starts: replace the pod now, not when the kubelet is done
            self._pod_deleted(new)
            if labels_changed:
                self._pod_deleted(old)
            return
        old_ref, new_ref = controller_ref(old), controller_ref(new)
        if old_ref != new_ref and old_ref is not None:
            key = self._owner_key(old, old_ref)
            if key is not None:
                self.workers.add(key)
        if new_ref is not None:
            key = self._owner_key(new, new_ref)
            if key is not None:
                self.workers.add(key)
            return
        if labels_changed or old_ref != new_ref:
            self._enqueue_matching(new)

    def _pod_deleted(self, pod) -> None:
        if isinstance(pod, DeletedFinalStateUnknown):
            pod = pod.obj
        key = self._owner_key(pod, controller_ref(pod))
        if key is None:
            return
        self.expectations.deletion_observed(key, meta(pod).get("uid"))
        self.workers.add(key)

