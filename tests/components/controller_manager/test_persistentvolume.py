"""The PV binder and the local-path provisioner in a real controller-manager process: what
queues what (a volume appearing for a claim that waited, a class created after its claim), and
the provisioner's one disk write, refused for a directory that leads out of the node's root."""
from __future__ import annotations

import os

import pytest

from kubemu.apiclient import NotFound
from tests.conftest import wait_for

from . import cluster  # noqa: F401  (a fixture)

SELECTED_NODE = "volume.kubernetes.io/selected-node"


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return tmp_path_factory.mktemp("lp")


@pytest.fixture(scope="module")
def cm(cluster, root):
    return cluster.controller_manager("--controllers", "persistentvolume-binder,local-path-provisioner",
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
