"""components.controllers.persistentvolume: the PV binder's syncClaim/syncVolume as pure
functions, run against a small in-memory world that applies their actions (the binder has no
timers: its only clock is the shell's periodic resync)."""
from __future__ import annotations

import copy

from components.controllers import RecordEvent, UpdateObject, UpdateStatus
from components.controllers.persistentvolume import (ANN_BIND_COMPLETED, ANN_BOUND_BY_CONTROLLER,
                                                     ANN_PROVISIONED_BY, ANN_SELECTED_NODE,
                                                     ANN_STORAGE_PROVISIONER, ConfirmClaim, find_best_match,
                                                     sync_claim, sync_volume)
from kubemu.api.storage import DEFAULT_CLASS_ANNOTATION


def klass(name="standard", mode="Immediate", provisioner="rancher.io/local-path", default=False):
    meta = {"name": name, "creationTimestamp": "2026-01-01T00:00:00Z"}
    if default:
        meta["annotations"] = {DEFAULT_CLASS_ANNOTATION: "true"}
    return {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": meta,
            "provisioner": provisioner, "reclaimPolicy": "Delete", "volumeBindingMode": mode}


def claim(name="data", size="1Gi", modes=("ReadWriteOnce",), cls="standard", **spec):
    s = {"accessModes": list(modes), "resources": {"requests": {"storage": size}},
         "volumeMode": "Filesystem", **spec}
    if cls is not None:
        s["storageClassName"] = cls
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}", "resourceVersion": "5"},
            "spec": s, "status": {"phase": "Pending"}}


def volume(name="pv1", size="1Gi", modes=("ReadWriteOnce",), cls="standard", phase="Available",
           policy="Retain", labels=None, **spec):
    s = {"capacity": {"storage": size}, "accessModes": list(modes), "hostPath": {"path": f"/srv/{name}"},
         "persistentVolumeReclaimPolicy": policy, "volumeMode": "Filesystem", **spec}
    if cls:
        s["storageClassName"] = cls
    meta = {"name": name, "uid": f"uid-{name}", "resourceVersion": "3"}
    if labels:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": meta, "spec": s,
            "status": {"phase": phase}}


class World:
    """The API's state as the actions leave it, and the events recorded."""

    def __init__(self, claims=(), volumes=(), classes=()):
        self.claims = {c["metadata"]["name"]: c for c in claims}
        self.volumes = {v["metadata"]["name"]: v for v in volumes}
        self.classes = {c["metadata"]["name"]: c for c in classes}
        self.events: list[tuple[str, str, str]] = []

    def apply(self, actions):
        for a in actions:
            if isinstance(a, RecordEvent):
                self.events.append((a.name, a.reason, a.message))
            elif isinstance(a, UpdateObject):
                table = self.volumes if a.object["kind"] == "PersistentVolume" else self.claims
                table[a.object["metadata"]["name"]] = copy.deepcopy(a.object)
            elif isinstance(a, UpdateStatus):
                table = self.volumes if a.kind == "PersistentVolume" else self.claims
                table[a.name]["status"] = copy.deepcopy(a.status)
            else:
                raise AssertionError(a)
        return actions

    def sync_claim(self, name="data"):
        return self.apply(sync_claim(self.claims[name], self.volumes, self.classes))

    def sync_volume(self, name="pv1", api_claims=None):
        """As the shell does: a claim missing from the cache is asked of the API (`api_claims`,
        by default the cache's)."""
        v = self.volumes[name]
        ref = v["spec"].get("claimRef")
        c = self.claims.get(ref["name"]) if ref else None
        actions = sync_volume(v, c)
        if actions and isinstance(actions[0], ConfirmClaim):
            assert actions == [ConfirmClaim("default", ref["name"])]
            actions = sync_volume(v, (self.claims if api_claims is None else api_claims).get(ref["name"]),
                                  from_api=True)
        return self.apply(actions)

    def writes(self, actions):
        return [a for a in actions if not isinstance(a, RecordEvent)]


def test_binds_an_available_volume_and_is_idempotent():
    w = World([claim()], [volume()], [klass()])
    w.sync_claim()
    pv, pvc = w.volumes["pv1"], w.claims["data"]
    assert pv["spec"]["claimRef"] == {"kind": "PersistentVolumeClaim", "namespace": "default", "name": "data",
                                      "uid": "uid-data", "apiVersion": "v1", "resourceVersion": "5"}
    assert pv["metadata"]["annotations"] == {ANN_BOUND_BY_CONTROLLER: "yes"}
    assert pv["status"] == {"phase": "Bound"}
    assert pvc["spec"]["volumeName"] == "pv1"
    assert pvc["metadata"]["annotations"] == {ANN_BOUND_BY_CONTROLLER: "yes", ANN_BIND_COMPLETED: "yes"}
    assert pvc["status"] == {"phase": "Bound", "accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"}}
    assert w.sync_claim() == [] and w.sync_volume() == [] and w.events == []


def test_a_crash_midway_is_finished_by_either_sync():
    w = World([claim()], [volume()], [klass()])
    first = sync_claim(w.claims["data"], w.volumes, w.classes)
    w.apply(first[:1])                      # only the volume's claimRef was written
    assert w.sync_volume() == [UpdateStatus("PersistentVolume", None, "pv1", {"phase": "Bound"})]
    w.sync_claim()
    assert w.claims["data"]["status"]["phase"] == "Bound" and w.sync_claim() == []


def test_the_best_match_is_the_smallest_with_the_fewest_access_modes():
    c = claim(size="2Gi")
    vols = [volume("small", size="1Gi"), volume("big", size="10Gi"), volume("fit", size="3Gi"),
            volume("rwx", size="2Gi", modes=("ReadWriteOnce", "ReadWriteMany")),
            volume("other-class", size="2Gi", cls="slow"), volume("released", size="2Gi", phase="Released"),
            volume("rox", size="2Gi", modes=("ReadOnlyMany",)),
            volume("block", size="2Gi", volumeMode="Block")]
    assert find_best_match(c, vols, False)["metadata"]["name"] == "fit"
    assert find_best_match(c, vols[:1] + vols[3:], False)["metadata"]["name"] == "rwx"
    labeled = claim(selector={"matchLabels": {"tier": "gold"}})
    assert find_best_match(labeled, [volume("a"), volume("b", labels={"tier": "gold"})],
                           False)["metadata"]["name"] == "b"
    assert find_best_match(c, vols, True) is None   # WaitForFirstConsumer: the scheduler's choice


def test_no_volume_and_no_class():
    w = World([claim(cls="")], [], [])
    w.sync_claim()
    assert w.events == [("data", "FailedBinding",
                         "no persistent volumes available for this claim and no storage class is set")]
    assert w.claims["data"]["status"] == {"phase": "Pending"}


def test_wait_for_first_consumer_then_external_provisioning():
    w = World([claim()], [], [klass(mode="WaitForFirstConsumer")])
    assert w.writes(w.sync_claim()) == []
    assert w.events == [("data", "WaitForFirstConsumer", "waiting for first consumer to be created before binding")]
    w.claims["data"]["metadata"]["annotations"] = {ANN_SELECTED_NODE: "node-1"}   # the scheduler
    w.events.clear()
    w.sync_claim()
    annotations = w.claims["data"]["metadata"]["annotations"]
    assert annotations[ANN_STORAGE_PROVISIONER] == "rancher.io/local-path"
    assert annotations["volume.beta.kubernetes.io/storage-provisioner"] == "rancher.io/local-path"
    assert w.events == [("data", "ExternalProvisioning",
                         "Waiting for a volume to be created either by the external provisioner "
                         "'rancher.io/local-path' or manually by the system administrator. If volume "
                         "creation is delayed, please verify that the provisioner is running and "
                         "correctly registered.")]
    assert w.writes(w.sync_claim()) == []           # annotated already: only the event again
    # the provisioner's volume, pre-bound with the claim's uid, is bound by the next syncs
    made = volume("pvc-uid-data", phase="Pending", policy="Delete",
                  claimRef={"kind": "PersistentVolumeClaim", "namespace": "default", "name": "data",
                            "uid": "uid-data"})
    made["metadata"]["annotations"] = {ANN_PROVISIONED_BY: "rancher.io/local-path"}
    w.volumes[made["metadata"]["name"]] = made
    w.sync_volume("pvc-uid-data")
    assert w.volumes["pvc-uid-data"]["status"]["phase"] == "Bound"
    w.sync_claim()
    assert w.claims["data"]["spec"]["volumeName"] == "pvc-uid-data"
    assert w.claims["data"]["status"]["phase"] == "Bound"
    assert ANN_BOUND_BY_CONTROLLER not in w.volumes["pvc-uid-data"]["metadata"]["annotations"]


def test_a_class_that_does_not_exist():
    w = World([claim(cls="nope")], [volume(cls="nope")], [klass()])
    w.volumes["pv1"]["spec"]["storageClassName"] = "other"
    w.sync_claim()
    assert w.events == [("data", "ProvisioningFailed", 'storageclass.storage.k8s.io "nope" not found')]
    assert w.claims["data"]["status"] == {"phase": "Pending"} and "annotations" not in w.claims["data"]["metadata"]
    in_tree = World([claim(cls="local")], [], [klass("local", provisioner="kubernetes.io/no-provisioner")])
    in_tree.sync_claim()
    assert in_tree.events == [("data", "ProvisioningFailed",
                               "no volume plugin matched name: kubernetes.io/no-provisioner")]


def test_a_claim_without_a_class_gets_the_default_retroactively():
    w = World([claim(cls=None)], [], [klass("standard", default=True)])
    assert w.writes(w.sync_claim()) == [UpdateObject("default", {**w.claims["data"]})]
    assert w.claims["data"]["spec"]["storageClassName"] == "standard"


def test_a_requested_volume():
    w = World([claim(volumeName="pv1", size="5Gi")], [volume()], [klass()])
    w.sync_claim()
    assert w.events == [("data", "VolumeMismatch", 'Cannot bind to requested volume "pv1": requested PV is too small')]
    w = World([claim(volumeName="pv1")], [volume()], [klass()])
    w.sync_claim()
    assert w.claims["data"]["status"]["phase"] == "Bound"
    # the claim named its volume (no bound-by-controller on it); the controller set the claimRef
    assert w.volumes["pv1"]["metadata"]["annotations"] == {ANN_BOUND_BY_CONTROLLER: "yes"}
    assert w.claims["data"]["metadata"]["annotations"] == {ANN_BIND_COMPLETED: "yes"}
    taken = volume(claimRef={"kind": "PersistentVolumeClaim", "namespace": "default", "name": "other", "uid": "u"})
    w = World([claim(volumeName="pv1")], [taken], [klass()])
    w.sync_claim()
    assert w.events == [("data", "FailedBinding", 'volume "pv1" already bound to a different claim.')]
    missing = World([claim(volumeName="pv9")], [], [klass()])
    assert missing.sync_claim() == []


def test_a_bound_claim_whose_volume_goes_is_lost():
    w = World([claim()], [volume()], [klass()])
    w.sync_claim()
    del w.volumes["pv1"]
    w.sync_claim()
    assert w.claims["data"]["status"] == {"phase": "Lost"}
    assert w.events == [("data", "ClaimLost", "Bound claim has lost its PersistentVolume. Data on the volume is lost!")]
    assert w.sync_claim() == []


def test_released_volumes_are_reclaimed_by_policy():
    for policy, phase, event in (
            ("Retain", "Released", None),
            ("Recycle", "Failed", ("pv1", "VolumeFailedRecycle", "No recycler plugin found for the volume!")),
            ("Delete", "Failed", ("pv1", "VolumeFailedDelete", 'error getting deleter volume plugin for volume '
                                  '"pv1": no deletable volume plugin matched'))):
        w = World([claim()], [volume(policy=policy)], [klass()])
        w.sync_claim()
        del w.claims["data"]
        w.sync_volume()
        assert w.volumes["pv1"]["status"]["phase"] == phase, policy
        assert w.events == ([event] if event else []), policy
        w.events.clear()
        assert w.sync_volume() == [], policy
    # an externally provisioned volume is left to its provisioner
    w = World([claim()], [volume(policy="Delete")], [klass()])
    w.volumes["pv1"]["metadata"]["annotations"] = {ANN_PROVISIONED_BY: "rancher.io/local-path"}
    w.sync_claim()
    del w.claims["data"]
    w.sync_volume()
    assert w.volumes["pv1"]["status"] == {"phase": "Released"} and w.events == []


def test_a_claim_missing_from_the_cache_is_asked_of_the_api_before_releasing():
    w = World([claim()], [volume(policy="Delete")], [klass()])
    w.sync_claim()
    in_api = dict(w.claims)
    del w.claims["data"]   # not cached (yet): the API has it
    assert w.sync_volume(api_claims=in_api) == []
    assert w.volumes["pv1"]["status"] == {"phase": "Bound"}
    # the cache has a namesake, the API the claim itself: still bound
    w.claims["data"] = claim()
    w.claims["data"]["metadata"]["uid"] = "uid-new"
    assert w.sync_volume(api_claims=in_api) == []
    # the API does not have it either: released (and, once Released, not asked again)
    w.sync_volume(api_claims={})
    assert w.volumes["pv1"]["status"]["phase"] == "Failed"
    assert sync_volume(w.volumes["pv1"], None) == []


def test_a_namesake_claim_does_not_inherit_the_volume():
    w = World([claim()], [volume()], [klass()])
    w.sync_claim()
    w.claims["data"] = claim()
    w.claims["data"]["metadata"]["uid"] = "uid-new"
    w.sync_volume()
    assert w.volumes["pv1"]["status"]["phase"] == "Released"


def test_volume_phases_without_claims():
    w = World([], [volume(phase="Pending")], [])
    w.sync_volume()
    assert w.volumes["pv1"]["status"] == {"phase": "Available"}
    reserved = volume(phase="Pending", claimRef={"kind": "PersistentVolumeClaim", "namespace": "default",
                                                 "name": "later"})
    w = World([], [reserved], [])
    w.sync_volume()
    assert w.volumes["pv1"]["status"] == {"phase": "Available"}


def test_a_volume_the_controller_chose_for_a_claim_bound_elsewhere_is_freed():
    w = World([claim()], [volume("a"), volume("b")], [klass()])
    w.sync_claim()
    bound_to = w.claims["data"]["spec"]["volumeName"]
    other = "b" if bound_to == "a" else "a"
    w.volumes[other]["spec"]["claimRef"] = copy.deepcopy(w.volumes[bound_to]["spec"]["claimRef"])
    w.volumes[other]["metadata"]["annotations"] = {ANN_BOUND_BY_CONTROLLER: "yes"}
    w.volumes[other]["status"] = {"phase": "Bound"}
    w.sync_volume(other)
    assert "claimRef" not in w.volumes[other]["spec"] and "annotations" not in w.volumes[other]["metadata"]
    assert w.volumes[other]["status"] == {"phase": "Available"}


def test_waiting_for_the_pods_that_use_the_claim_to_be_scheduled():
    def pod(name, claim_name="data", node=None, phase="Pending", namespace="default"):
        spec = {"volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": claim_name}}]}
        if node:
            spec["nodeName"] = node
        return {"metadata": {"name": name, "namespace": namespace}, "spec": spec, "status": {"phase": phase}}
    c = claim()
    classes = {"standard": klass(mode="WaitForFirstConsumer")}
    pods = [pod("b"), pod("other", claim_name="logs"), pod("placed", node="node-1"),
            pod("done", phase="Succeeded"), pod("elsewhere", namespace="kube-system")]
    (event,) = sync_claim(c, {}, classes, pods)
    assert (event.reason, event.message) == ("WaitForPodScheduled", "waiting for pod b to be scheduled")
    (event,) = sync_claim(c, {}, classes, pods + [pod("a")])
    assert (event.reason, event.message) == ("WaitForPodScheduled", "waiting for pods a,b to be scheduled")
