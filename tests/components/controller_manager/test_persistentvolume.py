"""The PV binder and the local-path provisioner in a real controller-manager process: what
queues what (a volume appearing for a claim that waited, a class created after its claim), and
the provisioner's one disk write, refused for a directory that leads out of the node's root.
First, against fakes: a volume whose claim is not cached is released only if the API lacks it
too."""
from __future__ import annotations

import asyncio
import os

import pytest

from components.controller_manager.informers import SharedInformers
from components.controller_manager.persistentvolume import PersistentVolumeBinder
from kubemu.apiclient import NotFound
from tests.conftest import DEADLINE, wait_for

from . import cluster  # noqa: F401  (a fixture)

SELECTED_NODE = "volume.kubernetes.io/selected-node"


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return tmp_path_factory.mktemp("lp")


@pytest.fixture(scope="module")
def cm(cluster, root):
    return cluster.controller_manager("--controllers", "persistentvolume-binder,local-path-provisioner,"
                                      "pvc-protection,pv-protection",
                                      "--local-path-dir-template", f"{root}/{{node}}/local-path")


def claim(name: str, cls: str, annotations: dict | None = None) -> dict:
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "annotations": annotations or {}},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": cls,
                     "resources": {"requests": {"storage": "1Gi"}}}}


def storage_class(name: str, mode: str) -> dict:
    return {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": name},
            "provisioner": "rancher.io/local-path", "volumeBindingMode": mode}


def phase(api, resource, name, namespace=None):
    return ((api.get(resource, name, namespace) or {}).get("status") or {}).get("phase")


def gone(api, resource, name, namespace=None) -> bool:
    try:
        api.get(resource, name, namespace)
        return False
    except NotFound:
        return True


class ClaimsOnlyInTheApi:
    """The apiserver's side: `claims` by "ns/name" (what a GET finds); every write recorded."""

    def __init__(self, claims: dict):
        self.claims = claims
        self.gets: list[tuple] = []
        self.writes: list[tuple] = []

    async def get(self, resource, name, namespace=None):
        self.gets.append((resource, namespace, name))
        try:
            return self.claims[f"{namespace}/{name}"]
        except KeyError:
            raise NotFound(f'persistentvolumeclaims "{name}" not found') from None

    async def patch(self, resource, name, patch, namespace=None, patch_type="merge", subresource=None):
        self.writes.append(("patch", resource, name, patch))
        return {"metadata": {"name": name, "resourceVersion": "9"}}


def bound_volume() -> dict:
    return {"apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": "pvc-u1", "uid": "pv-u1", "resourceVersion": "3",
                         "annotations": {"pv.kubernetes.io/provisioned-by": "rancher.io/local-path"}},
            "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                     "persistentVolumeReclaimPolicy": "Delete", "hostPath": {"path": "/srv/x"},
                     "claimRef": {"kind": "PersistentVolumeClaim", "namespace": "db", "name": "data",
                                  "uid": "u1"}},
            "status": {"phase": "Bound"}}


def sync_volume_with_an_empty_claim_cache(api_claims: dict) -> ClaimsOnlyInTheApi:
    api = ClaimsOnlyInTheApi(api_claims)
    informers = SharedInformers(api)
    binder = PersistentVolumeBinder(api, informers)
    informers.informer("persistentvolumes").indexer.add(bound_volume())
    asyncio.run(asyncio.wait_for(binder.sync(("volume", "pvc-u1")), DEADLINE))
    return api


def test_a_volume_is_not_released_while_the_api_has_its_claim():
    in_api = {"metadata": {"name": "data", "namespace": "db", "uid": "u1"},
              "spec": {"volumeName": "pvc-u1"}, "status": {"phase": "Bound"}}
    api = sync_volume_with_an_empty_claim_cache({"db/data": in_api})
    assert api.gets == [("persistentvolumeclaims", "db", "data")]
    assert api.writes == []   # still Bound: nothing to write
    # a namesake in the API: the claim the volume was bound to is gone
    namesake = {**in_api, "metadata": {**in_api["metadata"], "uid": "u2"}}
    api = sync_volume_with_an_empty_claim_cache({"db/data": namesake})
    assert api.writes == [("patch", "persistentvolumes", "pvc-u1", {"status": {"phase": "Released"}})]
    api = sync_volume_with_an_empty_claim_cache({})
    assert api.writes == [("patch", "persistentvolumes", "pvc-u1", {"status": {"phase": "Released"}})]


def test_a_volume_created_later_binds_the_claim_that_waited(cluster, cm):
    ns = cluster.namespace("pv-later")
    cluster.api.create("persistentvolumeclaims", claim("data", ""), namespace=ns)
    wait_for(lambda: cluster.events(ns, "FailedBinding", "data"), message="the FailedBinding event")
    cluster.api.create("persistentvolumes", {
        "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "later"},
        "spec": {"capacity": {"storage": "2Gi"}, "accessModes": ["ReadWriteOnce"],
                 "hostPath": {"path": "/srv/later"}}})
    wait_for(lambda: phase(cluster.api, "persistentvolumeclaims", "data", ns) == "Bound"
             and phase(cluster.api, "persistentvolumes", "later") == "Bound", message="both Bound")


def test_a_class_created_after_its_claim(cluster, cm):
    ns = cluster.namespace("pv-class")
    cluster.api.create("persistentvolumeclaims", claim("data", "late"), namespace=ns)
    wait_for(lambda: cluster.events(ns, "ProvisioningFailed", "data"), message="the class is missing")
    assert cluster.events(ns, "ProvisioningFailed", "data")[0]["message"] == \
        'storageclass.storage.k8s.io "late" not found'
    cluster.api.create("storageclasses", storage_class("late", "Immediate"))
    # Immediate: the provisioner is asked at once, and local-path needs the consumer's node
    wait_for(lambda: any(e["message"].endswith("configuration error, no node was specified")
                         for e in cluster.events(ns, "ProvisioningFailed", "data")),
             message="local-path's refusal")


def test_reclaiming_removes_only_the_provisioners_own_directory(cluster, cm, root):
    ns = cluster.namespace("pv-reclaim")
    cluster.api.create("storageclasses", storage_class("local", "WaitForFirstConsumer"))
    made = cluster.api.create("persistentvolumeclaims", claim("data", "local", {SELECTED_NODE: "node-1"}),
                              namespace=ns)
    uid = made["metadata"]["uid"]
    wait_for(lambda: phase(cluster.api, "persistentvolumeclaims", "data", ns) == "Bound", message="provisioned")
    directory = root / "node-1" / "local-path" / f"pvc-{uid}_{ns}_data"
    assert cluster.api.get("persistentvolumes", f"pvc-{uid}")["spec"]["hostPath"]["path"] == str(directory)
    directory.mkdir(parents=True)   # as the kubelet's first mount makes it
    (directory / "f").write_text("data")
    cluster.api.delete("persistentvolumeclaims", "data", ns)
    wait_for(lambda: gone(cluster.api, "persistentvolumes", f"pvc-{uid}"), message="volume deleted")
    assert not directory.exists()

    # The same, but the directory is a symlink out of the root: refused, the volume kept.
    precious = root / "precious"
    precious.mkdir()
    (precious / "keep").write_text("x")
    made = cluster.api.create("persistentvolumeclaims", claim("evil", "local", {SELECTED_NODE: "node-1"}),
                              namespace=ns)
    uid = made["metadata"]["uid"]
    wait_for(lambda: phase(cluster.api, "persistentvolumeclaims", "evil", ns) == "Bound", message="provisioned")
    os.symlink(precious, root / "node-1" / "local-path" / f"pvc-{uid}_{ns}_evil")
    cluster.api.delete("persistentvolumeclaims", "evil", ns)
    wait_for(lambda: any(e["involvedObject"]["name"] == f"pvc-{uid}" and e["reason"] == "VolumeFailedDelete"
                         for e in cluster.api.list("events", namespace="default")["items"]),
             message="the refusal event")
    assert (precious / "keep").exists() and not gone(cluster.api, "persistentvolumes", f"pvc-{uid}")
    assert "Traceback" not in cm.log_text()
