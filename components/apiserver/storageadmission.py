"""The storage admission plugins of a create: DefaultStorageClass
(plugin/pkg/admission/storage/storageclass/setdefault) and StorageObjectInUseProtection
(plugin/pkg/admission/storage/storageobjectinuseprotection).

StorageObjectInUseProtection: a PersistentVolumeClaim gets the finalizer
`kubernetes.io/pvc-protection`, a PersistentVolume `kubernetes.io/pv-protection` (once): deleting
one leaves it Terminating until the pvc-protection controller sees no pod using the claim / the
pv-protection controller sees the volume no longer Bound, and takes the finalizer off.

DefaultStorageClass:

A PersistentVolumeClaim created without a class (no spec.storageClassName, no beta
`volume.beta.kubernetes.io/storage-class` annotation) gets the default StorageClass's name: the
class annotated `storageclass.kubernetes.io/is-default-class: "true"` (several: the newest, as
since 1.28; the rule is kubemu.api.storage.default_class). No default class: the claim keeps no
class. An explicit `storageClassName: ""` asks for no class and stays so; a class that does not
exist is accepted (the PV controller reports it on the claim).

    protect(obj)                   pure: the in-use protection finalizer of a claim or volume
    admit_claim(pvc, classes)      pure: sets the class on the (defaulted, validated) claim
    await admit(storage, obj)      the handlers' hook for claims and volumes (reads the classes
                                   from the store)
"""
from __future__ import annotations

from collections.abc import Iterable

from kubemu.api.resources import registry_prefix
from kubemu.api.storage import (BETA_CLASS_ANNOTATION, PV_PROTECTION_FINALIZER,
                                PVC_PROTECTION_FINALIZER, default_class)

from .storage import Storage

PREFIX = registry_prefix("storageclasses")
FINALIZERS = {"PersistentVolumeClaim": PVC_PROTECTION_FINALIZER,
              "PersistentVolume": PV_PROTECTION_FINALIZER}


def protect(obj: dict) -> None:
    """Add the kind's protection finalizer to the (defaulted, validated) object, if absent."""
    finalizer = FINALIZERS[obj["kind"]]
    meta = obj["metadata"]
    finalizers = meta.get("finalizers") or []
    if finalizer not in finalizers:
        meta["finalizers"] = [*finalizers, finalizer]


def admit_claim(pvc: dict, classes: Iterable[dict]) -> None:
    spec = pvc.get("spec")
    meta = pvc.get("metadata") if isinstance(pvc.get("metadata"), dict) else {}
    annotations = meta.get("annotations") if isinstance(meta.get("annotations"), dict) else {}
    if not isinstance(spec, dict) or spec.get("storageClassName") is not None \
            or BETA_CLASS_ANNOTATION in annotations:
        return
    chosen = default_class(classes)
    if chosen is not None:
        spec["storageClassName"] = chosen["metadata"]["name"]


async def admit(storage: Storage, obj: dict) -> None:
    """Mutating admission of a claim or volume being created (PVC creates are rare: the classes
    are read from the store each time rather than kept in a cache)."""
    protect(obj)
    spec = obj.get("spec")
    if obj["kind"] != "PersistentVolumeClaim" or not isinstance(spec, dict) \
            or spec.get("storageClassName") is not None:
        return
    items, _, _ = await storage.list(PREFIX)
    admit_claim(obj, (item for _, item in items))
