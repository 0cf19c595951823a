"""components.controller_manager.pvcprotection against fakes: a removal the pods cache allows is
made only if a live list of the namespace's pods allows it too (a pod just created may not be
cached yet)."""
from __future__ import annotations

import asyncio

from components.controller_manager.informers import SharedInformers
from components.controller_manager.pvcprotection import PVCProtectionController
from tests.conftest import DEADLINE

FINALIZER = "kubernetes.io/pvc-protection"


class LiveApi:
    """The apiserver's side: `pods` (what a live list finds); every write recorded."""

    def __init__(self, pods: list[dict]):
        self.pods = pods
        self.lists: list[tuple] = []
        self.writes: list[tuple] = []

    async def list_all(self, resource, namespace=None, **_):
        self.lists.append((resource, namespace))
        return {"items": self.pods}

    async def patch(self, resource, name, patch, namespace=None, patch_type="merge", subresource=None):
        self.writes.append((resource, namespace, name, patch, patch_type))
        return {"metadata": {"name": name, "resourceVersion": "9"}}


def sync_with_an_empty_pod_cache(live_pods: list[dict]) -> LiveApi:
    api = LiveApi(live_pods)
    informers = SharedInformers(api)
    controller = PVCProtectionController(api, informers)
    informers.informer("persistentvolumeclaims").indexer.add({
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": "data", "namespace": "db", "uid": "u1", "resourceVersion": "4",
                     "finalizers": [FINALIZER], "deletionTimestamp": "2026-11-26T10:00:00Z"}})
    asyncio.run(asyncio.wait_for(controller.sync("db/data"), DEADLINE))
    return api


def test_a_pod_only_the_live_list_has_keeps_the_claim():
    user = {"metadata": {"name": "new", "namespace": "db"},
            "spec": {"nodeName": "node-1",
                     "volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": "data"}}]}}
    api = sync_with_an_empty_pod_cache([user])
    assert api.lists == [("pods", "db")] and api.writes == []
    api = sync_with_an_empty_pod_cache([])
    assert api.writes == [("persistentvolumeclaims", "db", "data",
                           {"metadata": {"$deleteFromPrimitiveList/finalizers": [FINALIZER], "uid": "u1"}},
                           "strategic")]
