"""kube-scheduler's default Score plugins, as pure functions over Kubernetes-shaped dicts.

A score plugin is ``raw(pod, node, node_pods) -> int`` plus an optional ``normalize(raws)``
over all feasible nodes (a dict node name -> raw score) that maps them onto 0..100, like a
plugin's ScoreExtensions.NormalizeScore. `SCORES` lists them with the default profile's weights:

  TaintToleration                  3   fewer untolerated PreferNoSchedule taints (normalised, reversed)
  NodeAffinity                     2   sum of weights of matching preferred terms (normalised)
  OwnerSpread                      2   fewer pods of the same owner (stands in for PodTopologySpread)
  NodeResourcesFit (LeastAllocated) 1  free share of cpu and memory
  NodeResourcesBalancedAllocation  1   cpu and memory used in the same proportion

All arithmetic is kube-scheduler's: int64 with truncating division, floats where it uses them.
"""
from __future__ import annotations

from typing import Callable, NamedTuple, Optional

from .filters import (PREFER_NO_SCHEDULE, allocatable, is_terminal, match_node_selector_term,
                      node_affinity, node_requested, node_taints, pod_requests, pod_tolerations,
                      tolerations_tolerate_taint)

MAX_NODE_SCORE = 100

Pod = dict
Node = dict


def _go_div(a: int, b: int) -> int:
    """Go's int64 division truncates toward zero."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


# --- NodeResourcesFit, LeastAllocated -------------------------------------------------------

def least_requested_score(requested: int, capacity: int) -> int:
    """(capacity - requested) * 100 / capacity; 0 with no capacity or when over-committed."""
    if capacity == 0 or requested > capacity:
        return 0
    return (capacity - requested) * MAX_NODE_SCORE // capacity   # >= 0: Go's division is floor division here


def least_allocated(pod: Pod, node: Node, node_pods: list = ()) -> int:
    """NodeResourcesFit's default LeastAllocated strategy: the mean (cpu and memory weigh 1 each)
    of the free percentage left after placing the pod. Requests are "non-zero" ones: a container
    without a cpu / memory request counts 100m / 200Mi, so best-effort pods still spread."""
    alloc = allocatable(node)
    requested = node_requested(node_pods, non_zero=True) + pod_requests(pod, non_zero=True)
    return least_allocated_score(requested.cpu, requested.memory, alloc.cpu, alloc.memory)


def least_allocated_score(cpu: int, memory: int, cpu_capacity: int, memory_capacity: int) -> int:
    """LeastAllocated from the node's non-zero requests with the pod's added."""
    total = least_requested_score(cpu, cpu_capacity) + least_requested_score(memory, memory_capacity)
    return total // 2   # both terms are >= 0: Go's truncating division is floor division here


# --- NodeResourcesBalancedAllocation --------------------------------------------------------

def balanced_allocation(pod: Pod, node: Node, node_pods: list = ()) -> int:
    """(1 - std) * 100, std the standard deviation of the cpu and memory fractions requested
    (node's pods plus this one, real requests, each fraction capped at 1); for two resources
    std = |cpu_fraction - memory_fraction| / 2. A resource with no allocatable is skipped."""
    alloc = allocatable(node)
    requested = node_requested(node_pods) + pod_requests(pod)
    return balanced_score(requested.cpu, requested.memory, alloc.cpu, alloc.memory)


def balanced_score(cpu: int, memory: int, cpu_capacity: int, memory_capacity: int) -> int:
    """BalancedAllocation from the node's requests with the pod's added."""
    if not (cpu_capacity and memory_capacity):
        return MAX_NODE_SCORE   # one fraction or none: no deviation
    std = abs((min(cpu / cpu_capacity, 1.0) - min(memory / memory_capacity, 1.0)) / 2)
    return int((1 - std) * MAX_NODE_SCORE)


# --- spreading of one owner's pods ----------------------------------------------------------

def owner_key(pod: Pod) -> Optional[str]:
    """The owner that groups a pod with its siblings: the controller ownerReference (else the
    first one), by uid, falling back to kind/name."""
    refs = (pod.get("metadata") or {}).get("ownerReferences") or []
    if not refs:
        return None
    ref = next((r for r in refs if r.get("controller")), refs[0])
    return ref.get("uid") or f"{ref.get('kind')}/{ref.get('name')}"


def _owner_keys(pod: Pod) -> set:
    refs = (pod.get("metadata") or {}).get("ownerReferences") or []
    return {r.get("uid") or f"{r.get('kind')}/{r.get('name')}" for r in refs}


def same_owner_count(pod: Pod, node: Node, node_pods: list = ()) -> int:
    """Raw OwnerSpread score: pods on the node, in the pod's namespace, not terminating nor
    terminal, that share the pod's owner (0 for a pod without owner)."""
    key = owner_key(pod)
    if key is None:
        return 0
    meta = pod.get("metadata") or {}
    namespace, uid = meta.get("namespace", "default"), meta.get("uid")
    count = 0
    for other in node_pods:
        ometa = other.get("metadata") or {}
        if ometa.get("namespace", "default") != namespace or ometa.get("deletionTimestamp"):
            continue
        if is_terminal(other) or (uid and ometa.get("uid") == uid):
            continue
        if key in _owner_keys(other):
            count += 1
    return count


def normalize_spread(raw: dict) -> dict:
    """SelectorSpread's NormalizeScore (node level, no zones): 100 * (max - count) / max, every
    node 100 when none holds a sibling. Fewer siblings, higher score."""
    most = max(raw.values(), default=0)
    return {name: spread_score(count, most) for name, count in raw.items()}


def spread_score(count: int, most: int) -> int:
    """One node's normalised OwnerSpread score; `most` the largest count among the nodes scored."""
    if most == 0:
        return MAX_NODE_SCORE
    return int(MAX_NODE_SCORE * ((most - count) / most))


# --- NodeAffinity (preferred) ---------------------------------------------------------------

def preferred_affinity_weight(pod: Pod, node: Node, node_pods: list = ()) -> int:
    """Raw NodeAffinity score: the summed weights of the preferredDuringScheduling terms whose
    preference matches the node (an empty preference matches nothing)."""
    terms = node_affinity(pod).get("preferredDuringSchedulingIgnoredDuringExecution") or []
    return sum(int(t.get("weight") or 0) for t in terms
               if t.get("weight") and match_node_selector_term(t.get("preference") or {}, node))


def default_normalize(raw: dict, reverse: bool = False) -> dict:
    """helper.DefaultNormalizeScore: scale to 100 * score / max; reversed: 100 - that. With every
    score 0: all 0, or all 100 when reversed."""
    most = max(raw.values(), default=0)
    return {name: normalized_score(score, most, reverse) for name, score in raw.items()}


def normalized_score(score: int, most: int, reverse: bool = False) -> int:
    """One node's DefaultNormalizeScore; `most` the largest raw score among the nodes scored."""
    if most == 0:
        return MAX_NODE_SCORE if reverse else 0
    scaled = _go_div(MAX_NODE_SCORE * score, most)
    return MAX_NODE_SCORE - scaled if reverse else scaled


# --- TaintToleration ------------------------------------------------------------------------

def intolerable_prefer_no_schedule(pod: Pod, node: Node, node_pods: list = ()) -> int:
    """Raw TaintToleration score: PreferNoSchedule taints not tolerated by the pod's tolerations
    whose effect is empty or PreferNoSchedule."""
    tolerations = [t for t in pod_tolerations(pod)
                   if (t.get("effect") or "") in ("", PREFER_NO_SCHEDULE)]
    return sum(1 for taint in node_taints(node)
               if taint.get("effect") == PREFER_NO_SCHEDULE
               and not tolerations_tolerate_taint(tolerations, taint))


def normalize_reverse(raw: dict) -> dict:
    return default_normalize(raw, reverse=True)


class Score(NamedTuple):
    name: str
    weight: int
    raw: Callable[[Pod, Node, list], int]
    normalize: Optional[Callable[[dict], dict]]  # None: raw is already 0..100


SCORES = [
    Score("TaintToleration", 3, intolerable_prefer_no_schedule, normalize_reverse),
    Score("NodeAffinity", 2, preferred_affinity_weight, default_normalize),
    Score("OwnerSpread", 2, same_owner_count, normalize_spread),
    Score("NodeResourcesFit", 1, least_allocated, None),
    Score("NodeResourcesBalancedAllocation", 1, balanced_allocation, None),
]


def score_nodes(pod: Pod, nodes: list, pods_by_node: dict, scores: list = SCORES) -> dict:
    """Per feasible node, per plugin, the normalised 0..100 score: {node: {plugin: score}}."""
    names = [(n.get("metadata") or {}).get("name", "") for n in nodes]
    table: dict = {name: {} for name in names}
    for plugin in scores:
        raw = {name: plugin.raw(pod, node, pods_by_node.get(name, []))
               for name, node in zip(names, nodes)}
        final = plugin.normalize(raw) if plugin.normalize else raw
        for name in names:
            table[name][plugin.name] = final[name]
    return table


def total_score(per_plugin: dict, scores: list = SCORES) -> int:
    """The weighted sum kube-scheduler ranks nodes by."""
    return sum(plugin.weight * per_plugin.get(plugin.name, 0) for plugin in scores)
