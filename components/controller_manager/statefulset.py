"""The StatefulSet controller's shell (k8s pkg/controller/statefulset's StatefulSetController).

Event handlers map every change to the StatefulSet it concerns and enqueue its key: a pod or a
ControllerRevision to its controller, an orphan one to every StatefulSet of its namespace whose
selector matches it (one may adopt it), a PersistentVolumeClaim to the StatefulSets whose claim
templates name it (a claim being deleted, or still owned by a previous pod, holds a pod back).

A sync hands the core (`components.controllers.statefulset`) the set, the pods it may own, and
the revisions and claims of its namespace, then executes the actions. No expectations: pod
names are fixed, so a create from a cache behind the controller's own writes (or after a
restart) meets AlreadyExists instead of making a second pod, and deletes carry the pod's uid.
"""
from __future__ import annotations

import time

from components.controllers import CreateObject, CreatePod, DeletePod
from components.controllers.podutil import (controller_ref, labels_of, meta, object_key,
                                            selector_matches)
from components.controllers.statefulset import KIND, sync_statefulset
from components.controller_manager.executor import ActionExecutor
from components.controller_manager.informers import (CONTROLLER_INDEX, SharedInformers,
                                                     orphan_value)
from components.controller_manager.workers import Workers
from kubemu.apiclient import AlreadyExists, ApiClient
from kubemu.cache import NAMESPACE_INDEX, DeletedFinalStateUnknown
from kubemu.events import EventRecorder

COMPONENT = "statefulset-controller"


def _rv(obj: dict) -> str | None:
    return meta(obj).get("resourceVersion")


def _unwrap(obj):
    return obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj


class StatefulSetController:
    def __init__(self, api: ApiClient, informers: SharedInformers, workers: int = 5):
        self.api = api
        self.informers = informers
        self.sets = informers.informer("statefulsets")
        self.pods = informers.informer("pods")
        self.revisions = informers.informer("controllerrevisions")
        self.claims = informers.informer("persistentvolumeclaims")
        self.recorder = EventRecorder(api, component=COMPONENT)
        self.workers = Workers("statefulset", self.sync, workers)
        self.sets.add_event_handler(self._set_changed, lambda old, new: self._set_changed(new),
                                    self._set_deleted)
        for informer in (self.pods, self.revisions):
            informer.add_event_handler(self._child_changed, self._child_updated,
                                       lambda obj: self._child_changed(_unwrap(obj)))
        self.claims.add_event_handler(self._claim_changed,
                                      lambda old, new: self._claim_changed(new),
                                      lambda obj: self._claim_changed(_unwrap(obj)))

    async def run(self, stop) -> None:
        await self.workers.run(stop)

    async def close(self) -> None:
        await self.recorder.close()

    # -- the sync --

    async def sync(self, key: str) -> float | None:
        sts = self.sets.get(key)
        if sts is None:
            return None
        m = meta(sts)
        namespace = m.get("namespace") or "default"
        pods = self.pods.indexer.by_index(CONTROLLER_INDEX, m.get("uid")) + \
            self.pods.indexer.by_index(CONTROLLER_INDEX, orphan_value(namespace))
        result = sync_statefulset(sts, pods,
                                  self.revisions.indexer.by_index(NAMESPACE_INDEX, namespace),
                                  self.claims.indexer.by_index(NAMESPACE_INDEX, namespace),
                                  time.time())
        events = _Events(self.recorder, sts)
        executor = ActionExecutor(self.api, self.informers, self.recorder,
                                  on_written=events.written)
        await executor.execute(result.actions, observer=events)
        return result.requeue_after

    # -- event handlers --

    def _set_changed(self, sts: dict) -> None:
        self.workers.add(object_key(sts))

    def _set_deleted(self, sts) -> None:
        self.workers.add(sts.key if isinstance(sts, DeletedFinalStateUnknown)
                         else object_key(sts))

    def _sets_of_namespace(self, obj: dict) -> list[dict]:
        return self.sets.indexer.by_index(NAMESPACE_INDEX, meta(obj).get("namespace") or "default")

    def _child_changed(self, obj: dict) -> None:
        ref = controller_ref(obj)
        if ref is not None:
            if ref.get("kind") == KIND:
                self.workers.add(f"{meta(obj).get('namespace') or 'default'}/{ref.get('name')}")
            return
        labels = labels_of(obj)
        for sts in self._sets_of_namespace(obj):
            if selector_matches((sts.get("spec") or {}).get("selector"), labels):
                self.workers.add(object_key(sts))

    def _child_updated(self, old: dict, new: dict) -> None:
        if _rv(old) == _rv(new):
            return  # a resync: the sets are resynced themselves
        if controller_ref(old) != controller_ref(new) or labels_of(old) != labels_of(new):
            self._child_changed(old)
        self._child_changed(new)

    def _claim_changed(self, claim: dict) -> None:
        name = meta(claim).get("name") or ""
        for sts in self._sets_of_namespace(claim):
            prefix_tail = f"-{meta(sts).get('name')}-"
            for template in (sts.get("spec") or {}).get("volumeClaimTemplates") or []:
                head = f"{meta(template).get('name')}{prefix_tail}"
                if name.startswith(head) and name[len(head):].isdigit():
                    self.workers.add(object_key(sts))


class _Events:
    """One sync's writes, as upstream's StatefulPodControl words their events."""

    def __init__(self, recorder: EventRecorder, sts: dict):
        self.recorder = recorder
        self.sts = sts
        self.name = meta(sts).get("name")

    def _event(self, type_: str, reason: str, message: str) -> None:
        self.recorder.event(self.sts, type_, reason, message)

    def pod_created(self, action: CreatePod, pod: dict) -> None:
        self._event("Normal", "SuccessfulCreate",
                    f"create Pod {meta(pod).get('name')} in StatefulSet {self.name} successful")

    def pod_create_failed(self, action: CreatePod, err: Exception) -> None:
        if isinstance(err, AlreadyExists):
            return  # a cache behind our own write: the informer brings the pod
        self._event("Warning", "FailedCreate",
                    f"create Pod {action.pod['metadata']['name']} in StatefulSet {self.name} "
                    f"failed error: {err}")

    def pod_deleted(self, action: DeletePod) -> None:
        self._event("Normal", "SuccessfulDelete",
                    f"delete Pod {action.name} in StatefulSet {self.name} successful")

    def pod_delete_failed(self, action: DeletePod, err: Exception) -> None:
        self._event("Warning", "FailedDelete",
                    f"delete Pod {action.name} in StatefulSet {self.name} failed error: {err}")

    def pod_skipped(self, action: CreatePod | DeletePod) -> None:
        pass

    def written(self, action, obj: dict | None) -> None:
        if isinstance(action, CreateObject) and obj is not None \
                and obj.get("kind") == "PersistentVolumeClaim":
            claim = meta(obj).get("name") or ""
            pod = f"{self.name}-{claim.rsplit('-', 1)[-1]}"
            self._event("Normal", "SuccessfulCreate",
                        f"create Claim {claim} Pod {pod} in StatefulSet {self.name} success")
