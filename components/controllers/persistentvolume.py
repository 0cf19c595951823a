"""The PersistentVolume binder (pkg/controller/volume/persistentvolume/pv_controller.go): pure
syncClaim / syncVolume over cached objects, returning actions.

    sync_claim(claim, volumes, classes, pods)  -> [Action]   claims: key ("claim", "ns/name")
    sync_volume(volume, claim)           -> [Action] | [ConfirmClaim]   volumes: key ("volume", name)

A claim is bound when it carries `pv.kubernetes.io/bind-completed`; until then:

* no spec.volumeName: the best Available volume of the claim's class whose access modes include
  the claim's (fewest modes first), big enough, of the same volumeMode, matched by the claim's
  selector, not being deleted: the smallest such; a volume pre-bound to the claim (claimRef)
  wins. A class in WaitForFirstConsumer mode binds only pre-bound volumes: the scheduler places
  the pod and either pre-binds a volume or sets `volume.kubernetes.io/selected-node` on the
  claim. No volume: (WaitForFirstConsumer without a selected node) the event
  WaitForFirstConsumer (WaitForPodScheduled naming the pods that use the claim and have no node
  yet); (a class) provisioning: the class's provisioner is named in
  `volume.kubernetes.io/storage-provisioner` (and the beta annotation) for an external
  provisioner to act on, with the ExternalProvisioning event (a class that does not exist:
  ProvisioningFailed `storageclass.storage.k8s.io "x" not found`, the claim stays Pending);
  (no class) FailedBinding. A claim without a class (none given, and no default class when it
  was created) gets the default class retroactively, as 1.28+ does.
* spec.volumeName: that volume, if it exists, is unclaimed and satisfies the claim (else the
  VolumeMismatch event), or is already claimed by it; claimed by another claim: FailedBinding.

Binding is four idempotent writes, each skipped when already so: the volume's claimRef (and
`pv.kubernetes.io/bound-by-controller` when the controller chose it), the volume's phase Bound,
the claim's volumeName (+ bind-completed, bound-by-controller), the claim's status (Bound, the
volume's access modes and capacity). A crash between them is finished by the next sync.

A bound claim whose volume is gone, or lost its reference, is Lost (ClaimLost). A volume whose
claim is gone (or was replaced by a namesake) - not cached, and then not found by the apiserver
either (ConfirmClaim: the shell asks it) - is Released and reclaimed: Retain keeps it,
Recycle fails (kubemu has no recycler), Delete is left to its external provisioner when
`pv.kubernetes.io/provisioned-by` names one, else fails (no deleter plugin in kubemu).
"""
from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction

from kubemu.api import quantity
from kubemu.api.pod import claim_names
from kubemu.api.storage import (BETA_CLASS_ANNOTATION, WAIT_FOR_FIRST_CONSUMER, binding_mode,
                                default_class, storage_capacity, storage_class_of, storage_request)

from . import RecordEvent, UpdateObject, UpdateStatus
from .podutil import meta, selector_matches

COMPONENT = "persistentvolume-controller"
ANN_BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
ANN_BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
ANN_SELECTED_NODE = "volume.kubernetes.io/selected-node"
ANN_STORAGE_PROVISIONER = "volume.kubernetes.io/storage-provisioner"
ANN_BETA_STORAGE_PROVISIONER = "volume.beta.kubernetes.io/storage-provisioner"
ANN_PROVISIONED_BY = "pv.kubernetes.io/provisioned-by"
YES = "yes"
IN_TREE_PREFIX = "kubernetes.io/"   # provisioners in kube-controller-manager itself: kubemu has none

# Phases
AVAILABLE, BOUND, RELEASED, FAILED = "Available", "Bound", "Released", "Failed"
PENDING, LOST = "Pending", "Lost"

WAIT_FOR_FIRST_CONSUMER_MESSAGE = "waiting for first consumer to be created before binding"


# --- small readers ------------------------------------------------------------------------------

def _spec(obj: dict) -> dict:
    spec = obj.get("spec")
    return spec if isinstance(spec, dict) else {}


def _status(obj: dict) -> dict:
    status = obj.get("status")
    return status if isinstance(status, dict) else {}


def _annotations(obj: dict) -> dict:
    annotations = meta(obj).get("annotations")
    return annotations if isinstance(annotations, dict) else {}


def claim_key(claim: dict) -> str:
    return f"{meta(claim).get('namespace') or 'default'}/{meta(claim).get('name')}"


def claim_ref_key(volume: dict) -> str | None:
    """"ns/name" of the claim a volume's claimRef names (None: unclaimed)."""
    ref = _spec(volume).get("claimRef")
    if not isinstance(ref, dict) or not ref.get("name"):
        return None
    return f"{ref.get('namespace') or 'default'}/{ref['name']}"


def _size(value) -> Fraction:
    try:
        return quantity.parse_quantity(value) if value is not None else Fraction(0)
    except (ValueError, TypeError, OverflowError):
        return Fraction(0)


def is_bound_to(volume: dict, claim: dict) -> bool:
    """IsVolumeBoundToClaim: the claimRef names the claim (and its uid, once one is recorded)."""
    ref = _spec(volume).get("claimRef")
    if not isinstance(ref, dict):
        return False
    m = meta(claim)
    if ref.get("name") != m.get("name") or (ref.get("namespace") or "default") != (m.get("namespace") or "default"):
        return False
    return not ref.get("uid") or ref.get("uid") == m.get("uid")


def _mode(obj: dict) -> str:
    return _spec(obj).get("volumeMode") or "Filesystem"


def _modes(obj: dict) -> set:
    modes = _spec(obj).get("accessModes")
    return set(modes) if isinstance(modes, list) else set()


def volume_mismatch(volume: dict, claim: dict) -> str | None:
    """checkVolumeSatisfyClaim: why `volume` cannot serve `claim` (None: it can)."""
    if meta(volume).get("deletionTimestamp"):
        return f'the volume is marked for deletion "{meta(volume).get("name")}"'
    if _size(storage_capacity(volume)) < _size(storage_request(claim)):
        return "requested PV is too small"
    if storage_class_of(volume) != storage_class_of(claim):
        return "storageClassName does not match"
    if _mode(volume) != _mode(claim):
        return "incompatible volumeMode"
    if not _modes(claim) <= _modes(volume):
        return "incompatible accessMode"
    return None


def find_best_match(claim: dict, volumes: Iterable[dict], delay_binding: bool) -> dict | None:
    """findBestMatchForClaim: a volume pre-bound to the claim, else (not delayed) the smallest
    Available volume that satisfies it, among the volumes with the fewest access modes."""
    wanted = _modes(claim)
    selector = _spec(claim).get("selector")
    requested = _size(storage_request(claim))
    best: tuple | None = None
    for volume in volumes:
        ref = _spec(volume).get("claimRef")
        if ref is not None and not is_bound_to(volume, claim):
            continue
        if not wanted <= _modes(volume) or _size(storage_capacity(volume)) < requested:
            continue
        if _mode(volume) != _mode(claim) or meta(volume).get("deletionTimestamp"):
            continue
        if ref is not None:      # pre-bound to this claim (by the user, the scheduler, a provisioner)
            return volume
        if delay_binding:
            continue
        if _status(volume).get("phase") != AVAILABLE:
            continue
        if selector is not None and not selector_matches(selector, meta(volume).get("labels") or {}):
            continue
        if storage_class_of(volume) != storage_class_of(claim):
            continue
        rank = (len(_modes(volume)), _size(storage_capacity(volume)), meta(volume).get("name") or "")
        if best is None or rank < best[0]:
            best = (rank, volume)
    return best[1] if best else None


# --- writes -------------------------------------------------------------------------------------

def _event(claim_or_volume: dict, kind: str, type_: str, reason: str, message: str) -> RecordEvent:
    m = meta(claim_or_volume)
    return RecordEvent(m.get("namespace") if kind == "PersistentVolumeClaim" else None, kind,
                       m.get("name"), type_, reason, message)


def volume_phase(volume: dict, phase: str, message: str = "") -> list:
    """updateVolumePhase: the status write, when the phase (or message) changes."""
    status = _status(volume)
    if status.get("phase") == phase and (status.get("message") or "") == message:
        return []
    new = {k: v for k, v in status.items() if k not in ("phase", "message")}
    new["phase"] = phase
    if message:
        new["message"] = message
    return [UpdateStatus("PersistentVolume", None, meta(volume).get("name"), new)]


def claim_phase(claim: dict, phase: str, volume: dict | None = None) -> list:
    """updateClaimStatus: phase, and the volume's access modes (capacity when becoming Bound);
    without a volume neither."""
    status = _status(claim)
    new = dict(status)
    new["phase"] = phase
    if volume is None:
        new.pop("accessModes", None)
        new.pop("capacity", None)
    else:
        new["accessModes"] = list(_spec(volume).get("accessModes") or [])
        if status.get("phase") != phase:
            capacity = storage_capacity(volume)
            if capacity is not None and _size((status.get("capacity") or {}).get("storage")) != _size(capacity):
                new["capacity"] = dict(_spec(volume).get("capacity") or {})
    if new == status:
        return []
    return [UpdateStatus("PersistentVolumeClaim", meta(claim).get("namespace"), meta(claim).get("name"), new)]


def claim_reference(claim: dict) -> dict:
    m = meta(claim)
    return {"kind": "PersistentVolumeClaim", "namespace": m.get("namespace") or "default",
            "name": m.get("name"), "uid": m.get("uid"), "apiVersion": "v1",
            "resourceVersion": m.get("resourceVersion")}


def _annotate(obj: dict, key: str, value: str) -> None:
    m = obj.setdefault("metadata", {})
    if not isinstance(m.get("annotations"), dict):
        m["annotations"] = {}
    m["annotations"][key] = value


def bind(volume: dict, claim: dict) -> list:
    """The four writes of a binding, each only if needed."""
    actions: list = []
    new_volume = copy.deepcopy(volume)
    dirty = False
    ref = _spec(volume).get("claimRef")
    by_controller = not is_bound_to(volume, claim)
    if not isinstance(ref, dict) or ref.get("name") != meta(claim).get("name") \
            or (ref.get("namespace") or "default") != (meta(claim).get("namespace") or "default") \
            or ref.get("uid") != meta(claim).get("uid"):
        new_volume.setdefault("spec", {})["claimRef"] = claim_reference(claim)
        dirty = True
    if by_controller and ANN_BOUND_BY_CONTROLLER not in _annotations(new_volume):
        _annotate(new_volume, ANN_BOUND_BY_CONTROLLER, YES)
        dirty = True
    if dirty:
        actions.append(UpdateObject(None, new_volume))
    actions += volume_phase(volume, BOUND)

    new_claim = copy.deepcopy(claim)
    dirty = False
    name = meta(volume).get("name")
    if _spec(claim).get("volumeName") != name:
        new_claim.setdefault("spec", {})["volumeName"] = name
        if ANN_BOUND_BY_CONTROLLER not in _annotations(new_claim):
            _annotate(new_claim, ANN_BOUND_BY_CONTROLLER, YES)
        dirty = True
    if ANN_BIND_COMPLETED not in _annotations(new_claim):
        _annotate(new_claim, ANN_BIND_COMPLETED, YES)
        dirty = True
    if dirty:
        actions.append(UpdateObject(meta(claim).get("namespace"), new_claim))
    actions += claim_phase(claim, BOUND, volume)
    return actions


# --- syncClaim ----------------------------------------------------------------------------------

def unscheduled_users(claim: dict, pods: Iterable[dict]) -> list[str]:
    """findNonScheduledPodsByPVC: the names of the pods (of the claim's namespace) that mount
    the claim, are not finished, and have no node yet."""
    names = []
    for pod in pods:
        spec = pod.get("spec") if isinstance(pod.get("spec"), dict) else {}
        status = pod.get("status") if isinstance(pod.get("status"), dict) else {}
        if spec.get("nodeName") or status.get("phase") in ("Succeeded", "Failed") \
                or (meta(pod).get("namespace") or "default") != (meta(claim).get("namespace") or "default"):
            continue
        if meta(claim).get("name") in claim_names(pod):
            names.append(meta(pod).get("name"))
    return sorted(names)


def sync_claim(claim: dict, volumes: Mapping[str, dict], classes: Mapping[str, dict],
               pods: Iterable[dict] = ()) -> list:
    """`volumes` by name, `classes` by name, `pods` of the claim's namespace (the caches)."""
    if ANN_BIND_COMPLETED not in _annotations(claim):
        return _sync_unbound_claim(claim, volumes, classes, pods)
    return _sync_bound_claim(claim, volumes)


def _sync_unbound_claim(claim: dict, volumes: Mapping[str, dict], classes: Mapping[str, dict],
                        pods: Iterable[dict]) -> list:
    wanted = _spec(claim).get("volumeName")
    if not wanted:
        klass = classes.get(storage_class_of(claim)) if storage_class_of(claim) else None
        delay = klass is not None and binding_mode(klass) == WAIT_FOR_FIRST_CONSUMER
        volume = find_best_match(claim, volumes.values(), delay)
        if volume is not None:
            return bind(volume, claim)
        if _spec(claim).get("storageClassName") is None and BETA_CLASS_ANNOTATION not in _annotations(claim):
            chosen = default_class(classes.values())
            if chosen is not None:   # the retroactive default class; the update re-syncs the claim
                new_claim = copy.deepcopy(claim)
                new_claim.setdefault("spec", {})["storageClassName"] = meta(chosen).get("name")
                return [UpdateObject(meta(claim).get("namespace"), new_claim)]
        if delay and ANN_SELECTED_NODE not in _annotations(claim):
            return [_waiting_event(claim, unscheduled_users(claim, pods))] + claim_phase(claim, PENDING)
        if storage_class_of(claim):
            return provision(claim, classes)
        return [_event(claim, "PersistentVolumeClaim", "Normal", "FailedBinding",
                       "no persistent volumes available for this claim and no storage class is set")
                ] + claim_phase(claim, PENDING)
    volume = volumes.get(wanted)
    if volume is None:
        return claim_phase(claim, PENDING)   # the volume may come: retried when it does
    if _spec(volume).get("claimRef") is None:
        why = volume_mismatch(volume, claim)
        if why is not None:
            return [_event(claim, "PersistentVolumeClaim", "Warning", "VolumeMismatch",
                           f'Cannot bind to requested volume "{wanted}": {why}')] + claim_phase(claim, PENDING)
        return bind(volume, claim)
    if is_bound_to(volume, claim):
        return bind(volume, claim)
    return [_event(claim, "PersistentVolumeClaim", "Warning", "FailedBinding",
                   f'volume "{wanted}" already bound to a different claim.')] + claim_phase(claim, PENDING)


def _waiting_event(claim: dict, users: list[str]) -> RecordEvent:
    """emitEventForUnboundDelayBindingClaim: no pod uses the claim yet, or the pods that do wait
    for the scheduler."""
    if not users:
        return _event(claim, "PersistentVolumeClaim", "Normal", "WaitForFirstConsumer",
                      WAIT_FOR_FIRST_CONSUMER_MESSAGE)
    message = (f"waiting for pod {users[0]} to be scheduled" if len(users) == 1
               else f"waiting for pods {','.join(users)} to be scheduled")
    return _event(claim, "PersistentVolumeClaim", "Normal", "WaitForPodScheduled", message)


def provision(claim: dict, classes: Mapping[str, dict]) -> list:
    """provisionClaim for external provisioners: name the class's provisioner on the claim."""
    name = storage_class_of(claim)
    klass = classes.get(name)
    if klass is None:
        return [_event(claim, "PersistentVolumeClaim", "Warning", "ProvisioningFailed",
                       f'storageclass.storage.k8s.io "{name}" not found')]
    provisioner = klass.get("provisioner") or ""
    if provisioner.startswith(IN_TREE_PREFIX):
        return [_event(claim, "PersistentVolumeClaim", "Warning", "ProvisioningFailed",
                       f"no volume plugin matched name: {provisioner}")]
    actions: list = []
    annotations = _annotations(claim)
    if annotations.get(ANN_BETA_STORAGE_PROVISIONER) != provisioner \
            or annotations.get(ANN_STORAGE_PROVISIONER) != provisioner:
        new_claim = copy.deepcopy(claim)
        _annotate(new_claim, ANN_BETA_STORAGE_PROVISIONER, provisioner)
        _annotate(new_claim, ANN_STORAGE_PROVISIONER, provisioner)
        actions.append(UpdateObject(meta(claim).get("namespace"), new_claim))
    actions.append(_event(
        claim, "PersistentVolumeClaim", "Normal", "ExternalProvisioning",
        f"Waiting for a volume to be created either by the external provisioner '{provisioner}' "
        "or manually by the system administrator. If volume creation is delayed, please verify "
        "that the provisioner is running and correctly registered."))
    return actions


def _sync_bound_claim(claim: dict, volumes: Mapping[str, dict]) -> list:
    name = _spec(claim).get("volumeName")
    if not name:
        return _lost(claim, "ClaimLost", "Bound claim has lost reference to PersistentVolume. "
                                         "Data on the volume is lost!")
    volume = volumes.get(name)
    if volume is None:
        return _lost(claim, "ClaimLost", "Bound claim has lost its PersistentVolume. Data on the volume is lost!")
    ref = _spec(volume).get("claimRef")
    if ref is None or (isinstance(ref, dict) and ref.get("uid") == meta(claim).get("uid")):
        return bind(volume, claim)
    return _lost(claim, "ClaimMisbound", "Two claims are bound to the same volume, this one is bound incorrectly")


def _lost(claim: dict, reason: str, message: str) -> list:
    if _status(claim).get("phase") == LOST:
        return []
    return claim_phase(claim, LOST) + [_event(claim, "PersistentVolumeClaim", "Warning", reason, message)]


# --- syncVolume ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class ConfirmClaim:
    """Not an API write: sync_volume asking its shell to read the claim from the apiserver and
    sync again with `from_api=True`, before releasing a volume on a cache's word (the claim may
    just not be cached yet: a provisioner or the scheduler bound the volume to a claim made
    a moment ago)."""
    namespace: str
    name: str


def sync_volume(volume: dict, claim: dict | None, *, from_api: bool = False) -> list:
    """`claim`: the claim the volume's claimRef names by namespace/name (None if none), from the
    cache, or from the apiserver when `from_api`."""
    ref = _spec(volume).get("claimRef")
    if not isinstance(ref, dict):
        return volume_phase(volume, AVAILABLE)
    if not ref.get("uid"):
        return volume_phase(volume, AVAILABLE)   # reserved for a claim the claim sync binds
    missing = claim is None and _status(volume).get("phase") not in (RELEASED, FAILED)
    replaced = claim is not None and meta(claim).get("uid") != ref.get("uid")
    if not from_api and (missing or replaced):
        return [ConfirmClaim(ref.get("namespace") or "default", ref["name"])]
    if replaced:
        claim = None   # the claim was deleted, and a namesake created
    if claim is None:
        actions = []
        phase = _status(volume).get("phase")
        if phase not in (RELEASED, FAILED):
            actions += volume_phase(volume, RELEASED)
            volume = {**volume, "status": {**_status(volume), "phase": RELEASED}}
        return actions + reclaim(volume)
    name = meta(volume).get("name")
    if not _spec(claim).get("volumeName"):
        return volume_phase(volume, BOUND)   # the claim sync finishes the binding
    if _spec(claim).get("volumeName") == name:
        return volume_phase(volume, BOUND)
    # the claim is bound to another volume
    if ANN_PROVISIONED_BY in _annotations(volume) and _policy(volume) == "Delete":
        actions = []
        if _status(volume).get("phase") not in (RELEASED, FAILED):
            actions += volume_phase(volume, RELEASED)
            volume = {**volume, "status": {**_status(volume), "phase": RELEASED}}
        return actions + reclaim(volume)
    if ANN_BOUND_BY_CONTROLLER in _annotations(volume):
        return unbind(volume)
    return []   # pre-bound by the user to a claim bound elsewhere: left alone


def _policy(volume: dict) -> str:
    return _spec(volume).get("persistentVolumeReclaimPolicy") or "Retain"


def unbind(volume: dict) -> list:
    """unbindVolume: a claimRef the controller set goes; a user's loses only its uid."""
    new_volume = copy.deepcopy(volume)
    if ANN_BOUND_BY_CONTROLLER in _annotations(volume):
        new_volume["spec"].pop("claimRef", None)
        annotations = new_volume["metadata"]["annotations"]
        annotations.pop(ANN_BOUND_BY_CONTROLLER, None)
        if not annotations:
            new_volume["metadata"].pop("annotations")
    else:
        new_volume["spec"]["claimRef"].pop("uid", None)
    return [UpdateObject(None, new_volume)] + volume_phase(volume, AVAILABLE)


def reclaim(volume: dict) -> list:
    """reclaimVolume of a Released volume."""
    policy = _policy(volume)
    if policy == "Retain" or _status(volume).get("phase") == FAILED:
        return []
    name = meta(volume).get("name")
    if policy == "Recycle":
        return volume_phase(volume, FAILED, "No recycler plugin found for the volume!") + [
            _event(volume, "PersistentVolume", "Warning", "VolumeFailedRecycle",
                   "No recycler plugin found for the volume!")]
    provisioner = _annotations(volume).get(ANN_PROVISIONED_BY)
    if provisioner and not provisioner.startswith(IN_TREE_PREFIX):
        return []   # its external provisioner deletes it
    message = f'error getting deleter volume plugin for volume "{name}": no deletable volume plugin matched'
    return volume_phase(volume, FAILED, message) + [
        _event(volume, "PersistentVolume", "Warning", "VolumeFailedDelete", message)]
