"""components.controllers.pvcprotection: when the pvc-protection and pv-protection controllers
take their finalizer off (a Terminating claim no scheduled pod of its namespace names; a
Terminating volume not Bound) and when they put it back."""
from __future__ import annotations

from components.controllers import PatchObject, RemoveFinalizer
from components.controllers.pvcprotection import (claim_users, needs_sync, pod_uses_claim,
                                                  sync_claim, sync_volume)

PVC_FINALIZER = "kubernetes.io/pvc-protection"
PV_FINALIZER = "kubernetes.io/pv-protection"
DELETED = "2026-11-26T10:00:00Z"


def claim(name="data", finalizers=(PVC_FINALIZER,), deleting=True):
    m = {"name": name, "namespace": "db", "uid": f"uid-{name}", "resourceVersion": "7",
         "finalizers": list(finalizers)}
    if deleting:
        m["deletionTimestamp"] = DELETED
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": m, "spec": {}}


def pod(name="p", claim_name="data", node="node-1", phase="Running", namespace="db"):
    spec = {"volumes": [{"name": "cfg", "configMap": {"name": "c"}},
                        {"name": "v", "persistentVolumeClaim": {"claimName": claim_name}}]}
    if node:
        spec["nodeName"] = node
    return {"metadata": {"name": name, "namespace": namespace}, "spec": spec, "status": {"phase": phase}}


def volume(phase="Released", finalizers=(PV_FINALIZER,), deleting=True):
    m = {"name": "pv1", "uid": "uid-pv1", "resourceVersion": "4", "finalizers": list(finalizers)}
    if deleting:
        m["deletionTimestamp"] = DELETED
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": m, "spec": {},
            "status": {"phase": phase}}


def test_a_terminating_claim_is_kept_while_a_scheduled_pod_names_it():
    users = [pod("a"), pod("done", phase="Succeeded")]
    assert claim_users(claim(), users) == ["a", "done"]   # upstream: whatever the pod's phase
    assert sync_claim(claim(), users) == []


def test_a_terminating_claim_no_pod_uses_loses_its_finalizer():
    others = [pod("unscheduled", node=None), pod("other-claim", claim_name="logs"),
              pod("other-namespace", namespace="web")]
    assert not any(pod_uses_claim(p, claim()) for p in others)
    removal = RemoveFinalizer("v1", "PersistentVolumeClaim", "db", "data", "uid-data", PVC_FINALIZER)
    assert sync_claim(claim(), others) == [removal]
    assert sync_claim(claim(), []) == [removal]


def test_the_finalizer_comes_back_on_a_claim_not_being_deleted():
    assert sync_claim(claim(finalizers=("example.com/x",), deleting=False), []) == [
        PatchObject("v1", "PersistentVolumeClaim", "db", "data", "uid-data",
                    {"metadata": {"finalizers": ["example.com/x", PVC_FINALIZER]}}, "7")]
    assert sync_claim(claim(deleting=False), [pod()]) == []
    # being deleted without it: another finalizer holds it, not ours to touch
    assert sync_claim(claim(finalizers=("example.com/x",)), []) == []


def test_a_terminating_volume_is_kept_while_bound():
    assert sync_volume(volume("Bound")) == []
    removal = RemoveFinalizer("v1", "PersistentVolume", None, "pv1", "uid-pv1", PV_FINALIZER)
    for phase in ("Released", "Available", "Failed", "Pending"):
        assert sync_volume(volume(phase)) == [removal], phase
    assert sync_volume(volume("Bound", finalizers=(), deleting=False)) == [
        PatchObject("v1", "PersistentVolume", None, "pv1", "uid-pv1",
                    {"metadata": {"finalizers": [PV_FINALIZER]}}, "4")]
    assert sync_volume(volume("Bound", deleting=False)) == []


def test_which_changes_concern_the_controllers():
    assert needs_sync(claim(), PVC_FINALIZER)                           # a deletion candidate
    assert needs_sync(claim(finalizers=(), deleting=False), PVC_FINALIZER)  # lacks the finalizer
    assert not needs_sync(claim(deleting=False), PVC_FINALIZER)
    assert not needs_sync(claim(finalizers=()), PVC_FINALIZER)
