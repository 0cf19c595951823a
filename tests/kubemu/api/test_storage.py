"""kubemu.api.storage: PersistentVolume, PersistentVolumeClaim and StorageClass as kube-apiserver
defaults and validates them (messages and field paths in Kubernetes' words), and the default
StorageClass rule."""
from __future__ import annotations

import copy

from kubemu.api.objects import default_object, validate_object, validate_object_update
from kubemu.api.storage import DEFAULT_CLASS_ANNOTATION, default_class


def pv(**spec) -> dict:
    base = {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
            "hostPath": {"path": "/srv/data"}}
    base.update(spec)
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv1"}, "spec": base}


def pvc(**spec) -> dict:
    base = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    base.update(spec)
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data"},
            "spec": base}


def sc(name="fast", **fields) -> dict:
    return {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": name},
            "provisioner": "rancher.io/local-path", **fields}


def errors(obj) -> list[str]:
    return [str(e) for e in validate_object(default_object(obj))]


def update_errors(old, new) -> list[str]:
    old, new = default_object(old), default_object(new)
    for o in (old, new):
        o["metadata"]["resourceVersion"] = "7"
    return [str(e) for e in validate_object_update(old, new)]


HOSTNAME_AFFINITY = {"required": {"nodeSelectorTerms": [{"matchExpressions": [
    {"key": "kubernetes.io/hostname", "operator": "In", "values": ["node-1"]}]}]}}


# --- defaults ---

def test_defaults():
    v = default_object(pv())
    assert v["spec"]["persistentVolumeReclaimPolicy"] == "Retain"
    assert v["spec"]["volumeMode"] == "Filesystem"
    assert v["status"] == {"phase": "Pending"}
    assert "namespace" not in v["metadata"]
    c = default_object(pvc())
    assert c["spec"]["volumeMode"] == "Filesystem" and c["status"] == {"phase": "Pending"}
    assert "storageClassName" not in c["spec"]   # the admission's, not defaulting's
    assert c["metadata"]["namespace"] == "default"
    s = default_object(sc())
    assert (s["reclaimPolicy"], s["volumeBindingMode"]) == ("Delete", "Immediate")


def test_valid_objects_pass():
    assert errors(pv()) == []
    assert errors(pv(hostPath=None, local={"path": "/mnt/disk"}, nodeAffinity=HOSTNAME_AFFINITY,
                     persistentVolumeReclaimPolicy="Delete", storageClassName="standard")) == []
    assert errors(pvc(storageClassName="standard", selector={"matchLabels": {"a": "b"}})) == []
    assert errors(sc(volumeBindingMode="WaitForFirstConsumer", reclaimPolicy="Retain",
                     parameters={"a": "b"})) == []


# --- PersistentVolume ---

def test_pv_needs_access_modes_capacity_and_a_source():
    bare = {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv1"}, "spec": {}}
    assert errors(bare) == [
        "spec.accessModes: Required value",
        "spec.capacity: Required value",
        'spec.capacity: Unsupported value: {}: supported values: "storage"',
        "spec: Required value: must specify a volume type",
    ]


def test_pv_access_modes_capacity_and_policy():
    assert errors(pv(accessModes=["ReadWriteSome"])) == [
        'spec.accessModes: Unsupported value: "ReadWriteSome": supported values: "ReadOnlyMany", '
        '"ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod"']
    assert errors(pv(accessModes=["ReadWriteOncePod", "ReadOnlyMany"])) == [
        "spec.accessModes: Forbidden: may not use ReadWriteOncePod with other access modes"]
    assert errors(pv(capacity={"storage": "0"})) == [
        'spec.capacity[storage]: Invalid value: "0": must be greater than zero']
    assert errors(pv(capacity={"storage": "1Gi", "cpu": "1"}))[0].startswith(
        "spec.capacity: Unsupported value: ")
    assert errors(pv(persistentVolumeReclaimPolicy="Keep")) == [
        'spec.persistentVolumeReclaimPolicy: Unsupported value: "Keep": supported values: '
        '"Delete", "Recycle", "Retain"']
    assert errors(pv(volumeMode="Raw")) == [
        'spec.volumeMode: Unsupported value: "Raw": supported values: "Block", "Filesystem"']
    assert errors(pv(hostPath={"path": "/"}, persistentVolumeReclaimPolicy="Recycle")) == [
        "spec.persistentVolumeReclaimPolicy: Forbidden: may not be 'recycle' for a hostPath mount of '/'"]
    assert errors(pv(storageClassName="Fast_Disks"))[0].startswith(
        'spec.storageClassName: Invalid value: "Fast_Disks": a lowercase RFC 1123 subdomain')


def test_pv_sources_kubemu_cannot_mount_are_forbidden():
    assert errors(pv(hostPath=None, nfs={"server": "nas", "path": "/x"})) == [
        "spec.nfs: Forbidden: kubemu mounts hostPath and local persistent volumes only"]
    assert errors(pv(local={"path": "/mnt"}, nodeAffinity=HOSTNAME_AFFINITY)) == [
        "spec.local: Forbidden: may not specify more than 1 volume type"]
    assert errors(pv(hostPath={"path": "/a/../b"})) == [
        'spec.hostPath.path: Invalid value: "/a/../b": must not contain \'..\'']


def test_local_pv_needs_node_affinity():
    assert errors(pv(hostPath=None, local={"path": "/mnt/disk"})) == [
        "spec.nodeAffinity: Required value: Local volume requires node affinity"]
    assert errors(pv(hostPath=None, local={}, nodeAffinity=HOSTNAME_AFFINITY)) == [
        "spec.local.path: Required value"]


def test_node_affinity_is_a_node_selector():
    assert errors(pv(nodeAffinity={})) == [
        "spec.nodeAffinity.required: Required value: must specify required node constraints"]
    assert errors(pv(nodeAffinity={"required": {"nodeSelectorTerms": []}})) == [
        "spec.nodeAffinity.required.nodeSelectorTerms: Required value: must have at least one node "
        "selector term"]
    term = {"matchExpressions": [{"key": "zone", "operator": "In"},
                                 {"key": "disk", "operator": "Exists", "values": ["ssd"]},
                                 {"key": "rank", "operator": "Gt", "values": ["1", "2"]},
                                 {"key": "x", "operator": "Near", "values": ["1"]}],
            "matchFields": [{"key": "metadata.uid", "operator": "In", "values": ["a", "b"]}]}
    assert errors(pv(nodeAffinity={"required": {"nodeSelectorTerms": [term]}})) == [
        "spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[0].values: Required value: "
        "must be specified when `operator` is 'In' or 'NotIn'",
        "spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[1].values: Forbidden: "
        "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
        "spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[2].values: Required value: "
        "must be specified single value when `operator` is 'Lt' or 'Gt'",
        'spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[3].operator: Invalid value: '
        '"Near": not a valid selector operator',
        'spec.nodeAffinity.required.nodeSelectorTerms[0].matchFields[0].key: Unsupported value: '
        '"metadata.uid": supported values: "metadata.name"',
        "spec.nodeAffinity.required.nodeSelectorTerms[0].matchFields[0].values: Required value: "
        "must be only one value when `operator` is 'In' or 'NotIn' for node field selector",
    ]


def test_pv_update_keeps_source_mode_and_affinity():
    old = pv(nodeAffinity=HOSTNAME_AFFINITY)
    moved = copy.deepcopy(old)
    moved["spec"]["hostPath"]["path"] = "/srv/other"
    assert update_errors(old, moved) == [
        "spec.persistentvolumesource: Forbidden: spec.persistentvolumesource is immutable after creation"]
    block = copy.deepcopy(old)
    block["spec"]["volumeMode"] = "Block"
    assert update_errors(old, block) == ['volumeMode: Invalid value: "Block": field is immutable']
    elsewhere = copy.deepcopy(old)
    elsewhere["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] = ["n2"]
    assert update_errors(old, elsewhere)[0].startswith(
        "nodeAffinity: Invalid value: ")
    assert update_errors(old, elsewhere)[0].endswith(
        "field is immutable, except for updating from beta label to GA")
    # what the PV controller changes: claimRef, the policy, the class; and nodeAffinity once unset
    bound = copy.deepcopy(old)
    bound["spec"]["claimRef"] = {"kind": "PersistentVolumeClaim", "namespace": "default", "name": "data"}
    bound["spec"]["persistentVolumeReclaimPolicy"] = "Delete"
    assert update_errors(old, bound) == []
    assert update_errors(pv(), pv(nodeAffinity=HOSTNAME_AFFINITY)) == []


# --- PersistentVolumeClaim ---

def test_pvc_needs_access_modes_and_a_storage_request():
    bare = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data"},
            "spec": {}}
    assert errors(bare) == [
        "spec.accessModes: Required value: at least 1 access mode is required",
        "spec.resources[storage]: Required value",
    ]
    assert errors(pvc(resources={"requests": {"storage": "0"}})) == [
        'spec.resources[storage]: Invalid value: "0": must be greater than zero']
    assert errors(pvc(resources={"requests": {"storage": "lots"}}))[0].startswith(
        'spec.resources[storage]: Invalid value: "lots": quantities must match the regular expression')
    assert errors(pvc(accessModes=["ReadWriteOncePod", "ReadWriteOnce"])) == [
        "spec.accessModes: Forbidden: may not use ReadWriteOncePod with other access modes"]
    assert errors(pvc(selector={"matchExpressions": [{"key": "a", "operator": "In"}]})) == [
        "spec.selector.matchExpressions[0].values: Required value: must be specified when "
        "`operator` is 'In' or 'NotIn'"]
    assert errors(pvc(volumeMode="Raw")) == [
        'spec.volumeMode: Unsupported value: "Raw": supported values: "Block", "Filesystem"']
    assert errors(pvc(storageClassName="")) == []   # "" asks for no class


def bound(claim: dict, volume_name: str = "pv1") -> dict:
    out = copy.deepcopy(claim)
    out["spec"]["volumeName"] = volume_name
    out["status"] = {"phase": "Bound", "capacity": {"storage": "1Gi"}}
    return out


def test_pvc_spec_is_immutable_but_for_binding_and_expansion():
    old = pvc(storageClassName="standard")
    assert update_errors(old, bound(old)) == []                  # volumeName from "": the binder
    rebound = bound(old, "pv2")
    assert update_errors(bound(old), rebound) == [
        "spec: Forbidden: spec is immutable after creation except resources.requests and "
        "volumeAttributesClassName for bound claims"]
    bigger = copy.deepcopy(old)
    bigger["spec"]["resources"]["requests"]["storage"] = "2Gi"
    assert update_errors(old, bigger) == [                       # unbound: no expansion
        "spec: Forbidden: spec is immutable after creation except resources.requests and "
        "volumeAttributesClassName for bound claims"]
    assert update_errors(bound(old), bound(bigger)) == []
    smaller = bound(old)
    smaller["spec"]["resources"]["requests"]["storage"] = "512Mi"
    assert update_errors(bound(bigger), smaller) == [
        "spec.resources.requests.storage: Forbidden: field can not be less than status.capacity"]
    other_modes = pvc(storageClassName="standard", accessModes=["ReadOnlyMany"])
    assert update_errors(old, other_modes) == [
        "spec: Forbidden: spec is immutable after creation except resources.requests and "
        "volumeAttributesClassName for bound claims"]
    assert update_errors(pvc(), pvc(storageClassName="standard")) == []   # retroactive default
    assert update_errors(old, pvc(storageClassName="other"))[0].startswith("spec: Forbidden")


# --- StorageClass ---

def test_storageclass_validation():
    assert errors({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                   "metadata": {"name": "x"}}) == ["provisioner: Required value"]
    assert errors(sc(provisioner="not a name!"))[0].startswith(
        'provisioner: Invalid value: "not a name!": name part must consist of alphanumeric characters')
    assert errors(sc(reclaimPolicy="Recycle")) == [
        'reclaimPolicy: Unsupported value: "Recycle": supported values: "Delete", "Retain"']
    assert errors(sc(volumeBindingMode="Later")) == [
        'volumeBindingMode: Unsupported value: "Later": supported values: "Immediate", '
        '"WaitForFirstConsumer"']
    assert errors(sc(parameters={"": "x"})) == ['parameters: Invalid value: "": field can not be empty.']
    assert errors(sc(parameters={str(i): "v" for i in range(513)})) == [
        "parameters: Too long: may not be more than 512 bytes"]


def test_storageclass_update():
    old = sc(parameters={"a": "b"})
    new = sc(parameters={"a": "c"}, provisioner="example.com/other", reclaimPolicy="Retain",
             volumeBindingMode="WaitForFirstConsumer", allowVolumeExpansion=True)
    assert update_errors(old, new) == [
        "parameters: Forbidden: updates to parameters are forbidden.",
        "provisioner: Forbidden: updates to provisioner are forbidden.",
        "reclaimPolicy: Forbidden: updates to reclaimPolicy are forbidden.",
        'volumeBindingMode: Invalid value: "WaitForFirstConsumer": field is immutable',
    ]
    assert update_errors(old, {**old, "allowVolumeExpansion": True}) == []


# --- the default class ---

def test_default_class_is_the_newest_marked_one():
    def marked(name, created, value="true"):
        s = sc(name)
        s["metadata"].update(creationTimestamp=created, annotations={DEFAULT_CLASS_ANNOTATION: value})
        return s
    old, new = marked("old", "2026-01-01T00:00:00Z"), marked("new", "2026-02-01T00:00:00Z")
    assert default_class([old, new, sc("plain")])["metadata"]["name"] == "new"
    twin = marked("a-twin", "2026-02-01T00:00:00Z")
    assert default_class([new, twin])["metadata"]["name"] == "a-twin"   # a tie: by name
    assert default_class([marked("no", "2026-03-01T00:00:00Z", "True"), sc("plain")]) is None
    beta = sc("beta")
    beta["metadata"]["annotations"] = {"storageclass.beta.kubernetes.io/is-default-class": "true"}
    assert default_class([beta]) is beta
