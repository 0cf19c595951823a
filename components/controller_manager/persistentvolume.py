"""The PersistentVolume binder's shell (kube-controller-manager's persistentvolume-binder).

One work queue of ("claim", "ns/name") and ("volume", name) keys, synced by the pure
`components.controllers.persistentvolume`. What queues what:

* a claim's change: the claim; its deletion: the volumes that name it in their claimRef (they
  are Released and reclaimed);
* a volume's change: the volume and the claim its claimRef names (finishing a binding the
  provisioner or the scheduler started); an unclaimed volume: every unbound claim too (it may
  be the match they wait for); a volume's deletion: its claim (now Lost);
* a StorageClass's change: every unbound claim (a class that did not exist, a new default).

A volume whose claim is not cached is released only once the apiserver, asked, does not have the
claim either (or has a namesake): the cache may lag behind a claim made a moment ago.

The pods cache is only read (a claim waiting for its first consumer names the pods that use it
and have no node yet). Unbound claims are looked at again every SYNC_PERIOD, as the controller's periodic resync does
(--pvclaimbinder-sync-period), so that a repeated event says the claim still waits.
"""
from __future__ import annotations

from components.controllers.persistentvolume import (ANN_BIND_COMPLETED, COMPONENT, ConfirmClaim,
                                                     claim_key, claim_ref_key, sync_claim, sync_volume)
from components.controllers.podutil import meta
from components.controller_manager.endpointslice import final_state
from components.controller_manager.executor import ActionExecutor
from components.controller_manager.informers import SharedInformers
from components.controller_manager.workers import Workers
from kubemu.apiclient import ApiClient, NotFound
from kubemu.cache import NAMESPACE_INDEX
from kubemu.events import EventRecorder

SYNC_PERIOD = 15.0   # kube-controller-manager's --pvclaimbinder-sync-period


def _unbound(claim: dict) -> bool:
    return ANN_BIND_COMPLETED not in (meta(claim).get("annotations") or {})


class PersistentVolumeBinder:
    def __init__(self, api: ApiClient, informers: SharedInformers, workers: int = 5):
        self.api = api
        self.claims = informers.informer("persistentvolumeclaims")
        self.volumes = informers.informer("persistentvolumes")
        self.classes = informers.informer("storageclasses")
        self.pods = informers.informer("pods")   # to name the pods a waiting claim waits for
        self.recorder = EventRecorder(api, component=COMPONENT)
        self.executor = ActionExecutor(api, informers, self.recorder)
        self.workers = Workers("persistentvolume-binder", self.sync, workers)
        self.claims.add_event_handler(self._claim, lambda _old, new: self._claim(new), self._claim_deleted)
        self.volumes.add_event_handler(self._volume, lambda _old, new: self._volume(new),
                                       self._volume_deleted)
        self.classes.add_event_handler(self._all_unbound, lambda _old, _new: self._all_unbound(None),
                                       self._all_unbound)

    async def run(self, stop) -> None:
        await self.workers.run(stop)

    async def close(self) -> None:
        await self.recorder.close()

    # -- event handlers: keys only --

    def _claim(self, claim: dict) -> None:
        self.workers.add(("claim", claim_key(claim)))

    def _claim_deleted(self, claim) -> None:
        key = claim_key(final_state(claim))
        for volume in self.volumes.list():
            if claim_ref_key(volume) == key:
                self.workers.add(("volume", meta(volume).get("name")))

    def _volume(self, volume: dict) -> None:
        self.workers.add(("volume", meta(volume).get("name")))
        ref = claim_ref_key(volume)
        if ref is not None:
            self.workers.add(("claim", ref))
        else:
            self._all_unbound(None)

    def _volume_deleted(self, volume) -> None:
        ref = claim_ref_key(final_state(volume))
        if ref is not None:
            self.workers.add(("claim", ref))

    def _all_unbound(self, _obj) -> None:
        for claim in self.claims.list():
            if _unbound(claim):
                self._claim(claim)

    # -- the sync --

    async def sync(self, key: tuple[str, str]) -> float | None:
        kind, name = key
        if kind == "claim":
            claim = self.claims.get(name)
            if claim is None:
                return None
            volumes = {meta(v).get("name"): v for v in self.volumes.list()}
            classes = {meta(c).get("name"): c for c in self.classes.list()}
            pods = self.pods.indexer.by_index(NAMESPACE_INDEX, meta(claim).get("namespace") or "default")
            await self.executor.execute(sync_claim(claim, volumes, classes, pods))
            return SYNC_PERIOD if _unbound(claim) else None
        volume = self.volumes.get(name)
        if volume is None:
            return None
        ref = claim_ref_key(volume)
        actions = sync_volume(volume, self.claims.get(ref) if ref else None)
        if actions and isinstance(actions[0], ConfirmClaim):
            try:
                claim = await self.api.get("persistentvolumeclaims", actions[0].name, actions[0].namespace)
            except NotFound:
                claim = None
            actions = sync_volume(volume, claim, from_api=True)
        await self.executor.execute(actions)
        return None
