"""The DefaultStorageClass admission plugin (plugin/pkg/admission/storage/storageclass/setdefault).

A PersistentVolumeClaim created without a class (no spec.storageClassName, no beta
`volume.beta.kubernetes.io/storage-class` annotation) gets the default StorageClass's name: the
class annotated `storageclass.kubernetes.io/is-default-class: "true"` (several: the newest, as
since 1.28; the rule is kubemu.api.storage.default_class). No default class: the claim keeps no
class. An explicit `storageClassName: ""` asks for no class and stays so; a class that does not
exist is accepted (the PV controller reports it on the claim).

    admit_claim(pvc, classes)      pure: sets the class on the (defaulted, validated) claim
    await admit(storage, pvc)      the handlers' hook: reads the classes from the store
"""
from __future__ import annotations

from collections.abc import Iterable

from kubemu.api.resources import registry_prefix
from kubemu.api.storage import BETA_CLASS_ANNOTATION, default_class

from .storage import Storage

PREFIX = registry_prefix("storageclasses")


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


async def admit(storage: Storage, pvc: dict) -> None:
    """Mutating admission of a claim being created (PVC creates are rare: the classes are read
    from the store each time rather than kept in a cache)."""
    spec = pvc.get("spec")
    if not isinstance(spec, dict) or spec.get("storageClassName") is not None:
        return
    items, _, _ = await storage.list(PREFIX)
    admit_claim(pvc, (obj for _, obj in items))
