"""kube-scheduler's default Filter plugins, as pure functions over Kubernetes-shaped dicts.

Every filter has the signature ``filter(pod, node, node_pods) -> None | str``: None when the
node passes, else the reason exactly as kube-scheduler words it. ``node_pods`` are the pods
already bound to the node. `FILTERS` lists them in the default profile's order (NodeUnschedulable,
NodeName, TaintToleration, NodeAffinity, NodeResourcesFit); the framework stops at a node's
first failing filter, as kube-scheduler does.

NodeResourcesFit can fail for several resources at once; kube-scheduler then reports every
insufficient resource as a separate reason of one status ("3 Insufficient cpu, 3 Insufficient
memory"). `node_resources_fit` returns the first reason (so it keeps the one-string contract)
and `node_resources_fit_reasons` returns them all; the framework uses the latter.

Also here: the request arithmetic shared with the scores (`pod_requests`, `node_requested`),
toleration matching and node-selector matching.
"""
from __future__ import annotations

import functools
import re
from typing import Callable, Iterable, NamedTuple, Optional

from kubemu.api import quantity

# Reasons, word for word as kube-scheduler's plugins return them.
ERR_UNSCHEDULABLE = "node(s) were unschedulable"
ERR_NODE_NAME = "node(s) didn't match the requested node name"
ERR_NODE_AFFINITY = "node(s) didn't match Pod's node affinity/selector"
ERR_TAINT = "node(s) had untolerated taint {{{key}: {value}}}"
ERR_INSUFFICIENT = "Insufficient {resource}"
ERR_TOO_MANY_PODS = "Too many pods"

TAINT_UNSCHEDULABLE = "node.kubernetes.io/unschedulable"
NO_SCHEDULE, PREFER_NO_SCHEDULE, NO_EXECUTE = "NoSchedule", "PreferNoSchedule", "NoExecute"

# What the scores count for a container that requests no cpu / memory
# (kube-scheduler's DefaultMilliCPURequest and DefaultMemoryRequest). Filters never use them.
DEFAULT_MILLI_CPU_REQUEST = 100
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024

Pod = dict
Node = dict


# --- requests -------------------------------------------------------------------------------

# Exact parsing of a quantity costs microseconds, and a cluster's pods and nodes spell few
# distinct ones ("100m", "64Mi"), each parsed again at every pod update the scheduler sees.
cpu_millis = functools.lru_cache(maxsize=1024)(quantity.cpu_millis)
memory_bytes = functools.lru_cache(maxsize=1024)(quantity.memory_bytes)

class Resources(NamedTuple):
    cpu: int = 0      # millicores
    memory: int = 0   # bytes

    def __add__(self, other):  # type: ignore[override]
        return Resources(self.cpu + other.cpu, self.memory + other.memory)

    def max(self, other: "Resources") -> "Resources":
        return Resources(max(self.cpu, other.cpu), max(self.memory, other.memory))


def _container_requests(container: dict, non_zero: bool) -> Resources:
    resources = container.get("resources") or {}
    requests = resources.get("requests") or {}
    limits = resources.get("limits") or {}

    def get(name: str, parse, default: int) -> int:
        # The apiserver defaults a missing request to the limit; do the same for pods that skipped it.
        value = requests.get(name, limits.get(name))
        if value is None:
            return default if non_zero else 0
        return parse(value)

    return Resources(get("cpu", cpu_millis, DEFAULT_MILLI_CPU_REQUEST),
                     get("memory", memory_bytes, DEFAULT_MEMORY_REQUEST))


def pod_requests(pod: Pod, non_zero: bool = False) -> Resources:
    """The pod's effective request, as Kubernetes' resource.PodRequests computes it.

    Sum of the app containers; each init container runs alone (next to the sidecars started
    before it), so the effective request is max(sum of app containers + sidecars, the largest
    init container + the sidecars before it); plus spec.overhead. Sidecars are init containers
    with restartPolicy: Always. With ``non_zero`` a container missing a cpu/memory request counts
    100m / 200Mi (what the scores use: NonZeroRequested)."""
    spec = pod.get("spec") or {}
    total = Resources()
    for c in spec.get("containers") or []:
        total += _container_requests(c, non_zero)
    sidecars = Resources()
    init_max = Resources()
    for c in spec.get("initContainers") or []:
        req = _container_requests(c, non_zero)
        if c.get("restartPolicy") == "Always":
            total += req
            sidecars += req
            init_max = init_max.max(sidecars)
        else:
            init_max = init_max.max(req + sidecars)
    total = total.max(init_max)
    overhead = spec.get("overhead") or {}
    if overhead:
        total += Resources(cpu_millis(overhead.get("cpu", 0)), memory_bytes(overhead.get("memory", 0)))
    return total


def is_terminal(pod: Pod) -> bool:
    """Succeeded/Failed pods hold no resources (kube-scheduler drops them from its cache)."""
    return ((pod.get("status") or {}).get("phase")) in ("Succeeded", "Failed")


def node_requested(node_pods: Iterable[Pod], non_zero: bool = False) -> Resources:
    total = Resources()
    for p in node_pods:
        if not is_terminal(p):
            total += pod_requests(p, non_zero)
    return total


class Allocatable(NamedTuple):
    cpu: int
    memory: int
    pods: Optional[int]  # None: no pod-count limit


def allocatable(node: Node) -> Allocatable:
    """status.allocatable (a missing cpu/memory is 0, as in Kubernetes; a missing `pods` is no
    limit, because kubemu's nodes need not publish one)."""
    alloc = (node.get("status") or {}).get("allocatable") or {}
    pods = alloc.get("pods")
    return Allocatable(cpu_millis(alloc.get("cpu", 0)), memory_bytes(alloc.get("memory", 0)),
                       None if pods is None else int(pods))


# --- tolerations ----------------------------------------------------------------------------

def toleration_tolerates_taint(toleration: dict, taint: dict) -> bool:
    """v1.Toleration.ToleratesTaint: an empty effect matches every effect, an empty key (only
    valid with Exists) every key; operator Exists ignores the value, Equal (the default)
    compares it."""
    effect = toleration.get("effect") or ""
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key") or ""
    if key and key != taint.get("key"):
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Exists":
        return True
    if operator == "Equal":
        return (toleration.get("value") or "") == (taint.get("value") or "")
    return False


def tolerations_tolerate_taint(tolerations: Iterable[dict], taint: dict) -> bool:
    return any(toleration_tolerates_taint(t, taint) for t in tolerations)


def pod_tolerations(pod: Pod) -> list:
    return list((pod.get("spec") or {}).get("tolerations") or [])


def node_taints(node: Node) -> list:
    return list((node.get("spec") or {}).get("taints") or [])


def find_untolerated_taint(taints: Iterable[dict], tolerations: list,
                           effects: tuple = (NO_SCHEDULE, NO_EXECUTE)) -> Optional[dict]:
    """The first taint (in node order) with one of ``effects`` that no toleration tolerates."""
    for taint in taints:
        if taint.get("effect") in effects and not tolerations_tolerate_taint(tolerations, taint):
            return taint
    return None


# --- node selectors -------------------------------------------------------------------------

_INT64 = re.compile(r"[+-]?[0-9]+")


def _parse_int64(s) -> Optional[int]:
    if not isinstance(s, str) or not _INT64.fullmatch(s):
        return None
    n = int(s)
    return n if -2**63 <= n < 2**63 else None


def match_expression(expr: dict, labels: dict) -> bool:
    """One NodeSelectorRequirement against a label set (labels.Selector semantics).

    In: present with a listed value; NotIn: absent or not listed; Exists / DoesNotExist;
    Gt / Lt: present, exactly one value, both integers, label > / < value. An invalid
    requirement (unknown operator, bad Gt/Lt value) matches nothing."""
    key = expr.get("key")
    op = expr.get("operator")
    values = expr.get("values") or []
    present = key in labels
    if op == "In":
        return present and labels[key] in values
    if op == "NotIn":
        return not present or labels[key] not in values
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if op in ("Gt", "Lt"):
        if not present or len(values) != 1:
            return False
        want, have = _parse_int64(values[0]), _parse_int64(labels[key])
        if want is None or have is None:
            return False
        return have > want if op == "Gt" else have < want
    return False


def _match_field(expr: dict, node: Node) -> bool:
    """matchFields: only metadata.name with In / NotIn is valid."""
    if expr.get("key") != "metadata.name" or expr.get("operator") not in ("In", "NotIn"):
        return False
    return match_expression(expr, {"metadata.name": node_name(node)})


def match_node_selector_term(term: dict, node: Node) -> bool:
    """A term ANDs its matchExpressions and matchFields; an empty term matches nothing."""
    exprs = (term or {}).get("matchExpressions") or []
    fields = (term or {}).get("matchFields") or []
    if not exprs and not fields:
        return False
    labels = node_labels(node)
    return all(match_expression(e, labels) for e in exprs) and all(_match_field(f, node) for f in fields)


def match_node_selector_terms(terms: Iterable[dict], node: Node) -> bool:
    """nodeSelectorTerms are ORed; no terms match nothing."""
    return any(match_node_selector_term(t, node) for t in terms)


def node_name(node: Node) -> str:
    return (node.get("metadata") or {}).get("name", "")


def node_labels(node: Node) -> dict:
    return (node.get("metadata") or {}).get("labels") or {}


def node_affinity(pod: Pod) -> dict:
    return (((pod.get("spec") or {}).get("affinity") or {}).get("nodeAffinity")) or {}


def pod_matches_node_selector_and_affinity(pod: Pod, node: Node) -> bool:
    spec = pod.get("spec") or {}
    labels = node_labels(node)
    for key, value in (spec.get("nodeSelector") or {}).items():
        if labels.get(key) != value:
            return False
    required = node_affinity(pod).get("requiredDuringSchedulingIgnoredDuringExecution")
    if required is not None:
        return match_node_selector_terms(required.get("nodeSelectorTerms") or [], node)
    return True


# --- the filters ----------------------------------------------------------------------------

def node_unschedulable(pod: Pod, node: Node, node_pods: list = ()) -> Optional[str]:
    """NodeUnschedulable: a cordoned node (spec.unschedulable) takes only pods tolerating the
    node.kubernetes.io/unschedulable:NoSchedule taint."""
    if not (node.get("spec") or {}).get("unschedulable"):
        return None
    taint = {"key": TAINT_UNSCHEDULABLE, "effect": NO_SCHEDULE}
    if tolerations_tolerate_taint(pod_tolerations(pod), taint):
        return None
    return ERR_UNSCHEDULABLE


def node_name_filter(pod: Pod, node: Node, node_pods: list = ()) -> Optional[str]:
    """NodeName: a pod naming a node (spec.nodeName) fits only that node."""
    wanted = (pod.get("spec") or {}).get("nodeName")
    if not wanted or wanted == node_name(node):
        return None
    return ERR_NODE_NAME


def taint_toleration(pod: Pod, node: Node, node_pods: list = ()) -> Optional[str]:
    """TaintToleration: every NoSchedule / NoExecute taint must be tolerated (PreferNoSchedule
    only scores). Reports the node's first untolerated taint. A NotReady / unreachable node
    carries the lifecycle controller's node.kubernetes.io/not-ready / unreachable taints, so
    it is filtered here with no special case."""
    taint = find_untolerated_taint(node_taints(node), pod_tolerations(pod))
    if taint is None:
        return None
    return ERR_TAINT.format(key=taint.get("key", ""), value=taint.get("value") or "")


def node_affinity_filter(pod: Pod, node: Node, node_pods: list = ()) -> Optional[str]:
    """NodeAffinity: spec.nodeSelector (every label equal) and the required node affinity
    (nodeSelectorTerms ORed, their expressions ANDed) must both match."""
    if pod_matches_node_selector_and_affinity(pod, node):
        return None
    return ERR_NODE_AFFINITY


def node_resources_fit_reasons(pod: Pod, node: Node, node_pods: list = ()) -> list:
    """NodeResourcesFit, every reason: "Too many pods" (only when allocatable.pods is set),
    "Insufficient cpu", "Insufficient memory". A resource the pod does not request always
    fits; otherwise request > allocatable - requests of the (non-terminal) pods bound here."""
    alloc = allocatable(node)
    live = [p for p in node_pods if not is_terminal(p)]
    reasons = []
    if alloc.pods is not None and len(live) + 1 > alloc.pods:
        reasons.append(ERR_TOO_MANY_PODS)
    want = pod_requests(pod)
    used = node_requested(live)
    if want.cpu > 0 and want.cpu > alloc.cpu - used.cpu:
        reasons.append(ERR_INSUFFICIENT.format(resource="cpu"))
    if want.memory > 0 and want.memory > alloc.memory - used.memory:
        reasons.append(ERR_INSUFFICIENT.format(resource="memory"))
    return reasons


def node_resources_fit(pod: Pod, node: Node, node_pods: list = ()) -> Optional[str]:
    """NodeResourcesFit's first reason (see node_resources_fit_reasons)."""
    reasons = node_resources_fit_reasons(pod, node, node_pods)
    return reasons[0] if reasons else None


class Filter(NamedTuple):
    name: str
    reasons: Callable[[Pod, Node, list], list]  # every reason; [] when the node passes
    # kube-scheduler's status code: UnschedulableAndUnresolvable (preemption cannot help)
    # or plain Unschedulable (evicting lower-priority pods might).
    unresolvable: bool


def _one(fn):
    def reasons(pod, node, node_pods):
        reason = fn(pod, node, node_pods)
        return [reason] if reason else []
    return reasons


# The default profile's filter order.
FILTERS = [
    Filter("NodeUnschedulable", _one(node_unschedulable), True),
    Filter("NodeName", _one(node_name_filter), True),
    Filter("TaintToleration", _one(taint_toleration), True),
    Filter("NodeAffinity", _one(node_affinity_filter), True),
    Filter("NodeResourcesFit", node_resources_fit_reasons, False),
]
