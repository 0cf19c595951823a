"""The local-path provisioner (rancher's local-path-provisioner, which kind ships, behind its
default StorageClass `standard`): pure decisions over cached objects.

    sync_claim(claim, classes, volumes, dir_template)  -> [Action]     provisioning
    sync_volume(volume, dir_template)                  -> Deletion | None  reclaim Delete

Provisioning, as sig-storage-lib-external-provisioner decides it: a claim with no volumeName
whose `volume.kubernetes.io/storage-provisioner` (set by the PV controller) is
`rancher.io/local-path`, of an existing class of that provisioner, gets the PersistentVolume
`pvc-<claim uid>`: a `hostPath` (DirectoryOrCreate) `<dir_template, {node} replaced by N>/pvc-<uid>_<ns>_<claim>`
on the node N the scheduler chose (`volume.kubernetes.io/selected-node`), node affinity
`kubernetes.io/hostname In [N]`, the claim's request as capacity, its access modes and volume
mode, the class's reclaim policy and mount options, a claimRef with the claim's uid (the PV
controller then binds the two), `pv.kubernetes.io/provisioned-by: rancher.io/local-path`.
The directory itself is made by the kubelet that first mounts it (DirectoryOrCreate): a volume no
pod ever mounted has none. Refused, with a ProvisioningFailed event as local-path words it: a
claim with a selector, an access mode other than ReadWriteOnce/ReadWriteOncePod, no selected
node (an Immediate class: local-path needs the consumer's node), a selected node that is not a
node name (it would name a directory elsewhere).

Deletion: a volume of this provisioner that is Released with policy Delete is deleted; first its
directory is removed, but only the one this provisioner would have made for it: the path must be
exactly `<the node's root>/pvc-<uid>_<ns>_<claim>` for the volume's own node, claim and name
`pvc-<uid>` (a hand-made volume carrying the annotation keeps its directory), the node a valid
node name. The shell removes it (guarded again against symlinks on the way) and then deletes the
object.
"""
from __future__ import annotations

import copy
import posixpath
from collections.abc import Mapping
from dataclasses import dataclass

from kubemu.api.pod import dns1123_subdomain_errors
from kubemu.api.storage import storage_class_of, storage_request

from . import CreateObject, DeleteObject, RecordEvent
from .persistentvolume import (ANN_BETA_STORAGE_PROVISIONER, ANN_PROVISIONED_BY, ANN_SELECTED_NODE,
                               ANN_STORAGE_PROVISIONER, RELEASED)
from .podutil import meta

PROVISIONER = "rancher.io/local-path"
HOSTNAME_LABEL = "kubernetes.io/hostname"
SUPPORTED_ACCESS_MODES = ("ReadWriteOnce", "ReadWriteOncePod")
NODE_PLACEHOLDER = "{node}"


@dataclass(frozen=True)
class Deletion:
    """Reclaiming a Released volume: remove `directory` (None: leave the disk alone), then run
    `actions` (the volume's delete)."""
    directory: str | None
    actions: list


def volume_name(claim: dict) -> str:
    return f"pvc-{meta(claim).get('uid')}"


def valid_node_name(node) -> bool:
    """A node's name is a DNS-1123 subdomain: no "/", no "..": it can only name one directory
    under the template's prefix."""
    return isinstance(node, str) and not dns1123_subdomain_errors(node)


def node_root(dir_template: str, node: str) -> str:
    """The template with its `{node}` placeholder filled (a plain replace: the rest of the path,
    a state directory, may hold braces of its own)."""
    return dir_template.replace(NODE_PLACEHOLDER, node)


def template_parts(dir_template: str) -> tuple[str, str]:
    """(the template before its first `{node}`, the part after it): the directory kubemu made
    the node roots in, and the path from a node's directory to its root."""
    prefix, _, rest = dir_template.partition(NODE_PLACEHOLDER)
    return prefix, rest


def volume_directory(dir_template: str, node: str, namespace: str, claim_name: str, uid: str) -> str:
    return posixpath.join(node_root(dir_template, node), f"pvc-{uid}_{namespace}_{claim_name}")


def _annotations(obj: dict) -> dict:
    annotations = meta(obj).get("annotations")
    return annotations if isinstance(annotations, dict) else {}


def _ours(claim: dict) -> bool:
    annotations = _annotations(claim)
    return PROVISIONER in (annotations.get(ANN_STORAGE_PROVISIONER), annotations.get(ANN_BETA_STORAGE_PROVISIONER))


def _failed(claim: dict, class_name: str, why: str) -> list:
    m = meta(claim)
    return [RecordEvent(m.get("namespace"), "PersistentVolumeClaim", m.get("name"), "Warning",
                        "ProvisioningFailed",
                        f'failed to provision volume with StorageClass "{class_name}": {why}')]


def sync_claim(claim: dict, classes: Mapping[str, dict], volumes: Mapping[str, dict],
               dir_template: str) -> list:
    spec = claim.get("spec") if isinstance(claim.get("spec"), dict) else {}
    m = meta(claim)
    if spec.get("volumeName") or m.get("deletionTimestamp") or not _ours(claim):
        return []
    name = volume_name(claim)
    if name in volumes:
        return []   # provisioned already: the PV controller binds it
    class_name = storage_class_of(claim)
    klass = classes.get(class_name)
    if klass is None or klass.get("provisioner") != PROVISIONER:
        return []   # the PV controller reports a missing class
    if spec.get("selector") is not None:
        return _failed(claim, class_name, "claim.Spec.Selector is not supported")
    modes = spec.get("accessModes") if isinstance(spec.get("accessModes"), list) else []
    if any(mode not in SUPPORTED_ACCESS_MODES for mode in modes):
        return _failed(claim, class_name,
                       "NodePath only supports ReadWriteOnce and ReadWriteOncePod (1.22+) access modes")
    node = _annotations(claim).get(ANN_SELECTED_NODE)
    if not node:
        return _failed(claim, class_name, "configuration error, no node was specified")
    if not valid_node_name(node):
        return _failed(claim, class_name, f'configuration error, invalid node name "{node}"')
    namespace = m.get("namespace") or "default"
    path = volume_directory(dir_template, node, namespace, m.get("name"), m.get("uid"))
    volume_spec = {
        "capacity": {"storage": storage_request(claim)},
        "accessModes": list(modes),
        "persistentVolumeReclaimPolicy": klass.get("reclaimPolicy") or "Delete",
        "storageClassName": class_name,
        "volumeMode": spec.get("volumeMode") or "Filesystem",
        "claimRef": {"kind": "PersistentVolumeClaim", "namespace": namespace, "name": m.get("name"),
                     "uid": m.get("uid"), "apiVersion": "v1", "resourceVersion": m.get("resourceVersion")},
        "hostPath": {"path": path, "type": "DirectoryOrCreate"},
        "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": HOSTNAME_LABEL, "operator": "In", "values": [node]}]}]}},
    }
    if klass.get("mountOptions"):
        volume_spec["mountOptions"] = copy.deepcopy(klass["mountOptions"])
    volume = {"apiVersion": "v1", "kind": "PersistentVolume",
              "metadata": {"name": name, "annotations": {ANN_PROVISIONED_BY: PROVISIONER}},
              "spec": volume_spec}
    key = f"{namespace}/{m.get('name')}"
    return [RecordEvent(namespace, "PersistentVolumeClaim", m.get("name"), "Normal", "Provisioning",
                        f'External provisioner is provisioning volume for claim "{key}"'),
            CreateObject(None, volume),
            RecordEvent(namespace, "PersistentVolumeClaim", m.get("name"), "Normal",
                        "ProvisioningSucceeded", f"Successfully provisioned volume {name}")]


def volume_node(volume: dict) -> str | None:
    """The node of a volume this provisioner made: its one `kubernetes.io/hostname In [N]`, if N
    is a valid node name (None otherwise: such a volume's path is not one kubemu made)."""
    spec = volume.get("spec") if isinstance(volume.get("spec"), dict) else {}
    terms = (((spec.get("nodeAffinity") or {}).get("required") or {}).get("nodeSelectorTerms") or [])
    for term in terms if isinstance(terms, list) else []:
        for expr in (term.get("matchExpressions") or []) if isinstance(term, dict) else []:
            if isinstance(expr, dict) and expr.get("key") == HOSTNAME_LABEL and expr.get("operator") == "In" \
                    and isinstance(expr.get("values"), list) and len(expr["values"]) == 1:
                return expr["values"][0] if valid_node_name(expr["values"][0]) else None
    return None


def owned_directory(volume: dict, dir_template: str) -> str | None:
    """The directory to remove with `volume`: its hostPath, if it is exactly the one this
    provisioner makes for the volume's node, claim and name; else None."""
    spec = volume.get("spec") if isinstance(volume.get("spec"), dict) else {}
    ref = spec.get("claimRef") if isinstance(spec.get("claimRef"), dict) else {}
    path = (spec.get("hostPath") or {}).get("path") if isinstance(spec.get("hostPath"), dict) else None
    node, uid = volume_node(volume), ref.get("uid")
    if not (node and uid and isinstance(path, str) and meta(volume).get("name") == f"pvc-{uid}"):
        return None
    want = volume_directory(dir_template, node, ref.get("namespace") or "default", ref.get("name"), uid)
    return path if path == want else None


def sync_volume(volume: dict, dir_template: str) -> Deletion | None:
    spec = volume.get("spec") if isinstance(volume.get("spec"), dict) else {}
    status = volume.get("status") if isinstance(volume.get("status"), dict) else {}
    m = meta(volume)
    if _annotations(volume).get(ANN_PROVISIONED_BY) != PROVISIONER or m.get("deletionTimestamp"):
        return None
    if status.get("phase") != RELEASED or spec.get("persistentVolumeReclaimPolicy") != "Delete":
        return None
    return Deletion(owned_directory(volume, dir_template),
                    [DeleteObject("v1", "PersistentVolume", None, m.get("name"), m.get("uid"))])
