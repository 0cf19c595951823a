"""The disruption controller's shell (k8s pkg/controller/disruption's DisruptionController).

Keys are PodDisruptionBudgets ("<namespace>/<name>"). A PDB's own changes queue it; a pod's
change queues the PDBs of its namespace that select it (before and after a label change). A
sync hands the core (components/controllers/disruption.py) the PDB, its namespace's pods and a
lookup into the controller caches (ReplicaSets, Deployments, StatefulSets: the pods' scale),
executes the result, and looks again when the core asks (a disruptedPods entry running out).
The status write is guarded by the PDB's resourceVersion (the executor's shared-status rule):
an eviction that spent a disruption meanwhile makes it a Conflict, retried from fresh caches.
"""
from __future__ import annotations

import time

from components.controllers.disruption import selected_pods, sync_pdb
from components.controllers.podutil import meta, object_key
from components.controller_manager.executor import ActionExecutor
from components.controller_manager.informers import SharedInformers
from components.controller_manager.workers import Workers
from kubemu.apiclient import ApiClient
from kubemu.cache import NAMESPACE_INDEX, DeletedFinalStateUnknown
from kubemu.events import EventRecorder

COMPONENT = "controllermanager"  # k8s records the disruption controller's events as this


def _final(obj):
    return obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj


class DisruptionController:
    def __init__(self, api: ApiClient, informers: SharedInformers, workers: int = 2):
        self.informers = informers
        self.pdbs = informers.informer("poddisruptionbudgets")
        self.pods = informers.informer("pods")
        for scalable in ("replicasets", "deployments", "statefulsets"):  # read by the lookup
            informers.informer(scalable)
        self.recorder = EventRecorder(api, component=COMPONENT)
        self.executor = ActionExecutor(api, informers, self.recorder)
        self.workers = Workers("disruption", self.sync, workers)
        self.pdbs.add_event_handler(self._pdb_changed, lambda old, new: self._pdb_changed(new),
                                    self._pdb_deleted)
        self.pods.add_event_handler(self._pod_changed, self._pod_updated, self._pod_changed)

    async def run(self, stop) -> None:
        await self.workers.run(stop)

    async def close(self) -> None:
        await self.recorder.close()

    async def sync(self, key: str) -> float | None:
        pdb = self.pdbs.get(key)
        if pdb is None:
            return None
        pods = self.pods.indexer.by_index(NAMESPACE_INDEX, meta(pdb).get("namespace") or "default")
        result = sync_pdb(pdb, pods, self.informers.get, time.time())
        await self.executor.execute(result.actions)
        return result.requeue_after

    def _pdb_changed(self, pdb: dict) -> None:
        self.workers.add(object_key(pdb))

    def _pdb_deleted(self, pdb) -> None:
        self.workers.add(pdb.key if isinstance(pdb, DeletedFinalStateUnknown) else object_key(pdb))

    def _pod_changed(self, pod) -> None:
        pod = _final(pod)
        for pdb in self.pdbs.indexer.by_index(NAMESPACE_INDEX, meta(pod).get("namespace") or "default"):
            if selected_pods(pdb, [pod]):
                self.workers.add(object_key(pdb))

    def _pod_updated(self, old: dict, new: dict) -> None:
        if meta(old).get("resourceVersion") == meta(new).get("resourceVersion"):
            return  # a resync: the PDBs are resynced themselves
        self._pod_changed(old)
        self._pod_changed(new)
