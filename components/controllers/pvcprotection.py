"""The in-use protection controllers (pkg/controller/volume/pvcprotection and pvprotection):
pure decisions on one claim or volume, returning actions.

    sync_claim(claim, pods)  -> [Action]     pvc-protection
    sync_volume(volume)      -> [Action]     pv-protection

The StorageObjectInUseProtection admission puts `kubernetes.io/pvc-protection` on every claim and
`kubernetes.io/pv-protection` on every volume, so deleting one only marks it Terminating:

* a Terminating claim loses its finalizer (and is then gone) once no pod of its namespace uses
  it: a pod uses a claim when it is scheduled (spec.nodeName: the kubelet sees pods only once
  scheduled, and refuses to start one whose claim is being deleted) and one of its
  persistentVolumeClaim volumes names the claim, whatever its phase (upstream's podUsesPVC). The
  pods given come from a cache that may lag: the shell confirms a removal against a live list;
* a Terminating volume loses its finalizer once it is not Bound;
* an object not being deleted that lacks its finalizer (made before the admission, or stripped
  by hand) gets it back.
"""
from __future__ import annotations

from collections.abc import Iterable

from kubemu.api.pod import claim_names
from kubemu.api.storage import PV_PROTECTION_FINALIZER, PVC_PROTECTION_FINALIZER

from . import PatchObject, RemoveFinalizer
from .podutil import meta


def _namespace(obj: dict) -> str:
    return meta(obj).get("namespace") or "default"


def pod_uses_claim(pod: dict, claim: dict) -> bool:
    spec = pod.get("spec") if isinstance(pod.get("spec"), dict) else {}
    return bool(spec.get("nodeName")) and _namespace(pod) == _namespace(claim) \
        and meta(claim).get("name") in claim_names(pod)


def _add_finalizer(kind: str, obj: dict, finalizer: str) -> list:
    """The finalizer put back on an object not being deleted that lacks it (NeedToAddFinalizer);
    the merge patch's list is computed from this resourceVersion, which guards it."""
    m = meta(obj)
    finalizers = m.get("finalizers") if isinstance(m.get("finalizers"), list) else []
    namespace = m.get("namespace") if kind == "PersistentVolumeClaim" else None
    if m.get("deletionTimestamp") or finalizer in finalizers:
        return []
    return [PatchObject("v1", kind, namespace, m.get("name"), m.get("uid"),
                        {"metadata": {"finalizers": [*finalizers, finalizer]}},
                        m.get("resourceVersion"))]


def _release(kind: str, obj: dict, finalizer: str) -> RemoveFinalizer:
    m = meta(obj)
    return RemoveFinalizer("v1", kind, m.get("namespace") if kind == "PersistentVolumeClaim" else None,
                           m.get("name"), m.get("uid"), finalizer)


def _deletion_candidate(obj: dict, finalizer: str) -> bool:
    m = meta(obj)
    return bool(m.get("deletionTimestamp")) and finalizer in (m.get("finalizers") or [])


def claim_users(claim: dict, pods: Iterable[dict]) -> list[str]:
    """The names of the pods that keep the claim from being deleted."""
    return sorted(meta(pod).get("name") for pod in pods if pod_uses_claim(pod, claim))


def sync_claim(claim: dict, pods: Iterable[dict]) -> list:
    """`pods`: those of the claim's namespace."""
    if _deletion_candidate(claim, PVC_PROTECTION_FINALIZER):
        return [] if claim_users(claim, pods) else [
            _release("PersistentVolumeClaim", claim, PVC_PROTECTION_FINALIZER)]
    return _add_finalizer("PersistentVolumeClaim", claim, PVC_PROTECTION_FINALIZER)


def sync_volume(volume: dict) -> list:
    if _deletion_candidate(volume, PV_PROTECTION_FINALIZER):
        status = volume.get("status") if isinstance(volume.get("status"), dict) else {}
        return [] if status.get("phase") == "Bound" else [
            _release("PersistentVolume", volume, PV_PROTECTION_FINALIZER)]
    return _add_finalizer("PersistentVolume", volume, PV_PROTECTION_FINALIZER)


def needs_sync(obj: dict, finalizer: str) -> bool:
    """Whether an object's change concerns the controller (NeedToAddFinalizer or
    IsDeletionCandidate): the shells' filter."""
    m = meta(obj)
    has = finalizer in (m.get("finalizers") or [])
    return bool(m.get("deletionTimestamp")) == has
