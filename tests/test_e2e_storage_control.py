"""The control side of volumes end to end (issue 17 §1, §5), real processes on
`kubemu up --nodes 2 --fast`: the PV binder, the local-path provisioner and the
DefaultStorageClass admission, without pods (the scheduler's selected-node annotation is set by
hand; mounting is tests/test_e2e_volumes.py's).

* a claim of an Immediate class binds the matching volume made by hand; its deletion leaves the
  volume Released (Retain);
* a claim without a class gets the default class `standard` (the addon), waits for its first
  consumer (the WaitForFirstConsumer event) until the selected-node annotation names a node;
  then a volume `pvc-<uid>` is provisioned on that node (the controller-manager killed -9 just
  then: it converges to that one volume), both Bound; the directory is made by the kubelet that
  first mounts the volume (DirectoryOrCreate), so none exists yet: the test makes it, as a
  mount would; deleting the claim deletes the volume and its directory (reclaim Delete);
* a claim of a class that does not exist is accepted and stays Pending with the
  ProvisioningFailed event, the controller-manager and the other claims unharmed;
* in-use protection: a claim a pod uses, deleted, stays Terminating (finalizer
  `kubernetes.io/pvc-protection`), its volume Bound and its directory in place; once the pod is
  deleted the claim goes, and with it (reclaim Delete) the volume and its directory.
"""
from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest

from kubemu.wire import NotFound
from tests.conftest import wait_for
from tests.test_e2e import LONG, cluster  # noqa: F401 (cluster: the fixture)

SELECTED_NODE = "volume.kubernetes.io/selected-node"
PVC_PROTECTION = "kubernetes.io/pvc-protection"


def claim(name: str, size: str = "100Mi", cls: str | None = None) -> dict:
    spec = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}}}
    if cls is not None:
        spec["storageClassName"] = cls
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name}, "spec": spec}


def phase(cluster, resource: str, name: str, namespace: str | None = "default") -> str | None:
    obj = cluster.call("get", resource, name, namespace)
    return ((obj or {}).get("status") or {}).get("phase")


def events(cluster, name: str) -> list[tuple[str, str]]:
    listed = cluster.call("list", "events", namespace="default") or {"items": []}
    return [(e.get("reason"), e.get("message")) for e in listed["items"]
            if (e.get("involvedObject") or {}).get("name") == name]


def gone(cluster, resource: str, name: str, namespace: str | None = None) -> bool:
    try:
        cluster.api.get(resource, name, namespace)
    except NotFound:
        return True
    return False


@pytest.mark.timeout(600)
def test_binding_provisioning_and_reclaiming(cluster, tmp_path):
    cluster.cli("up", "--nodes", "2", "--fast", "--detach")
    api = cluster.api
    wait_for(lambda: cluster.call("get", "storageclasses", "standard"), timeout=LONG,
             message="the default StorageClass addon")

    # An Immediate class and a volume made by hand: bound at once.
    api.create("storageclasses", {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                                  "metadata": {"name": "manual"},
                                  "provisioner": "kubernetes.io/no-provisioner"})
    api.create("persistentvolumes", {
        "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv-manual"},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                 "storageClassName": "manual", "hostPath": {"path": str(tmp_path / "manual")}}})
    api.create("persistentvolumeclaims", claim("manual", "500Mi", "manual"), "default")
    wait_for(lambda: phase(cluster, "persistentvolumeclaims", "manual") == "Bound"
             and phase(cluster, "persistentvolumes", "pv-manual", None) == "Bound",
             timeout=LONG, interval=0.2, message="the manual claim and volume Bound")
    bound = api.get("persistentvolumeclaims", "manual", "default")
    assert bound["spec"]["volumeName"] == "pv-manual"
    assert bound["status"]["capacity"] == {"storage": "1Gi"}
    assert api.get("persistentvolumes", "pv-manual")["spec"]["claimRef"]["uid"] == bound["metadata"]["uid"]

    # A class that does not exist: accepted, Pending, said in an event; nothing else disturbed.
    before = cluster.system_pid("controller-manager")
    api.create("persistentvolumeclaims", claim("nope", cls="nope"), "default")
    wait_for(lambda: ("ProvisioningFailed", 'storageclass.storage.k8s.io "nope" not found')
             in events(cluster, "nope"), timeout=LONG, interval=0.2, message="the ProvisioningFailed event")
    assert phase(cluster, "persistentvolumeclaims", "nope") == "Pending"
    assert cluster.system_pid("controller-manager") == before

    # The default class, waiting for a consumer.
    created = api.create("persistentvolumeclaims", claim("data"), "default")
    assert created["spec"]["storageClassName"] == "standard"
    uid = created["metadata"]["uid"]
    wait_for(lambda: ("WaitForFirstConsumer", "waiting for first consumer to be created before binding")
             in events(cluster, "data"), timeout=LONG, interval=0.2, message="the WaitForFirstConsumer event")
    assert phase(cluster, "persistentvolumeclaims", "data") == "Pending"
    assert cluster.call("list", "persistentvolumes")["items"][0]["metadata"]["name"] == "pv-manual"

    # The scheduler's choice, by hand; the controller-manager killed just then.
    api.patch("persistentvolumeclaims", "data", {"metadata": {"annotations": {SELECTED_NODE: "node-1"}}},
              "default")
    os.kill(cluster.system_pid("controller-manager"), signal.SIGKILL)
    wait_for(lambda: phase(cluster, "persistentvolumeclaims", "data") == "Bound"
             and phase(cluster, "persistentvolumes", f"pvc-{uid}", None) == "Bound",
             timeout=LONG * 2, interval=0.25, message="the provisioned volume and its claim Bound")
    volumes = [v["metadata"]["name"] for v in api.list("persistentvolumes")["items"]]
    assert sorted(volumes) == sorted(["pv-manual", f"pvc-{uid}"])
    made = api.get("persistentvolumes", f"pvc-{uid}")
    directory = cluster.dir / "nodes" / "node-1" / "local-path" / f"pvc-{uid}_default_data"
    assert made["spec"]["hostPath"] == {"path": str(directory), "type": "DirectoryOrCreate"}
    assert made["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"] == [
        {"key": "kubernetes.io/hostname", "operator": "In", "values": ["node-1"]}]
    assert made["spec"]["persistentVolumeReclaimPolicy"] == "Delete"
    assert made["metadata"]["annotations"]["pv.kubernetes.io/provisioned-by"] == "rancher.io/local-path"
    assert api.get("persistentvolumeclaims", "data", "default")["spec"]["volumeName"] == f"pvc-{uid}"
    assert not directory.exists()   # no pod mounted it: the kubelet makes it on the first mount
    directory.mkdir(parents=True)
    (directory / "data.txt").write_text("written by a pod")

    # Reclaim: Delete removes the volume and its directory; Retain keeps the volume Released.
    api.delete("persistentvolumeclaims", "data", "default")
    wait_for(lambda: gone(cluster, "persistentvolumes", f"pvc-{uid}"), timeout=LONG, interval=0.2,
             message="the provisioned volume deleted")
    assert not directory.exists() and directory.parent.is_dir()
    api.delete("persistentvolumeclaims", "manual", "default")
    wait_for(lambda: phase(cluster, "persistentvolumes", "pv-manual", None) == "Released",
             timeout=LONG, interval=0.2, message="the manual volume Released")
    assert phase(cluster, "persistentvolumeclaims", "nope") == "Pending"

    # In-use protection: a pod's claim outlives its deletion until the pod is gone.
    api.create("persistentvolumeclaims", claim("used"), "default")
    api.create("pods", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "user"},
                        "spec": {"terminationGracePeriodSeconds": 1, "containers": [{
                            "name": "main", "command": [sys.executable, "-c", "import time; time.sleep(10**6)"],
                            "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
                                 "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "used"}}]}},
               "default")
    wait_for(lambda: phase(cluster, "pods", "user") == "Running", timeout=LONG, interval=0.25,
             message="the pod using the claim Running")
    used = api.get("persistentvolumeclaims", "used", "default")
    assert used["metadata"]["finalizers"] == [PVC_PROTECTION]
    volume = used["spec"]["volumeName"]
    assert api.get("persistentvolumes", volume)["metadata"]["finalizers"] == ["kubernetes.io/pv-protection"]
    directory = Path(api.get("persistentvolumes", volume)["spec"]["hostPath"]["path"])
    assert directory.is_dir()   # made by the kubelet's mount
    api.delete("persistentvolumeclaims", "used", "default")
    assert api.get("persistentvolumeclaims", "used", "default")["metadata"].get("deletionTimestamp")
    # a claim no pod uses, deleted after it, goes: the (one-worker, in-order) controller has
    # looked at "used" by then, and kept it
    api.create("persistentvolumeclaims", claim("spare"), "default")
    api.delete("persistentvolumeclaims", "spare", "default")
    wait_for(lambda: gone(cluster, "persistentvolumeclaims", "spare", "default"), timeout=LONG, interval=0.2,
             message="the unused claim deleted")
    assert api.get("persistentvolumeclaims", "used", "default")["metadata"]["finalizers"] == [PVC_PROTECTION]
    assert phase(cluster, "persistentvolumes", volume, None) == "Bound" and directory.is_dir()
    api.delete("pods", "user", "default")
    wait_for(lambda: gone(cluster, "persistentvolumeclaims", "used", "default")
             and gone(cluster, "persistentvolumes", volume), timeout=LONG, interval=0.2, message="the claim and its volume deleted once the pod is gone")
    assert not directory.exists()
