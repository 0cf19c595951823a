"""Helpers shared by the workload controllers: times, pod readiness/availability, label
selectors, owner references and claiming (claim_objects), a Service port's container port
(find_port), the FNV hashes, the pod-template-hash, and Kubernetes' pod deletion ranking."""
from __future__ import annotations

import copy
import datetime
import json
from typing import Any, Callable, Iterable

from components.controllers import Adopt, Release
from kubemu.api.patch import json_copy
from kubemu.api.times import format_time  # noqa: F401  (re-exported to the controllers)

# --- time -------------------------------------------------------------------------------------


def parse_time(value: Any) -> float | None:
    """An RFC 3339 string (or an epoch number) to epoch seconds; None when absent/unparseable."""
    if value is None or value == "":
        return None
    if isinstance(value, (int, float)):
        return float(value)
    try:
        text = str(value).replace("Z", "+00:00")
        parsed = datetime.datetime.fromisoformat(text)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=datetime.timezone.utc)
    return parsed.timestamp()


# --- metadata ---------------------------------------------------------------------------------


def meta(obj: dict) -> dict:
    return obj.get("metadata") or {}


def labels_of(obj: dict) -> dict:
    return meta(obj).get("labels") or {}


def is_terminating(obj: dict) -> bool:
    return bool(meta(obj).get("deletionTimestamp"))


def controller_ref(obj: dict) -> dict | None:
    """The ownerReference with ``controller: true``, if any."""
    return _controller_ref_in(meta(obj))


def _controller_ref_in(metadata: dict) -> dict | None:
    for ref in metadata.get("ownerReferences") or []:
        if ref.get("controller"):
            return ref
    return None


def owner_reference(owner: dict, kind: str, api_version: str = "apps/v1") -> dict:
    """A controller ownerReference pointing at ``owner``."""
    m = meta(owner)
    return {"apiVersion": owner.get("apiVersion") or api_version, "kind": owner.get("kind") or kind,
            "name": m.get("name"), "uid": m.get("uid"), "controller": True,
            "blockOwnerDeletion": True}


def object_key(obj: dict) -> str:
    m = meta(obj)
    return f"{m.get('namespace') or 'default'}/{m.get('name')}"


# --- controller references --------------------------------------------------------------------


def claim_objects(owner: dict, objects: Iterable[dict], kind: str, owner_ref: dict, *,
                  member: Callable[[dict], bool] | None = None,
                  adopt: Callable[[dict], tuple[Any, dict]] | None = None) -> tuple[list, list]:
    """k8s ControllerRefManager.ClaimObject over ``objects`` (only those in the owner's
    namespace count): the objects of ``kind`` the owner controls after this pass, and the
    Adopt/Release actions that make it so.

    An object is wanted when the owner's ``spec.selector`` matches it and ``member(obj)`` (the
    per-controller filter, upstream's ClaimPods filters) holds. One the owner controls is kept
    when wanted, even while the owner is being deleted (keeping writes nothing), and released
    otherwise, unless the owner is being deleted. A wanted orphan is adopted unless the owner
    or the orphan is being deleted; ``adopt(orphan)`` returns (action, adopted object) where
    adopting writes more than the controller reference ``owner_ref``. An object another
    controller controls is left alone."""
    m = meta(owner)
    uid, namespace = m.get("uid"), m.get("namespace") or "default"
    selector = (owner.get("spec") or {}).get("selector")
    owner_deleting = is_terminating(owner)
    owned: list = []
    actions: list = []
    # A ReplicaSet's sync runs this over all its pods for each change of any of them: the
    # metadata is read once per object, not once per helper.
    for obj in objects:
        om = obj.get("metadata") or {}
        if (om.get("namespace") or "default") != namespace:
            continue
        wanted = selector_matches(selector, om.get("labels")) and (member is None or member(obj))
        ref = _controller_ref_in(om)
        if ref is not None:
            if ref.get("uid") != uid:
                continue
            if wanted:
                owned.append(obj)
            elif not owner_deleting:
                actions.append(Release(kind, namespace, om.get("name"), om.get("uid"), uid))
            continue
        if not wanted or owner_deleting or om.get("deletionTimestamp"):
            continue
        if adopt is None:
            actions.append(Adopt(kind, namespace, om.get("name"), om.get("uid"), owner_ref))
        else:
            action, obj = adopt(obj)
            actions.append(action)
        owned.append(obj)
    return owned, actions


# --- label selectors --------------------------------------------------------------------------


def selector_matches(selector: dict | None, labels: dict | None) -> bool:
    """metav1.LabelSelector semantics (matchLabels AND matchExpressions). A nil selector matches
    nothing; an empty one ({}) matches everything (callers refuse empty selectors themselves)."""
    if selector is None:
        return False
    labels = labels or {}
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and key in labels and labels[key] in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
        if op not in ("In", "NotIn", "Exists", "DoesNotExist"):
            return False
    return True


def selector_is_empty(selector: dict | None) -> bool:
    return not selector or (not selector.get("matchLabels") and not selector.get("matchExpressions"))


# --- pods -------------------------------------------------------------------------------------


def pod_phase(pod: dict) -> str:
    return (pod.get("status") or {}).get("phase") or "Pending"


def is_pod_active(pod: dict) -> bool:
    """k8s controller.IsPodActive: not Succeeded, not Failed, not being deleted."""
    # inline reads: called for every pod of a ReplicaSet at each of its syncs
    return ((pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
            and not (pod.get("metadata") or {}).get("deletionTimestamp"))


def ready_condition(pod: dict) -> dict | None:
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return cond
    return None


def _is_true(cond: dict | None) -> bool:
    return cond is not None and cond.get("status") == "True"


def is_pod_ready(pod: dict) -> bool:
    return _is_true(ready_condition(pod))


def ready_since(pod: dict) -> float | None:
    """When the pod became ready (the Ready condition's lastTransitionTime), if it is ready."""
    cond = ready_condition(pod)
    return parse_time(cond.get("lastTransitionTime")) if _is_true(cond) else None


def is_pod_available(pod: dict, min_ready_seconds: int, now: float) -> bool:
    """k8s podutil.IsPodAvailable: ready, and ready for at least minReadySeconds."""
    return readiness(pod, min_ready_seconds, now)[1]


def readiness(pod: dict, min_ready_seconds: int, now: float) -> tuple[bool, bool]:
    """(is_pod_ready, is_pod_available) from one read of the Ready condition: a ReplicaSet's
    status counts both for every pod at each sync."""
    cond = ready_condition(pod)
    if not _is_true(cond):
        return False, False
    if not min_ready_seconds:
        return True, True
    since = parse_time(cond.get("lastTransitionTime"))
    return True, since is not None and since + min_ready_seconds <= now


def restart_count(pod: dict) -> int:
    return sum(int(cs.get("restartCount") or 0)
               for cs in (pod.get("status") or {}).get("containerStatuses") or [])


def deletion_rank_key(pod: dict, related_on_node: int = 0):
    """Sort key: pods that sort first are deleted first (k8s controller.ActivePodsWithRanks.Less):

    1. unassigned < assigned; 2. Pending < Unknown < Running; 3. not ready < ready;
    4. more related pods on the same node (doubled-up) first; 5. ready for less time first
    (no ready time first); 6. more container restarts first; 7. newer (later or no
    creationTimestamp) first."""
    assigned = 1 if (pod.get("spec") or {}).get("nodeName") else 0
    phase_rank = {"Pending": 0, "Unknown": 1, "Running": 2}.get(pod_phase(pod), 0)
    ready = 1 if is_pod_ready(pod) else 0
    since = ready_since(pod) if ready else None
    created = parse_time(meta(pod).get("creationTimestamp"))
    return (assigned, phase_rank, ready, -related_on_node,
            (0, 0.0) if since is None else (1, -since),
            -restart_count(pod),
            (0, 0.0) if created is None else (1, -created))


def rank_for_deletion(pods: Iterable[dict], related: Iterable[dict] | None = None) -> list[dict]:
    """``pods`` ordered deletion-first; ``related`` (default: ``pods``) count the co-located pods."""
    pods = list(pods)
    per_node: dict[str, int] = {}
    for pod in (pods if related is None else related):
        node = (pod.get("spec") or {}).get("nodeName")
        if node:
            per_node[node] = per_node.get(node, 0) + 1
    return sorted(pods, key=lambda p: deletion_rank_key(
        p, per_node.get((p.get("spec") or {}).get("nodeName") or "", 0)))


def find_port(pod: dict, service_port: dict) -> int | None:
    """The container port a Service port's targetPort means on `pod` (k8s podutil.FindPort): a
    number is itself; a name is looked up in the ports of the pod's containers and of its
    sidecars (init containers with restartPolicy Always), with the Service port's protocol.
    None when the name is not there (the pod then offers the Service without that port).
    An absent targetPort is the port itself (the apiserver's default)."""
    target = service_port.get("targetPort", service_port.get("port"))
    if isinstance(target, bool):
        return None
    if isinstance(target, int):
        return target
    if not isinstance(target, str):
        return None
    protocol = service_port.get("protocol") or "TCP"
    spec = pod.get("spec") or {}
    sidecars = [c for c in spec.get("initContainers") or [] if c.get("restartPolicy") == "Always"]
    for container in list(spec.get("containers") or []) + sidecars:
        for port in container.get("ports") or []:
            if port.get("name") == target and (port.get("protocol") or "TCP") == protocol:
                value = port.get("containerPort")
                return value if isinstance(value, int) and not isinstance(value, bool) else None
    return None


def pod_from_template(template: dict, namespace: str, owner: dict, owner_kind: str,
                      name_prefix: str) -> dict:
    """k8s controller.GetPodFromTemplate: labels, annotations, finalizers and spec from the
    template, ``generateName`` <prefix>, a controller ownerReference to ``owner``."""
    tmeta = template.get("metadata") or {}
    metadata: dict = {"generateName": name_prefix, "namespace": namespace,
                      "labels": dict(tmeta.get("labels") or {}),
                      "ownerReferences": [owner_reference(owner, owner_kind)]}
    if tmeta.get("annotations"):
        metadata["annotations"] = dict(tmeta["annotations"])
    if tmeta.get("finalizers"):
        metadata["finalizers"] = list(tmeta["finalizers"])
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata,
            "spec": json_copy(template.get("spec") or {})}


# --- pod-template-hash ------------------------------------------------------------------------

POD_TEMPLATE_HASH = "pod-template-hash"
_SAFE_ALPHANUMS = "bcdfghjklmnpqrstvwxz2456789"  # k8s rand.SafeEncodeString's alphabet


# Go's hash/fnv: both variants are in use upstream, and they differ only in the order of the
# multiply and the xor, so they sit together to keep the choice visible.
_FNV32_OFFSET, _FNV32_PRIME = 0x811C9DC5, 0x01000193


def fnv1_32(data: bytes) -> int:
    """32-bit FNV-1 (Go's fnv.New32): ControllerRevision hashes (pkg/controller/history)."""
    h = _FNV32_OFFSET
    for byte in data:
        h = (h * _FNV32_PRIME) & 0xFFFFFFFF
        h ^= byte
    return h


def fnv1a_32(data: bytes) -> int:
    """32-bit FNV-1a (Go's fnv.New32a): the pod-template-hash (controller.ComputeHash)."""
    h = _FNV32_OFFSET
    for byte in data:
        h ^= byte
        h = (h * _FNV32_PRIME) & 0xFFFFFFFF
    return h


def safe_encode(text: str) -> str:
    """k8s rand.SafeEncodeString: map each byte onto consonants and digits that can't spell
    words (so names stay inoffensive)."""
    return "".join(_SAFE_ALPHANUMS[b % len(_SAFE_ALPHANUMS)] for b in text.encode())


def compute_hash(template: dict, collision_count: int | None = None) -> str:
    """The pod-template-hash of a pod template.

    Like k8s controller.ComputeHash: FNV-32a over a deterministic serialisation of the template,
    then (if a collisionCount is set) its 4 little-endian bytes, and the decimal of the 32-bit
    sum run through SafeEncodeString. Kubernetes serialises with go-spew; we use canonical JSON
    (sorted keys, compact separators) of the template *without* any pod-template-hash label, so
    the value is stable across processes and Python versions but not byte-identical to k8s'."""
    tmpl = strip_hash_label(template)
    data = json.dumps(tmpl, sort_keys=True, separators=(",", ":"), default=str).encode()
    if collision_count is not None:
        data += int(collision_count & 0xFFFFFFFF).to_bytes(4, "little")
    return safe_encode(str(fnv1a_32(data)))


def strip_hash_label(template: dict) -> dict:
    """A copy of a pod template without the pod-template-hash label (and with empty label /
    annotation maps normalised away), for template equality (k8s EqualIgnoreHash)."""
    return copy.deepcopy(_without_hash_label(template))


def _without_hash_label(template: dict) -> dict:
    # strip_hash_label's result, sharing everything below metadata.labels with `template`: a
    # read-only view for comparing, so a Deployment's sync copies no template per ReplicaSet
    tmpl = dict(template or {})
    tmeta = tmpl.get("metadata")
    if isinstance(tmeta, dict):
        tmeta = tmpl["metadata"] = dict(tmeta)
        labels = tmeta.get("labels")
        if isinstance(labels, dict) and POD_TEMPLATE_HASH in labels:
            tmeta["labels"] = {k: v for k, v in labels.items() if k != POD_TEMPLATE_HASH}
        for key in ("labels", "annotations"):
            if key in tmeta and not tmeta[key]:
                del tmeta[key]
        if not tmeta:
            del tmpl["metadata"]
    return tmpl


def equal_ignore_hash(a: dict, b: dict) -> bool:
    return _without_hash_label(a) == _without_hash_label(b)


def with_label(obj_labels: dict | None, key: str, value: str) -> dict:
    out = dict(obj_labels or {})
    out[key] = value
    return out
