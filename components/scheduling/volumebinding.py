"""kube-scheduler's VolumeBinding plugin and the claim/volume matching rules it shares with
the PV controller (component-helpers/storage/volume), as pure functions over API objects.

    claims = claim_names(pod)                    # (kubemu.api.pod) [] -> the plugin skips the pod
    state = pre_filter(pod, cluster)             # PodClaims, or the UnschedulableAndUnresolvable message
    reasons, plan = find_pod_volumes(state, node, cluster)   # Filter; the plan is PreBind's work
    check_bindings(node, plan, cluster)          # PreBind's poll: True (all bound), False (wait), str (error)

`cluster` answers `pvc(namespace, name)`, `pv(name)`, `storage_class(name)` (each None when
absent) and `pvs()` (every PersistentVolume), from the scheduler's informers.

What the plugin decides, as upstream:
  * PreFilter: a claim that is missing, Lost or being deleted makes the pod unschedulable with
    that claim's message; an unbound claim that is not of a WaitForFirstConsumer class
    (Immediate, or no class, or a class that does not exist) waits for the PV controller:
    "pod has unbound immediate PersistentVolumeClaims".
  * Filter, per node: each bound claim's volume must exist and its nodeAffinity match the node;
    each unbound WaitForFirstConsumer claim either has a matching Available volume that fits
    the node (the smallest, a volume pre-bound to the claim first) or is provisioned: its class
    has a provisioner and allows the node's topology. A claim already given a selected node
    fits only there.
  * PreBind (the plan for the chosen node): the matching volumes get the claim in
    spec.claimRef, the claims to provision get the `volume.kubernetes.io/selected-node`
    annotation; then the pod waits until every claim is fully bound (spec.volumeName and
    `pv.kubernetes.io/bind-completed`), at most BIND_TIMEOUT.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Iterable, Optional, Protocol, Union

from components.controllers.persistentvolume import (ANN_BIND_COMPLETED, ANN_BOUND_BY_CONTROLLER,
                                                     ANN_SELECTED_NODE, claim_key)
from components.controllers.persistentvolume import is_bound_to as is_volume_bound_to_claim
from kubemu.api.meta import selector_matches
from kubemu.api.pod import claim_names
from kubemu.api.quantity import parse_quantity
from kubemu.api.storage import (WAIT_FOR_FIRST_CONSUMER, storage_capacity, storage_class_of,
                                storage_request)

from .filters import Filter, match_node_selector_terms, node_labels, node_name

FILTER_NAME = "VolumeBinding"
NOT_SUPPORTED_PROVISIONER = "kubernetes.io/no-provisioner"
BIND_TIMEOUT = 600.0   # seconds: VolumeBindingArgs.bindTimeoutSeconds' default

# Reasons and messages, word for word as the plugin gives them.
ERR_BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
ERR_NODE_CONFLICT = "node(s) had volume node affinity conflict"
ERR_PV_NOT_EXIST = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
ERR_UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"


class Cluster(Protocol):
    def pvc(self, namespace: str, name: str) -> Optional[dict]: ...
    def pv(self, name: str) -> Optional[dict]: ...
    def storage_class(self, name: str) -> Optional[dict]: ...
    def pvs(self) -> Iterable[dict]: ...


@dataclass(frozen=True)
class PodClaims:
    """PreFilter's result: the pod's claims, fully bound or to bind on the chosen node."""
    bound: tuple = ()     # claims with a volume
    delayed: tuple = ()   # unbound claims of a WaitForFirstConsumer class


@dataclass
class Plan:
    """PreBind's work on the chosen node: (volume, claim) pairs to bind, claims to provision.
    `written` keeps the resourceVersion of each object the scheduler wrote (by kind and key),
    so an informer still showing the older copy is waited for, not mistaken for a failure."""
    node: str
    bindings: list = field(default_factory=list)    # [(pv, pvc)]
    provisions: list = field(default_factory=list)  # [pvc]
    written: dict = field(default_factory=dict)     # ("pv", name) / ("pvc", "ns/name") -> resourceVersion

    def __bool__(self) -> bool:
        return bool(self.bindings or self.provisions)


# --- the objects' fields, as component-helpers reads them (the rest: the PV controller's) -------

def _meta(obj: dict) -> dict:
    return obj.get("metadata") or {}


def _spec(obj: dict) -> dict:
    return obj.get("spec") or {}


def is_fully_bound(pvc: dict) -> bool:
    return bool(_spec(pvc).get("volumeName")) and ANN_BIND_COMPLETED in (_meta(pvc).get("annotations") or {})


def is_delay_binding(pvc: dict, cluster: Cluster) -> bool:
    """IsDelayBindingMode: the claim's class exists and binds WaitForFirstConsumer. No class,
    or a class that does not exist, is immediate binding."""
    name = storage_class_of(pvc)
    if not name:
        return False
    cls = cluster.storage_class(name)
    return cls is not None and cls.get("volumeBindingMode") == WAIT_FOR_FIRST_CONSUMER


def check_node_affinity(pv: dict, labels: dict) -> bool:
    """CheckNodeAffinity: the volume's required node affinity matches a node with these labels
    (only labels: a matchFields term never matches, as upstream)."""
    required = (_spec(pv).get("nodeAffinity") or {}).get("required")
    if required is None:
        return True
    return match_node_selector_terms(required.get("nodeSelectorTerms") or [], {"metadata": {"labels": labels}})


def _size(value) -> Fraction:
    try:
        return parse_quantity(value) if value is not None else Fraction(0)
    except (ValueError, TypeError, OverflowError):
        return Fraction(0)


def claim_request(pvc: dict) -> Fraction:
    return _size(storage_request(pvc))


def volume_capacity(pv: dict) -> Fraction:
    return _size(storage_capacity(pv))


def check_access_modes(pvc: dict, pv: dict) -> bool:
    modes = set(_spec(pv).get("accessModes") or ())
    return all(mode in modes for mode in _spec(pvc).get("accessModes") or ())


def _volume_mode(obj: dict) -> str:
    return _spec(obj).get("volumeMode") or "Filesystem"


def find_matching_volume(pvc: dict, volumes: Iterable[dict], node: Optional[dict],
                         excluded: set, delay_binding: bool) -> Optional[dict]:
    """FindMatchingVolume: a volume pre-bound to the claim (None if it does not fit `node`),
    else the smallest Available volume of the claim's class and selector, big enough, with
    the claim's access modes and volume mode, fitting `node`. Without a node (the PV
    controller) a delayed claim gets only a pre-bound volume: the scheduler binds the rest."""
    request = claim_request(pvc)
    wanted_class = storage_class_of(pvc)
    selector = _spec(pvc).get("selector")
    labels = node_labels(node) if node is not None else None
    smallest, smallest_size = None, None
    for pv in volumes:
        if _meta(pv).get("name") in excluded:
            continue
        if _spec(pv).get("claimRef") is not None and not is_volume_bound_to_claim(pv, pvc):
            continue
        size = volume_capacity(pv)
        if size < request or _volume_mode(pv) != _volume_mode(pvc) or _meta(pv).get("deletionTimestamp"):
            continue
        fits = labels is None or check_node_affinity(pv, labels)
        if is_volume_bound_to_claim(pv, pvc):
            return pv if fits else None
        if node is None and delay_binding:
            continue
        if (pv.get("status") or {}).get("phase") != "Available":
            continue
        if selector is not None and not selector_matches(selector, _meta(pv).get("labels")):
            continue
        if storage_class_of(pv) != wanted_class or not fits:
            continue
        if node is not None and not check_access_modes(pvc, pv):
            continue
        if smallest is None or smallest_size > size:
            smallest, smallest_size = pv, size
    return smallest


# --- PreFilter --------------------------------------------------------------------------------

def pre_filter(pod: dict, cluster: Cluster) -> Union[PodClaims, str]:
    """The pod's claims sorted out, or why no node can take the pod now."""
    namespace = _meta(pod).get("namespace") or "default"
    claims = []
    for name in claim_names(pod):
        pvc = cluster.pvc(namespace, name)
        if pvc is None:
            return f'persistentvolumeclaim "{name}" not found'
        if (pvc.get("status") or {}).get("phase") == "Lost":
            return (f'persistentvolumeclaim "{name}" bound to non-existent persistentvolume '
                    f'"{_spec(pvc).get("volumeName") or ""}"')
        if _meta(pvc).get("deletionTimestamp"):
            return f'persistentvolumeclaim "{name}" is being deleted'
        claims.append(pvc)
    bound, delayed = [], []
    for pvc in claims:
        if is_fully_bound(pvc):
            bound.append(pvc)
        elif is_delay_binding(pvc, cluster) and not _spec(pvc).get("volumeName"):
            delayed.append(pvc)
        else:
            return ERR_UNBOUND_IMMEDIATE
    return PodClaims(tuple(bound), tuple(delayed))


# --- Filter -----------------------------------------------------------------------------------

def _topology_allows(cls: dict, labels: dict) -> bool:
    """MatchTopologySelectorTerms over allowedTopologies: no terms allow every node; terms
    are ORed, a term's expressions ANDed, each a label whose value is listed."""
    terms = cls.get("allowedTopologies") or []
    if not terms:
        return True
    return any(all(labels.get(e.get("key")) in (e.get("values") or ())
                   for e in term.get("matchLabelExpressions") or ())
               for term in terms)


def find_pod_volumes(state: PodClaims, node: dict, cluster: Cluster) -> tuple[list[str], Plan]:
    """FindPodVolumes: the node's reasons ([] when it fits) and, when it fits, the plan."""
    name, labels = node_name(node), node_labels(node)
    plan = Plan(name)
    bound_ok = pvs_found = unbound_ok = True
    for pvc in state.bound:
        pv = cluster.pv(_spec(pvc).get("volumeName") or "")
        if pv is None:
            pvs_found = False
            break
        if not check_node_affinity(pv, labels):
            bound_ok = False
            break
    if state.delayed:
        to_match, to_provision = [], []
        for pvc in state.delayed:
            selected = (_meta(pvc).get("annotations") or {}).get(ANN_SELECTED_NODE)
            if selected is None:
                to_match.append(pvc)
            elif selected != name:
                unbound_ok = False   # already promised to another node
                break
            else:
                to_provision.append(pvc)
        if unbound_ok and to_match:
            volumes = list(cluster.pvs())
            chosen: set = set()
            for pvc in sorted(to_match, key=claim_request):   # smallest claims pick first
                pv = find_matching_volume(pvc, volumes, node, chosen, True)
                if pv is None:
                    to_provision.append(pvc)
                else:
                    chosen.add(_meta(pv)["name"])
                    plan.bindings.append((pv, pvc))
        if unbound_ok:
            for pvc in to_provision:
                cls = cluster.storage_class(storage_class_of(pvc))
                provisioner = (cls or {}).get("provisioner") or ""
                if provisioner in ("", NOT_SUPPORTED_PROVISIONER) or not _topology_allows(cls, labels):
                    unbound_ok = False
                    break
                plan.provisions.append(pvc)
    reasons = []
    if not bound_ok:
        reasons.append(ERR_NODE_CONFLICT)
    if not unbound_ok:
        reasons.append(ERR_BIND_CONFLICT)
    if not pvs_found:
        reasons.append(ERR_PV_NOT_EXIST)
    return reasons, (plan if not reasons else Plan(name))


def volume_filter(state: PodClaims, cluster: Cluster) -> Filter:
    """The Filter plugin over one decision's PreFilter state (UnschedulableAndUnresolvable)."""
    return Filter(FILTER_NAME, lambda pod, node, node_pods: find_pod_volumes(state, node, cluster)[0], True)


# --- PreBind ----------------------------------------------------------------------------------

def bind_volume_patch(pv: dict, pvc: dict) -> dict:
    """The merge patch binding a volume to a claim (GetBindVolumeToClaim), guarded by the
    volume's resourceVersion: the PV controller completes the binding."""
    meta = _meta(pvc)
    return {"metadata": {"resourceVersion": _meta(pv).get("resourceVersion"),
                         "annotations": {ANN_BOUND_BY_CONTROLLER: "yes"}},
            "spec": {"claimRef": {"kind": "PersistentVolumeClaim", "apiVersion": "v1",
                                  "namespace": meta.get("namespace") or "default", "name": meta.get("name"),
                                  "uid": meta.get("uid"), "resourceVersion": meta.get("resourceVersion")}}}


def select_node_patch(pvc: dict, node: str) -> dict:
    """The merge patch asking for the claim to be provisioned on `node`, guarded by the
    claim's resourceVersion."""
    return {"metadata": {"resourceVersion": _meta(pvc).get("resourceVersion"),
                         "annotations": {ANN_SELECTED_NODE: node}}}


def _older(obj: dict, written: Optional[str]) -> bool:
    """The informer's copy predates what the scheduler wrote."""
    have = _meta(obj).get("resourceVersion")
    if written is None or have is None:
        return False
    try:
        return int(have) < int(written)
    except ValueError:
        return have != written


def check_bindings(node: dict, plan: Plan, cluster: Cluster) -> Union[bool, str]:
    """checkBindings: True once every claim of the plan is fully bound on `node`, False while
    it may still be, else the error that sends the pod back to the queue."""
    name, labels = node_name(node), node_labels(node)
    for pv0, pvc0 in plan.bindings:
        pv, pvc = cluster.pv(_meta(pv0)["name"]), cluster.pvc(*claim_key(pvc0).split("/", 1))
        if pv is None:
            return f'failed to check binding: persistentvolume "{_meta(pv0)["name"]}" not found'
        if pvc is None:
            return f'failed to check binding: persistentvolumeclaim "{_meta(pvc0).get("name")}" not found'
        if _older(pv, plan.written.get(("pv", _meta(pv0)["name"]))):
            return False
        if not check_node_affinity(pv, labels):
            return f'pv "{_meta(pv)["name"]}" node affinity doesn\'t match node "{name}": no matching NodeSelectorTerms'
        if not (_spec(pv).get("claimRef") or {}).get("uid"):
            return f'ClaimRef got reset for pv "{_meta(pv)["name"]}"'
        if not is_fully_bound(pvc):
            return False
    for pvc0 in plan.provisions:
        key = claim_key(pvc0)
        pvc = cluster.pvc(*key.split("/", 1))
        if pvc is None:
            return f'failed to check provisioning pvc: persistentvolumeclaim "{_meta(pvc0).get("name")}" not found'
        if _older(pvc, plan.written.get(("pvc", key))):
            return False
        annotations = _meta(pvc).get("annotations")
        if not annotations:
            return f'selectedNode annotation reset for PVC "{_meta(pvc).get("name")}"'
        if annotations.get(ANN_SELECTED_NODE) != name:   # the provisioner gave up: removed it
            return f'provisioning failed for PVC "{_meta(pvc).get("name")}"'
        volume = _spec(pvc).get("volumeName")
        if volume:
            pv = cluster.pv(volume)
            if pv is None:
                return False   # not in the cache yet
            if not check_node_affinity(pv, labels):
                return f'pv "{volume}" node affinity doesn\'t match node "{name}": no matching NodeSelectorTerms'
        if not is_fully_bound(pvc):
            return False
    return True
