"""The in-use protection controllers' shells (kube-controller-manager's pvc-protection and
pv-protection); decisions are `components.controllers.pvcprotection`'s.

pvc-protection, keyed by "ns/name" of a claim: a claim's change queues it when it concerns the
controller (Terminating with the finalizer, or not Terminating without it); a pod deleted,
finished or not scheduled queues the claims its volumes name (the pods that can release one).
The pods cache may not hold a pod that was just created: a removal the cache allows is
confirmed against a live list of the namespace's pods (upstream's askAPIServer) before it is
made, so a claim is never released under a pod that uses it.

pv-protection, keyed by volume name: a volume's change queues it when it concerns the
controller; its phase is all the decision reads.
"""
from __future__ import annotations

from components.controllers import RemoveFinalizer
from components.controllers.persistentvolume import claim_key
from components.controllers.podutil import meta, pod_phase
from components.controllers.pvcprotection import needs_sync, sync_claim, sync_volume
from components.controller_manager.endpointslice import final_state
from components.controller_manager.executor import ActionExecutor
from components.controller_manager.informers import SharedInformers
from components.controller_manager.workers import Workers
from kubemu.api.pod import claim_names
from kubemu.api.storage import PV_PROTECTION_FINALIZER, PVC_PROTECTION_FINALIZER
from kubemu.apiclient import ApiClient
from kubemu.cache import NAMESPACE_INDEX
from kubemu.events import EventRecorder


class PVCProtectionController:
    def __init__(self, api: ApiClient, informers: SharedInformers, workers: int = 1):
        self.api = api
        self.claims = informers.informer("persistentvolumeclaims")
        self.pods = informers.informer("pods")
        self.recorder = EventRecorder(api, component="pvc-protection-controller")
        self.executor = ActionExecutor(api, informers, self.recorder)
        self.workers = Workers("pvc-protection", self.sync, workers)
        self.claims.add_event_handler(self._claim, lambda _old, new: self._claim(new), None)
        self.pods.add_event_handler(lambda pod: self._pod(pod, False), self._pod_updated,
                                    lambda pod: self._pod(final_state(pod), True))

    async def run(self, stop) -> None:
        await self.workers.run(stop)

    async def close(self) -> None:
        await self.recorder.close()

    def _claim(self, claim: dict) -> None:
        if needs_sync(claim, PVC_PROTECTION_FINALIZER):
            self.workers.add(claim_key(claim))

    def _pod_updated(self, old: dict, new: dict) -> None:
        self._pod(new, False)
        if meta(old).get("uid") != meta(new).get("uid"):   # a namesake replaced the old pod
            self._pod(old, True)

    def _pod(self, pod: dict, deleted: bool) -> None:
        """enqueuePVCs: only the pods whose change can free a claim."""
        spec = pod.get("spec") if isinstance(pod.get("spec"), dict) else {}
        if not deleted and pod_phase(pod) not in ("Succeeded", "Failed") and spec.get("nodeName"):
            return
        namespace = meta(pod).get("namespace") or "default"
        for name in claim_names(pod):
            self.workers.add(f"{namespace}/{name}")

    async def sync(self, key: str) -> None:
        claim = self.claims.get(key)
        if claim is None:
            return
        namespace = meta(claim).get("namespace") or "default"
        actions = sync_claim(claim, self.pods.indexer.by_index(NAMESPACE_INDEX, namespace))
        if any(isinstance(a, RemoveFinalizer) for a in actions):
            live = await self.api.list_all("pods", namespace)
            actions = sync_claim(claim, live.get("items") or [])
        await self.executor.execute(actions)


class PVProtectionController:
    def __init__(self, api: ApiClient, informers: SharedInformers, workers: int = 1):
        self.volumes = informers.informer("persistentvolumes")
        self.recorder = EventRecorder(api, component="pv-protection-controller")
        self.executor = ActionExecutor(api, informers, self.recorder)
        self.workers = Workers("pv-protection", self.sync, workers)
        self.volumes.add_event_handler(self._volume, lambda _old, new: self._volume(new), None)

    async def run(self, stop) -> None:
        await self.workers.run(stop)

    async def close(self) -> None:
        await self.recorder.close()

    def _volume(self, volume: dict) -> None:
        if needs_sync(volume, PV_PROTECTION_FINALIZER):
            self.workers.add(meta(volume).get("name"))

    async def sync(self, name: str) -> None:
        volume = self.volumes.get(name)
        if volume is not None:
            await self.executor.execute(sync_volume(volume))
