"""kubemu.kubectl.describe_storage: kubectl describe persistentvolumeclaim / persistentvolume."""
from __future__ import annotations

from kubemu.kubectl.describe import Related, describe

from .test_printers import NOW, ago, pod


def claim(**spec) -> dict:
    return {"kind": "PersistentVolumeClaim",
            "metadata": {"name": "data-web-0", "namespace": "default", "finalizers": ["kubernetes.io/pvc-protection"]},
            "spec": {"storageClassName": "standard", "accessModes": ["ReadWriteOnce"],
                     "resources": {"requests": {"storage": "1Gi"}}, **spec},
            "status": {"phase": "Pending"}}


def test_pvc_describe_reads_like_kubectl():
    pvc = claim(volumeName="pvc-1", volumeMode="Filesystem")
    pvc["status"] = {"phase": "Bound", "capacity": {"storage": "2Gi"}, "accessModes": ["ReadWriteOnce"]}
    user = dict(pod("web-0"), spec={"containers": [], "volumes": [
        {"name": "data", "persistentVolumeClaim": {"claimName": "data-web-0"}}]})
    assert describe(pvc, Related(events=[], pods=[user, pod("other")]), NOW) == """Name:          data-web-0
Namespace:     default
StorageClass:  standard
Status:        Bound
Volume:        pvc-1
Labels:        <none>
Annotations:   <none>
Finalizers:    [kubernetes.io/pvc-protection]
Capacity:      2Gi
Access Modes:  RWO
VolumeMode:    Filesystem
Used By:       web-0
Events:        <none>
"""


def test_pending_and_terminating_pvc():
    text = describe(claim(), Related(events=None, pods=[pod("other")]), NOW)
    assert "Status:        Pending\nVolume:        \n" in text
    assert "Capacity:      \nAccess Modes:  \nUsed By:       <none>\n" in text
    deleting = claim()
    deleting["metadata"]["deletionTimestamp"] = ago(90)
    assert "Status:        Terminating (lasts 90s)\n" in describe(deleting, Related(), NOW)


def test_pv_describe_reads_like_kubectl():
    pv = {"kind": "PersistentVolume", "metadata": {"name": "pvc-1"},
          "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                   "persistentVolumeReclaimPolicy": "Delete", "storageClassName": "standard",
                   "claimRef": {"namespace": "default", "name": "data-web-0"}, "volumeMode": "Filesystem",
                   "hostPath": {"path": "/var/x", "type": "DirectoryOrCreate"},
                   "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                       {"key": "kubernetes.io/hostname", "operator": "In", "values": ["node-1"]},
                       {"key": "zone", "operator": "Exists"}]}]}}},
          "status": {"phase": "Bound"}}
    assert describe(pv, Related(events=[]), NOW) == """Name:              pvc-1
Labels:            <none>
Annotations:       <none>
Finalizers:        []
StorageClass:      standard
Status:            Bound
Claim:             default/data-web-0
Reclaim Policy:    Delete
Access Modes:      RWO
VolumeMode:        Filesystem
Capacity:          1Gi
Node Affinity:     
  Required Terms:  
    Term 0:        kubernetes.io/hostname in [node-1]
                   zone exists
Message:           
Source:
    Type:          HostPath (bare host directory volume)
    Path:          /var/x
    HostPathType:  DirectoryOrCreate
Events:            <none>
"""
    del pv["spec"]["nodeAffinity"], pv["spec"]["claimRef"]
    text = describe(pv, Related(), NOW)
    assert "Claim:           \n" in text and "Node Affinity:   <none>\n" in text
