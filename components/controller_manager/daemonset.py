"""The DaemonSet controller's shell (k8s pkg/controller/daemon's DaemonSetsController).

Event handlers enqueue the DaemonSet a change concerns: its own events; a pod's or a
ControllerRevision's through its controllerRef (an orphan: every DaemonSet of its namespace
whose selector matches it); a Node added, whose DaemonSets should run there; a Node updated,
whose DaemonSets' verdict (should run / should continue running) changed; a Node deleted:
every DaemonSet (its pods there must go). The pod handlers keep the expectations as the
ReplicaSet controller's do: a pod of ours appearing is a creation observed, one disappearing or
getting a deletionTimestamp a deletion observed. Until a DaemonSet's writes are all observed it
creates and deletes nothing, so a cache that has not caught up never puts a second pod on a
node; a restarted controller-manager starts its workers only once every cache is synced.

A sync hands the core the DaemonSet, every Node, the pods it may own (its own by the controller
index and the orphans of its namespace), the namespace's ControllerRevisions, the expectations
and the failed-pod backoff records; it stores the new expectations *before* writing (the
informer may report the new pods before the writes return), then executes the actions.
"""
from __future__ import annotations

import time

from components.controllers.daemonset import node_should_run, sync_daemonset, update_backoff
from components.controllers.podutil import (controller_ref, is_terminating, labels_of, meta,
                                            object_key, selector_matches)
from components.controllers.replicaset import Expectations
from components.controller_manager.executor import ActionExecutor
from components.controller_manager.informers import (CONTROLLER_INDEX, SharedInformers,
                                                     orphan_value)
from components.controller_manager.podbookkeeping import PodBookkeeping
from components.controller_manager.workers import Workers
from kubemu.apiclient import ApiClient
from kubemu.cache import NAMESPACE_INDEX, DeletedFinalStateUnknown
from kubemu.events import EventRecorder

COMPONENT = "daemonset-controller"
KIND = "DaemonSet"


def _rv(obj: dict) -> str | None:
    return meta(obj).get("resourceVersion")


def _unwrap(obj):
    return obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj


def _true_conditions(node: dict) -> set:
    return {c.get("type") for c in (node.get("status") or {}).get("conditions") or []
            if c.get("status") == "True"}


def _ignore_node_update(old: dict, new: dict) -> bool:
    """shouldIgnoreNodeUpdate: only heartbeats changed (same true conditions, same rest)."""
    if _true_conditions(old) != _true_conditions(new):
        return False

    def rest(node: dict) -> dict:
        status = {k: v for k, v in (node.get("status") or {}).items() if k != "conditions"}
        m = {k: v for k, v in meta(node).items() if k != "resourceVersion"}
        return {**node, "metadata": m, "status": status}
    return rest(old) == rest(new)


class DaemonSetController:
    def __init__(self, api: ApiClient, informers: SharedInformers, workers: int = 2):
        self.daemonsets = informers.informer("daemonsets")
        self.revisions = informers.informer("controllerrevisions")
        self.pods = informers.informer("pods")
        self.nodes = informers.informer("nodes")
        self.expectations = Expectations()
        self.backoff: dict = {}   # failed-pod backoff entries, by "<ds uid>/<generation>/<node>"
        self.recorder = EventRecorder(api, component=COMPONENT)
        self.executor = ActionExecutor(api, informers, self.recorder)
        self.workers = Workers("daemonset", self.sync, workers)
        self.daemonsets.add_event_handler(self._ds_added, self._ds_updated, self._ds_deleted)
        self.revisions.add_event_handler(self._owned_added, self._owned_updated,
                                         self._revision_deleted)
        self.pods.add_event_handler(self._pod_added, self._pod_updated, self._pod_deleted)
        self.nodes.add_event_handler(self._node_added, self._node_updated, self._node_deleted)

    async def run(self, stop) -> None:
        await self.workers.run(stop)

    async def close(self) -> None:
        await self.recorder.close()

    # -- the sync --

    async def sync(self, key: str) -> float | None:
        ds = self.daemonsets.get(key)
        if ds is None:
            self.expectations.forget(key)
            return None
        m = meta(ds)
        namespace = m.get("namespace") or "default"
        pods = self.pods.indexer.by_index(CONTROLLER_INDEX, m.get("uid")) + \
            self.pods.indexer.by_index(CONTROLLER_INDEX, orphan_value(namespace))
        revisions = self.revisions.indexer.by_index(NAMESPACE_INDEX, namespace)
        now = time.time()
        result = sync_daemonset(ds, self.nodes.list(), pods, revisions,
                                self.expectations.get(key), self.backoff, now)
        self.expectations.set(key, result.expectation)
        update_backoff(self.backoff, result.backoff, now)
        await self.executor.execute(
            result.actions, observer=PodBookkeeping(self.expectations, self.recorder, key, ds))
        return result.requeue_after

    # -- DaemonSet events --

    def _ds_added(self, ds: dict) -> None:
        self.workers.add(object_key(ds))

    def _ds_updated(self, old: dict, new: dict) -> None:
        if meta(old).get("uid") != meta(new).get("uid"):
            self.expectations.forget(object_key(old))   # a namesake replaced it
        self.workers.add(object_key(new))

    def _ds_deleted(self, ds) -> None:
        key = ds.key if isinstance(ds, DeletedFinalStateUnknown) else object_key(ds)
        self.expectations.forget(key)
        self.workers.add(key)

    # -- pods and revisions: to their DaemonSet --

    def _owner_key(self, obj: dict, ref: dict | None) -> str | None:
        """The key of the cached DaemonSet `ref` points to (None: not a DaemonSet, or not that
        one any more)."""
        if ref is None or ref.get("kind") != KIND:
            return None
        key = f"{meta(obj).get('namespace') or 'default'}/{ref.get('name')}"
        ds = self.daemonsets.get(key)
        if ds is None or meta(ds).get("uid") != ref.get("uid"):
            return None
        return key

    def _enqueue_matching(self, obj: dict) -> None:
        """An orphan changed: every DaemonSet that could adopt it looks again."""
        namespace = meta(obj).get("namespace") or "default"
        labels = labels_of(obj)
        for ds in self.daemonsets.indexer.by_index(NAMESPACE_INDEX, namespace):
            if selector_matches((ds.get("spec") or {}).get("selector"), labels):
                self.workers.add(object_key(ds))

    def _owned_added(self, obj: dict) -> None:
        ref = controller_ref(obj)
        if ref is None:
            self._enqueue_matching(obj)
            return
        key = self._owner_key(obj, ref)
        if key is not None:
            self.workers.add(key)

    def _owned_updated(self, old: dict, new: dict) -> None:
        if _rv(old) == _rv(new):
            return  # a resync: the DaemonSets are resynced themselves
        old_ref, new_ref = controller_ref(old), controller_ref(new)
        if old_ref != new_ref and old_ref is not None:
            key = self._owner_key(old, old_ref)
            if key is not None:
                self.workers.add(key)
        if new_ref is not None:
            key = self._owner_key(new, new_ref)
            if key is not None:
                self.workers.add(key)
        elif labels_of(old) != labels_of(new) or old_ref != new_ref:
            self._enqueue_matching(new)

    def _revision_deleted(self, revision) -> None:
        revision = _unwrap(revision)
        key = self._owner_key(revision, controller_ref(revision))
        if key is not None:
            self.workers.add(key)

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
        if _rv(old) == _rv(new):
            return
        if is_terminating(new):
            # a graceful delete starts: the deletion is observed now
            self._pod_deleted(new)
            return
        self._owned_updated(old, new)

    def _pod_deleted(self, pod) -> None:
        pod = _unwrap(pod)
        ref = controller_ref(pod)
        if ref is None:
            self._orphan_deleted(pod)
            return
        key = self._owner_key(pod, ref)
        if key is None:
            return
        self.expectations.deletion_observed(key, meta(pod).get("uid"))
        self.workers.add(key)

    def _orphan_deleted(self, pod: dict) -> None:
        """An orphan a DaemonSet adopted and deleted in one sync can be gone before either
        write lands (its adoption fails, its delete finds it gone: the executor's success):
        the deletion the DaemonSet expects of it is observed here, or it would wait for the
        expectations' TTL before making the node's pod (upstream lowers its expectations on a
        failed delete)."""
        namespace = meta(pod).get("namespace") or "default"
        labels = labels_of(pod)
        for ds in self.daemonsets.indexer.by_index(NAMESPACE_INDEX, namespace):
            if selector_matches((ds.get("spec") or {}).get("selector"), labels):
                self.expectations.deletion_observed(object_key(ds), meta(pod).get("uid"))
                self.workers.add(object_key(ds))

    # -- nodes --

    def _node_added(self, node: dict) -> None:
        for ds in self.daemonsets.list():
            if node_should_run(node, ds)[0]:
                self.workers.add(object_key(ds))

    def _node_updated(self, old: dict, new: dict) -> None:
        if _ignore_node_update(old, new):
            return
        for ds in self.daemonsets.list():
            if node_should_run(old, ds) != node_should_run(new, ds):
                self.workers.add(object_key(ds))

    def _node_deleted(self, node) -> None:
        for ds in self.daemonsets.list():
            self.workers.add(object_key(ds))
